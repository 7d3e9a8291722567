import type { LlmMessage } from '../llm/llm.types';
import { withRefs } from '../tools/result-refs';
import type { ToolResultKind } from '../tools/tool.types';
import { groundAnswer } from './grounding';
import type { ColumnMeaning } from './grounding-evidence';
import {
  FigureReferences,
  MAX_REFERENCES,
  nextResultNumber,
  numberedResults,
  parseReference,
  UNAVAILABLE_FIGURE,
  withheldWithRef,
} from './figure-references';

const KINDS: Record<string, ToolResultKind> = {
  aggregate_data: 'rows',
  get_record: 'rows',
  calculate: 'value',
  visualize: 'chart',
};
const kindOf = (name: string) => KINDS[name];

const OWNERS = {
  rows: [
    { owner: 'Lucas Moreau', won_revenue: 55_331_292, win_rate: 0.4521, deals: 49 },
    { owner: 'Marcus Silva', won_revenue: 38_790_967.5, win_rate: 0.3875, deals: 20 },
    { owner: null, won_revenue: 1_204_000, win_rate: 0.5, deals: 2 },
  ],
};
const DEAL = {
  id: '6e0293e1-5764-4126-ad12-133f000007cf',
  name: 'Ironclad renewal',
  amount: 9_180_000,
  close_date: '2023-01-04',
};
const CALC = { value: 16_540_324.5, operands: [{ text: '55331292', toolCallId: 'call_owners' }] };

const MEANINGS: Record<string, Record<string, ColumnMeaning>> = {
  call_owners: { won_revenue: { kind: 'money', currency: 'USD' }, win_rate: { kind: 'ratio' }, deals: { kind: 'count' } },
  call_deal: { amount: { kind: 'money', currency: 'USD' } },
};

/** A conversation whose calls returned the results above, numbered as the loop numbers them. */
function conversation(): LlmMessage[] {
  const call = (id: string, name: string, args: unknown) => ({
    id,
    type: 'function' as const,
    function: { name, arguments: JSON.stringify(args) },
  });
  return [
    { role: 'user', content: 'Who leads?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        call('call_owners', 'aggregate_data', { objectName: 'deal', groupBy: ['owner'] }),
        call('call_chart', 'visualize', { source: 'call_owners' }),
        call('call_deal', 'get_record', { objectName: 'deal', recordId: DEAL.id }),
      ],
    },
    { role: 'tool', tool_call_id: 'call_owners', content: JSON.stringify(withRefs(OWNERS, 'rows', 1)) },
    { role: 'tool', tool_call_id: 'call_chart', content: JSON.stringify({ spec: {}, rows: 2 }) },
    { role: 'tool', tool_call_id: 'call_deal', content: JSON.stringify(withRefs(DEAL, 'rows', 2)) },
    { role: 'assistant', content: null, tool_calls: [call('call_gap', 'calculate', { expression: '55331292 - 38790967.5' })] },
    { role: 'tool', tool_call_id: 'call_gap', content: JSON.stringify(withRefs(CALC, 'value', 3)) },
  ];
}

function references(messages = conversation(), locale?: string): FigureReferences {
  return new FigureReferences(
    () => numberedResults(messages, kindOf),
    (sources) => Promise.resolve(sources.map((s) => ({ ...s, columns: MEANINGS[s.toolCallId] }))),
    locale,
  );
}

describe('parseReference', () => {
  it.each([
    ['{{r3.2.won_revenue}}', { result: 3, row: 2, column: 'won_revenue' }],
    ['{{ r3.2.won_revenue | compact }}', { result: 3, row: 2, column: 'won_revenue', format: 'compact' }],
    ['{{r4}}', { result: 4 }],
    ['{{r1.1.metadata.seats}}', { result: 1, row: 1, column: 'metadata.seats' }],
  ])('reads %s', (raw, parsed) => expect(parseReference(raw)).toEqual(parsed));

  it.each(['{{r0.1.x}}', '{{x1.1.a}}', '{{r1.1.a b}}', '{r1.1.a}', '{{r1.1.a}', `{{r1.1.${'a'.repeat(200)}}}`])(
    'refuses %s',
    (raw) => expect(parseReference(raw)).toBeUndefined(),
  );
});

describe('withRefs and the numbering', () => {
  it('puts the result ref first and a ref on every row, a value result cited whole', () => {
    const rows = withRefs(OWNERS, 'rows', 5) as { resultRef: string; rows: Array<{ ref: string }> };
    expect(JSON.stringify(rows).startsWith('{"resultRef":"r5"')).toBe(true);
    expect(rows.rows.map((r) => r.ref)).toEqual(['r5.1', 'r5.2', 'r5.3']);
    expect(withRefs(DEAL, 'rows', 2)).toMatchObject({ resultRef: 'r2', ref: 'r2.1', amount: 9_180_000 });
    expect(withRefs(CALC, 'value', 3)).toMatchObject({ resultRef: 'r3', ref: 'r3', value: 16_540_324.5 });
  });

  it('numbers after every earlier result, a withheld one included', () => {
    const messages = conversation();
    expect(nextResultNumber(messages)).toBe(4);
    messages.push({
      role: 'tool',
      tool_call_id: 'call_x',
      content: withheldWithRef('result withheld: produced under other access', 'r7'),
    });
    expect(nextResultNumber(messages)).toBe(8);
    expect(numberedResults(messages, kindOf).get(7)).toEqual({ toolCallId: 'call_x', name: 'unknown' });
  });
});

describe('FigureReferences.render', () => {
  it('fills in each cell formatted for its column and the locale', async () => {
    const shown = await references().render(
      'Lucas Moreau leads with {{r1.1.won_revenue}} ({{r1.1.win_rate}} win rate, {{r1.1.deals}} deals), ' +
        '{{r3|compact}} ahead of Marcus Silva; the largest deal closed on {{r2.1.close_date}}.',
    );
    expect(shown.text).toBe(
      'Lucas Moreau leads with $55,331,292 (45.2% win rate, 49 deals), $16.5M ahead of Marcus Silva; the largest deal closed on Jan 4, 2023.',
    );
    expect(shown.references.map((r) => [r.ref, shown.text.slice(r.start, r.end)])).toEqual([
      ['r1.1.won_revenue', '$55,331,292'],
      ['r1.1.win_rate', '45.2%'],
      ['r1.1.deals', '49'],
      ['r3', '$16.5M'],
      ['r2.1.close_date', 'Jan 4, 2023'],
    ]);
  });

  it('writes numbers as the agent locale does', async () => {
    const shown = await references(conversation(), 'de-DE').render(
      '{{r1.2.won_revenue}} / {{r1.1.won_revenue|compact}} / {{r1.1.win_rate}}',
    );
    // Intl keeps a number and its unit together with no-break spaces.
    expect(shown.text.replace(/\u00a0/g, ' ')).toBe('38.790.967,50 $ / 55,3 Mio. $ / 45,2 %');
  });

  it('shows [figure unavailable] for a result, row or column that does not exist, and says which', async () => {
    const shown = await references().render(
      '{{r9.1.won_revenue}} {{r1.4.won_revenue}} {{r1.1.pipeline}} {{r1.1.ref}} {{r3.1.value}}',
    );
    expect(shown.text).toBe(Array(5).fill(UNAVAILABLE_FIGURE).join(' '));
    expect(shown.references.map((r) => r.unresolved)).toEqual([
      'unknown_result',
      'unknown_row',
      'unknown_column',
      'unknown_column',
      'unknown_row',
    ]);
  });

  it('shows a malformed reference as unavailable, never as raw braces', async () => {
    const shown = await references().render('{{r1.0.won_revenue}}, {{ r1.1.won revenue }}, {{r1.1}} and {{r1.1.deals|wide}}');
    expect(shown.text).toBe(
      Array(4)
        .fill(UNAVAILABLE_FIGURE)
        .join(', ')
        .replace(/, (?=[^,]*$)/, ' and '),
    );
    expect(shown.references.map((r) => [r.ref, r.unresolved])).toEqual([
      ['r1.0.won_revenue', 'malformed'],
      ['r1.1.won revenue', 'malformed'],
      ['r1.1', 'unknown_column'],
      ['r1.1.deals', 'bad_format'],
    ]);
  });

  it('writes a timestamp with its time of day (UTC) and a date without one', () => {
    expect(references().format('2024-03-05T14:30:00Z', undefined, undefined).replace(/\s/g, ' ')).toBe('Mar 5, 2024, 2:30 PM');
    expect(references().format('2024-03-05', undefined, undefined)).toBe('Mar 5, 2024');
  });

  it('leaves text that is no reference as it is', async () => {
    const text = 'Use {{ braces }}, {r1.1.deals} or {{{r1.1.deals}} and a lone {';
    expect((await references().render(text)).text).toBe('Use {{ braces }}, {r1.1.deals} or {49 and a lone {');
  });
});

describe('FigureReferences on hostile text', () => {
  it('reads 200 KB of braces that are no reference in one pass and shows them as written', async () => {
    const text = '{{'.repeat(50_000) + '{{r1 '.repeat(20_000);
    const shown = await references().render(text);
    expect(shown.text).toBe(text);
    expect(shown.references).toEqual([]);
  });

  it(`fills in at most ${MAX_REFERENCES} references of one answer`, async () => {
    const shown = await references().render('{{r1.1.deals}} '.repeat(MAX_REFERENCES + 5));
    expect(shown.references.filter((r) => r.cell)).toHaveLength(MAX_REFERENCES);
    expect(shown.references.slice(MAX_REFERENCES).map((r) => [r.text, r.unresolved])).toEqual(
      Array(5).fill([UNAVAILABLE_FIGURE, 'too_many']),
    );
  });
});

describe('FigureReferences: a unit typed again after a figure that shows it', () => {
  it.each([
    ['{{r1.1.won_revenue|compact}} $ won', '$55.3M won'],
    ['{{r1.1.won_revenue}} USD', '$55,331,292'],
    ['{{r1.1.won_revenue|compact}} dollars, then', '$55.3M, then'],
    ['{{r1.1.win_rate}}% of deals', '45.2% of deals'],
    ['{{r1.1.win_rate}} % ({{r1.1.deals}} deals)', '45.2% (49 deals)'],
  ])('drops it from %s', async (answer, shown) => expect((await references().render(answer)).text).toBe(shown));

  it.each([
    ['{{r1.1.deals}} $', '49 $'],
    ['{{r1.1.won_revenue|compact}} $5 more', '$55.3M $5 more'],
    ['{{r1.1.won_revenue|compact}} dollarsign', '$55.3M dollarsign'],
    ['{{r1.1.won_revenue|compact}} € in Europe', '$55.3M € in Europe'],
  ])('keeps a unit the figure does not show, or a word that only starts like one: %s', async (answer, shown) =>
    expect((await references().render(answer)).text).toBe(shown),
  );

  it.each([1, 2, 5])('drops it in a stream too, in chunks of %d characters', async (size) => {
    const answer = 'Total: {{r1.1.won_revenue|compact}} dollars and {{r1.1.win_rate}} %';
    const emitted: string[] = [];
    const stream = references().stream((text) => emitted.push(text));
    for (let i = 0; i < answer.length; i += size) stream.push(answer.slice(i, i + size));
    await stream.end();
    expect(emitted.join('')).toBe('Total: $55.3M and 45.2%');
  });
});

describe('FigureReferences.stream', () => {
  const answer = 'Lucas Moreau leads with {{r1.1.won_revenue}}; {{ not one }} and {{r1.2.deals|int}} deals for Marcus {';

  it.each([1, 2, 3, 7, 40])(
    'never shows half a reference, in chunks of %d characters, and ends as the whole render',
    async (size) => {
      const emitted: string[] = [];
      const stream = references().stream((text) => emitted.push(text));
      for (let i = 0; i < answer.length; i += size) stream.push(answer.slice(i, i + size));
      await stream.end();
      expect(emitted.join('')).toBe((await references().render(answer)).text);
      expect(emitted.some((text) => /\{\{r|\.won_revenue|r1\.2/.test(text))).toBe(false);
    },
  );

  it('lets out a {{ that never closes once it is too long to be a reference', async () => {
    const emitted: string[] = [];
    const stream = references().stream((text) => emitted.push(text));
    stream.push('{{');
    stream.push('x'.repeat(200));
    await new Promise((resolve) => setImmediate(resolve));
    expect(emitted.join('')).toBe(`{{${'x'.repeat(200)}`);
    await stream.end();
  });
});

describe('groundAnswer with references', () => {
  async function ground(answer: string) {
    const shown = await references().render(answer);
    return groundAnswer(shown.text, [], { references: shown.references });
  }

  it('gives a receipt for each filled-in figure and counts them apart from typed ones', async () => {
    const grounding = await ground('Lucas Moreau leads with {{r1.1.won_revenue}}, 49 deals.');
    expect(grounding.receipts).toEqual([
      {
        ref: 'r1.1.won_revenue',
        text: '$55,331,292',
        toolCallId: 'call_owners',
        tool: 'aggregate_data',
        row: 1,
        column: 'won_revenue',
        value: 55_331_292,
      },
    ]);
    expect(grounding.supported[0]).toMatchObject({ text: '$55,331,292', ref: 'r1.1.won_revenue', entityChecked: true });
    // 49 was typed: no result of this turn's sources holds it, so it is checked as written.
    expect(grounding.summary).toEqual({ referenced: 1, typed: 1, supported: 1, unsupported: 1 });
  });

  it('flags a reference to a row its clause does not name as other_row', async () => {
    const grounding = await ground('Marcus Silva leads with {{r1.1.won_revenue}}.');
    expect(grounding.unsupported).toEqual([{ text: '$55,331,292', reason: 'other_row', ref: '{{r1.1.won_revenue}}' }]);
  });

  it('flags a reference to a row whose owner is empty, said of a person, as other_row', async () => {
    const grounding = await ground('Marcus Silva wins {{r1.3.win_rate}} of his deals.');
    expect(grounding.unsupported).toEqual([{ text: '50%', reason: 'other_row', ref: '{{r1.3.win_rate}}' }]);
    expect((await ground('Deals without an owner won {{r1.3.win_rate}}.')).unsupported).toEqual([]);
  });

  it.each([
    ['a table row', '| owner | won |\n|---|---|\n| Marcus Silva | {{r1.1.won_revenue}} |', true],
    ['a table row, right', '| owner | won |\n|---|---|\n| Lucas Moreau | {{r1.1.won_revenue}} |', false],
    ['a numbered list', '1. Marcus Silva — {{r1.1.won_revenue|compact}}', true],
    ['a bullet with a colon', '- Marcus Silva: {{r1.1.won_revenue|compact}} ({{r1.1.deals}} deals)', true],
    ['German', 'Marcus Silva führt mit {{r1.1.won_revenue|compact}}.', true],
    ['Spanish, after a comma', 'El mejor vendedor es Marcus Silva, con {{r1.1.won_revenue|compact}}.', true],
    ['bold, in parentheses', 'Top seller: **Marcus Silva** ({{r1.1.won_revenue|compact}})', true],
    ['two names, the second wrong', 'Lucas Moreau won {{r1.1.won_revenue}}, Marcus Silva {{r1.3.won_revenue}}.', true],
    ['two names, both right', 'Lucas Moreau won {{r1.1.won_revenue}}; Marcus Silva {{r1.2.won_revenue}}.', false],
    [
      'a list line naming a person for the row with no owner',
      '1. Lucas Moreau — {{r1.1.won_revenue}}\n2. Marcus Silva — {{r1.3.won_revenue}}',
      true,
    ],
  ])('checks the row of a reference in %s', async (_layout, answer, wrong) => {
    expect((await ground(answer)).unsupported.some((u) => u.reason === 'other_row')).toBe(wrong);
  });

  it('flags a reference that does not resolve as bad_reference', async () => {
    const grounding = await ground('Lucas Moreau leads with {{r1.9.won_revenue}}.');
    expect(grounding.unsupported).toEqual([{ text: UNAVAILABLE_FIGURE, reason: 'bad_reference', ref: '{{r1.9.won_revenue}}' }]);
    expect(grounding.receipts).toEqual([]);
  });

  it("pairs references with the names they take turns with, and reads names in the answer's language", async () => {
    // Row 1 is Lucas Moreau's, row 2 Marcus Silva's.
    expect((await ground('{{r1.1.deals}} deals for Lucas Moreau and {{r1.2.deals}} for Marcus Silva.')).unsupported).toEqual([]);
    expect((await ground('{{r1.2.deals}} deals for Lucas Moreau and {{r1.1.deals}} for Marcus Silva.')).unsupported).toHaveLength(
      2,
    );
  });

  it('checks a reference to a computed value against no row', async () => {
    expect((await ground('Deals without an owner trail Lucas Moreau by {{r3}}.')).unsupported).toEqual([]);
  });

  it('reads no figure inside a filled-in reference', async () => {
    const grounding = await ground('The gap is {{r3}} and the deal was {{r2.1.amount}}.');
    expect(grounding).toMatchObject({ numbers: 2, unsupported: [], summary: { referenced: 2, typed: 0 } });
  });
});
