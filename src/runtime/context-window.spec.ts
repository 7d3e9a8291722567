import { DomainError } from '../common/domain-error';
import type { LlmMessage, LlmTool } from '../llm/llm.types';
import { CountTokens, elisionMarker, estimateTokens, fitToContext, loadTokenizer } from './context-window';

/** A counter that is easy to reason about: a token per four characters. */
const quarter: CountTokens = (text) => Math.ceil(text.length / 4);
const load = () => Promise.resolve(quarter);

const SYSTEM: LlmMessage = { role: 'system', content: 'You answer questions about the CRM data.' };
const TOOLS: LlmTool[] = [
  { type: 'function', function: { name: 'query_records', description: 'Query records', parameters: { type: 'object' } } },
];

/** One finished turn: a question, a tool call with a result of `resultChars` characters, and the answer. */
function turn(n: number, resultChars: number): LlmMessage[] {
  return [
    { role: 'user', content: `Question ${n}` },
    step(`call_${n}`),
    { role: 'tool', tool_call_id: `call_${n}`, content: `${n}`.padEnd(resultChars, 'x') },
    { role: 'assistant', content: `Answer ${n}` },
  ];
}

function step(id: string): LlmMessage {
  return {
    role: 'assistant',
    content: null,
    tool_calls: [{ id, type: 'function', function: { name: 'query_records', arguments: '{"objectName":"deal"}' } }],
  };
}

function result(id: string, chars: number): LlmMessage {
  return { role: 'tool', tool_call_id: id, content: 'r'.repeat(chars) };
}

/** Every tool message answers a call of an assistant message sent before it, and every call has its answer. */
function expectPairedToolCalls(messages: LlmMessage[]): void {
  const open = new Set<string>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      expect(open.size).toBe(0);
      for (const call of message.tool_calls ?? []) open.add(call.id);
    } else if (message.role === 'tool') {
      expect(open.has(message.tool_call_id)).toBe(true);
      open.delete(message.tool_call_id);
    } else {
      expect(open.size).toBe(0);
    }
  }
}

const contentOf = (messages: LlmMessage[]) => messages.map((m) => (typeof m.content === 'string' ? m.content : null));

describe('fitToContext', () => {
  it('sends a conversation that fits as it is, without loading the tokenizer when its bytes fit', async () => {
    const messages = [SYSTEM, ...turn(1, 100), { role: 'user', content: 'Question 2' } as LlmMessage];
    const loader = jest.fn(load);
    const fitted = await fitToContext({ messages, tools: TOOLS, budget: 10_000, pinned: 1 }, loader);
    expect(fitted.messages).toBe(messages);
    expect(loader).not.toHaveBeenCalled();
    expect(fitted).toMatchObject({ elidedResults: 0, droppedTurns: 0 });
  });

  it('elides the oldest tool results first, only as many as needed, with a marker the model can read', async () => {
    const messages = [
      SYSTEM,
      ...turn(1, 4000),
      ...turn(2, 4000),
      ...turn(3, 4000),
      { role: 'user', content: 'Question 4' } as LlmMessage,
    ];
    const before = structuredClone(messages);
    const full = estimateTokens(messages, TOOLS, quarter);
    // Room for all but about one and a half results: the two oldest go, the newest stays.
    const fitted = await fitToContext({ messages, tools: TOOLS, budget: full - 1500, pinned: 1 }, load);

    expect(fitted).toMatchObject({ elidedResults: 2, elidedCharacters: 8000, droppedTurns: 0 });
    const tools = fitted.messages.filter((m) => m.role === 'tool');
    expect(contentOf(tools)).toEqual([elisionMarker(4000), elisionMarker(4000), '3'.padEnd(4000, 'x')]);
    expect(fitted.messages).toHaveLength(messages.length);
    expect(fitted.estimatedTokens).toBe(estimateTokens(fitted.messages, TOOLS, quarter));
    expect(fitted.estimatedTokens).toBeLessThanOrEqual(full - 1500);
    expectPairedToolCalls(fitted.messages);
    // The conversation itself is untouched.
    expect(messages).toEqual(before);
  });

  it('then leaves out the oldest whole turns, never the system message or the latest question', async () => {
    const context: LlmMessage = { role: 'user', content: 'Where the user is: {"objectName":"deal"}' };
    const history = Array.from({ length: 20 }, (_, i) => turn(i + 1, 400)).flat();
    const messages = [SYSTEM, context, ...history, { role: 'user', content: 'Question 21' } as LlmMessage];
    const fitted = await fitToContext({ messages, tools: TOOLS, budget: 300, pinned: 2 }, load);

    // Every earlier result went before any turn did; those of the turns left out count as left out.
    expect(fitted.droppedTurns).toBeGreaterThan(0);
    expect(fitted.elidedResults).toBe(20 - fitted.droppedTurns);
    expect(fitted.elidedCharacters).toBe(400 * fitted.elidedResults);
    expect(fitted.messages.filter((m) => m.role === 'tool').every((m) => m.content === elisionMarker(400))).toBe(true);
    expect(fitted.droppedMessages).toBe(fitted.droppedTurns * 4);
    expect(fitted.messages.slice(0, 2)).toEqual([SYSTEM, context]);
    expect(fitted.messages.at(-1)).toEqual({ role: 'user', content: 'Question 21' });
    // What is left of the history is its newest turns, whole, starting at a question.
    const kept = fitted.messages.slice(2, -1);
    expect(kept[0]).toEqual({ role: 'user', content: `Question ${fitted.droppedTurns + 1}` });
    expect(kept.length % 4).toBe(0);
    expectPairedToolCalls(fitted.messages);
    expect(fitted.estimatedTokens).toBeLessThanOrEqual(300);
    expect(estimateTokens(fitted.messages, TOOLS, quarter)).toBe(fitted.estimatedTokens);
  });

  it("elides the current turn's earlier results last, and never those of its latest step", async () => {
    const question: LlmMessage = { role: 'user', content: 'Compare this year with last year' };
    const messages = [
      SYSTEM,
      ...turn(1, 2000),
      question,
      step('call_a'),
      result('call_a', 2000),
      step('call_b'),
      result('call_b', 2000),
      step('call_c'),
      result('call_c', 2000),
    ];
    const fitted = await fitToContext({ messages, tools: TOOLS, budget: 900, pinned: 1 }, load);

    expect(fitted.droppedTurns).toBe(1);
    expect(fitted.messages[1]).toEqual(question);
    expect(contentOf(fitted.messages.filter((m) => m.role === 'tool'))).toEqual([
      elisionMarker(2000),
      elisionMarker(2000),
      'r'.repeat(2000),
    ]);
    expect(fitted.messages.filter((m) => m.role === 'assistant')).toHaveLength(3);
    expectPairedToolCalls(fitted.messages);
  });

  it('refuses with context_too_large when the system message and the current turn alone do not fit', async () => {
    const messages = [SYSTEM, ...turn(1, 100), { role: 'user', content: 'q'.repeat(8000) } as LlmMessage];
    const failure = await fitToContext({ messages, tools: TOOLS, budget: 1000, pinned: 1 }, load).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(DomainError);
    expect(failure).toMatchObject({ code: 'context_too_large', details: { contextTokens: 1000 } });
    expect((failure as DomainError & { details: { estimatedTokens: number } }).details.estimatedTokens).toBeGreaterThan(2000);
  });

  it('counts the tool schemas against the budget', async () => {
    const messages = [SYSTEM, ...turn(1, 2000), { role: 'user', content: 'Question 2' } as LlmMessage];
    const big: LlmTool[] = [{ type: 'function', function: { name: 'big', description: 'd'.repeat(1200), parameters: {} } }];
    const budget = estimateTokens(messages, [], quarter) + 10;
    expect((await fitToContext({ messages, tools: [], budget, pinned: 1 }, load)).elidedResults).toBe(0);
    expect((await fitToContext({ messages, tools: big, budget, pinned: 1 }, load)).elidedResults).toBe(1);
  });
});

describe('the o200k tokenizer', () => {
  let count: CountTokens;
  beforeAll(async () => {
    count = await loadTokenizer();
  });

  it('counts as OpenAI does, special tokens in text as plain text', () => {
    expect(count('hello world')).toBe(2);
    expect(count('The quick brown fox jumps over the lazy dog.')).toBe(10);
    expect(count('<|endoftext|>')).toBeGreaterThan(1);
  });

  it('counts a word of 100,000 letters (cut into pieces) at most one token per byte', () => {
    const tokens = count('a'.repeat(100_000));
    expect(tokens).toBeGreaterThan(100_000 / 32);
    expect(tokens).toBeLessThanOrEqual(100_000);
  });

  it('estimates a request no higher than its bytes', () => {
    const messages = [SYSTEM, ...turn(1, 3000)];
    const bytes = messages.reduce((sum, m) => sum + Buffer.byteLength(JSON.stringify(m)), 0);
    expect(estimateTokens(messages, TOOLS, count)).toBeLessThan(bytes);
  });
});
