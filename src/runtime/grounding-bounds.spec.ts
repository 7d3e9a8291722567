import { withRefs } from '../tools/result-refs';
import type { LlmMessage } from '../llm/llm.types';
import { FigureReferences, numberedResults } from './figure-references';
import { GROUNDING_MAX_CHARS, groundBounded } from './grounding-bounds';
import type { GroundingSource } from './grounding-evidence';

const CONTENT = { rows: [{ stage: 'won', n: 451 }] };
const SOURCE: GroundingSource = {
  toolCallId: 'call_1',
  name: 'aggregate_data',
  holds: 'rows',
  arguments: { objectName: 'deal', groupBy: ['stage'] },
  content: withRefs(CONTENT, 'rows', 1),
  columns: { n: { kind: 'count', counts: 'deal' } },
};

describe('groundBounded', () => {
  it('checks a short answer whole', () => {
    expect(groundBounded('We won 999 deals.', [SOURCE]).unsupported).toEqual([{ text: '999', reason: 'no_such_value' }]);
    expect(groundBounded('We won 999 deals.', [SOURCE]).uncheckedFrom).toBeUndefined();
  });

  it('checks a long answer up to the limit, says where it stopped, and still gives receipts past it', async () => {
    const messages: LlmMessage[] = [
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'aggregate_data', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: JSON.stringify(SOURCE.content) },
    ];
    const references = new FigureReferences(
      () => numberedResults(messages, () => 'rows'),
      (sources) => Promise.resolve(sources.map((s) => ({ ...s, columns: SOURCE.columns }))),
      'en',
    );
    const filler = 'The pipeline is healthy. '.repeat(Math.ceil(GROUNDING_MAX_CHARS / 25));
    const shown = await references.render(`We won 999 deals. ${filler} Later: 777 and {{r1.1.n}} won deals.`);
    const grounding = groundBounded(shown.text, [SOURCE], { references: shown.references });

    expect(grounding.uncheckedFrom).toBeGreaterThan(GROUNDING_MAX_CHARS / 2);
    expect(grounding.uncheckedFrom).toBeLessThanOrEqual(GROUNDING_MAX_CHARS);
    // 999 is within the checked part; 777 is past it.
    expect(grounding.unsupported).toEqual([{ text: '999', reason: 'no_such_value' }]);
    expect(grounding.receipts).toEqual([expect.objectContaining({ ref: 'r1.1.n', text: '451', value: 451 })]);
    expect(grounding.summary).toMatchObject({ referenced: 1 });
  });
});
