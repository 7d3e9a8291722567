import { MAX_MESSAGE_LENGTH, MAX_TOOL_CALL_ID_LENGTH } from '../runtime/conversation';
import { domainError } from '../../test/support/metadata-fixtures';
import { fromClientMessages, type StoredMessage, toolErrorText, toUiMessages, turnMetadata, uiFinishReason } from './ui-messages';

function invalidMessage(input: unknown[]): string {
  const error = domainError(() => fromClientMessages(input));
  expect(error.code).toBe('invalid_message');
  return error.message;
}

describe('fromClientMessages', () => {
  it('reads { role, content } messages and joins the text parts of a user UI message, ignoring the rest', () => {
    expect(
      fromClientMessages([
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: '' },
        {
          role: 'user',
          parts: [
            { type: 'text', text: 'how many ' },
            { type: 'file', url: 'data:,x' },
            { type: 'text', text: 'deals?' },
          ],
        },
      ]),
    ).toEqual([
      { role: 'user', parts: [{ type: 'text', text: 'hello' }] },
      { role: 'assistant', parts: [{ type: 'text', text: '' }] },
      { role: 'user', parts: [{ type: 'text', text: 'how many deals?' }] },
    ]);
  });

  it('splits an assistant UI message into one step per step-start, each followed by its tool results', () => {
    const messages = fromClientMessages([
      {
        role: 'assistant',
        parts: [
          { type: 'step-start' },
          { type: 'text', text: 'Let me look.' },
          {
            type: 'tool-query_records',
            toolCallId: 'c1',
            state: 'output-available',
            input: { object: 'deal' },
            output: { rows: [] },
          },
          {
            type: 'dynamic-tool',
            toolName: 'ask_user',
            toolCallId: 'c2',
            state: 'output-error',
            input: {},
            errorText: 'declined',
          },
          { type: 'step-start' },
          { type: 'reasoning', text: 'thinking' },
          { type: 'text', text: 'None.' },
        ],
      },
    ]);
    expect(messages).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'text', text: 'Let me look.' },
          { type: 'tool-call', toolCallId: 'c1', toolName: 'query_records', input: { object: 'deal' } },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'ask_user', input: {} },
        ],
      },
      {
        role: 'tool',
        parts: [
          { type: 'tool-result', toolCallId: 'c1', toolName: 'query_records', output: { rows: [] }, isError: false },
          { type: 'tool-result', toolCallId: 'c2', toolName: 'ask_user', output: 'declined', isError: true },
        ],
      },
      { role: 'assistant', parts: [{ type: 'text', text: 'None.' }] },
    ]);
  });

  it('ends a step where text follows tool calls, even without step-start', () => {
    const messages = fromClientMessages([
      {
        role: 'assistant',
        parts: [
          { type: 'tool-count', toolCallId: 'a', state: 'output-available', input: {}, output: 3 },
          { type: 'text', text: 'Three.' },
        ],
      },
    ]);
    expect(messages.map((m) => m.role)).toEqual(['assistant', 'tool', 'assistant']);
    expect(messages[2].parts).toEqual([{ type: 'text', text: 'Three.' }]);
  });

  it('ignores tool parts without an output, and marks a failed call without errorText with a stock text', () => {
    const messages = fromClientMessages([
      {
        role: 'assistant',
        parts: [
          { type: 'tool-pending', toolCallId: 'p', state: 'input-available', input: {} },
          { type: 'tool-broken', toolCallId: 'b', state: 'output-error', input: {} },
        ],
      },
    ]);
    expect(messages).toEqual([
      { role: 'assistant', parts: [{ type: 'tool-call', toolCallId: 'b', toolName: 'broken', input: {} }] },
      {
        role: 'tool',
        parts: [{ type: 'tool-result', toolCallId: 'b', toolName: 'broken', output: 'The tool call failed', isError: true }],
      },
    ]);
  });

  it('keeps an assistant message with nothing readable as an empty turn', () => {
    expect(fromClientMessages([{ role: 'assistant', parts: [{ type: 'reasoning', text: 'hm' }] }])).toEqual([
      { role: 'assistant', parts: [{ type: 'text', text: '' }] },
    ]);
  });

  it.each([
    [[null], 'messages[0] must be an object'],
    [[{ role: 'system', content: 'obey' }], 'messages[0].role must be "user" or "assistant"'],
    [[{ role: 'tool', content: 'x' }], 'messages[0].role must be "user" or "assistant"'],
    [
      [
        { role: 'user', content: 'ok' },
        { role: 'user', content: 42 },
      ],
      'messages[1].content must be a string',
    ],
    [[{ role: 'user' }], 'messages[0].content must be a string'],
    [[{ role: 'assistant', parts: ['text'] }], 'messages[0].parts[0] must be an object with a type'],
    [[{ role: 'assistant', parts: [{ type: 'text', text: 5 }] }], 'messages[0].parts[0].text must be a string'],
    [
      [{ role: 'assistant', parts: [{ type: 'tool-bad name', toolCallId: 'x', state: 'output-available', output: 1 }] }],
      'messages[0].parts[0] names a tool that cannot exist',
    ],
    [
      [{ role: 'assistant', parts: [{ type: 'dynamic-tool', toolCallId: 'x', state: 'output-available', output: 1 }] }],
      'messages[0].parts[0] names a tool that cannot exist',
    ],
    [
      [{ role: 'assistant', parts: [{ type: 'tool-ok', toolCallId: '', state: 'output-available', output: 1 }] }],
      `messages[0].parts[0].toolCallId must be a string of 1 to ${MAX_TOOL_CALL_ID_LENGTH} characters`,
    ],
    [
      [
        {
          role: 'assistant',
          parts: [{ type: 'tool-ok', toolCallId: 'x'.repeat(MAX_TOOL_CALL_ID_LENGTH + 1), state: 'output-available', output: 1 }],
        },
      ],
      'messages[0].parts[0].toolCallId must be a string',
    ],
  ])('refuses %j with invalid_message', (input, message) => {
    expect(invalidMessage(input)).toContain(message);
  });

  it('counts tool inputs and outputs towards the length limit, at the limit and one past it', () => {
    expect(fromClientMessages([{ role: 'user', content: 'x'.repeat(MAX_MESSAGE_LENGTH) }])).toHaveLength(1);
    expect(invalidMessage([{ role: 'user', content: 'x'.repeat(MAX_MESSAGE_LENGTH + 1) }])).toBe(
      `messages[0] is longer than ${MAX_MESSAGE_LENGTH} characters`,
    );
    const bigOutput = {
      role: 'assistant',
      parts: [{ type: 'tool-t', toolCallId: 'c', state: 'output-available', input: {}, output: 'y'.repeat(MAX_MESSAGE_LENGTH) }],
    };
    expect(invalidMessage([bigOutput])).toContain('is longer than');
  });
});

describe('toUiMessages', () => {
  const usage = (n: number) => ({ promptTokens: n, completionTokens: 1, totalTokens: n + 1 });

  it('makes one assistant message per turn, a step-start per step, tool parts in the state of their result', () => {
    const stored: StoredMessage[] = [
      {
        id: 1,
        clientId: 'u-1',
        role: 'user',
        parts: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
      {
        id: 2,
        role: 'assistant',
        parts: [
          { type: 'text', text: 'Looking' },
          { type: 'tool-call', toolCallId: 'ok', toolName: 'query_records', input: { object: 'deal' } },
          { type: 'tool-call', toolCallId: 'bad', toolName: 'query_records', input: {} },
          { type: 'tool-call', toolCallId: 'open', toolName: 'ask_user', input: { question: '?' } },
        ],
        usage: usage(10),
        metadata: { model: 'm1', finishReason: 'tool_calls' },
      },
      {
        id: 3,
        role: 'tool',
        parts: [
          { type: 'tool-result', toolCallId: 'ok', toolName: 'query_records', output: { rows: [1] }, isError: false },
          { type: 'tool-result', toolCallId: 'bad', toolName: 'query_records', output: { code: 'x' }, isError: true },
        ],
      },
      { id: 4, role: 'user', parts: [{ type: 'text', text: 'next' }] },
    ];
    expect(toUiMessages(stored)).toEqual([
      { id: 'u-1', role: 'user', parts: [{ type: 'text', text: 'ab' }] },
      {
        id: 'msg-1-reply',
        role: 'assistant',
        parts: [
          { type: 'step-start' },
          { type: 'text', text: 'Looking', state: 'done' },
          {
            type: 'tool-query_records',
            toolCallId: 'ok',
            input: { object: 'deal' },
            state: 'output-available',
            output: { rows: [1] },
          },
          { type: 'tool-query_records', toolCallId: 'bad', input: {}, state: 'output-error', errorText: '{"code":"x"}' },
          { type: 'tool-ask_user', toolCallId: 'open', input: { question: '?' }, state: 'input-available' },
        ],
        metadata: { model: 'm1', finishReason: 'tool_calls', usage: usage(10) },
      },
      { id: 'msg-4', role: 'user', parts: [{ type: 'text', text: 'next' }] },
    ]);
  });

  it('shows a withheld result as { withheld, reason } and puts a chart part right after its visualize output', () => {
    const spec = { mark: 'bar' };
    const stored: StoredMessage[] = [
      { id: 7, role: 'user', parts: [{ type: 'text', text: 'chart it' }] },
      {
        id: 8,
        role: 'assistant',
        parts: [
          { type: 'tool-call', toolCallId: 'q', toolName: 'query_records', input: {} },
          { type: 'tool-call', toolCallId: 'v', toolName: 'visualize', input: {} },
        ],
      },
      {
        id: 9,
        role: 'tool',
        parts: [
          { type: 'tool-result', toolCallId: 'q', toolName: 'query_records', output: undefined, isError: false, withheld: true },
          { type: 'tool-result', toolCallId: 'v', toolName: 'visualize', output: { spec }, isError: false },
        ],
      },
    ];
    const [, reply] = toUiMessages(stored);
    expect(reply.parts.slice(1)).toEqual([
      {
        type: 'tool-query_records',
        toolCallId: 'q',
        input: {},
        state: 'output-available',
        output: { withheld: true, reason: 'access_changed' },
      },
      { type: 'tool-visualize', toolCallId: 'v', input: {}, state: 'output-available', output: { spec } },
      { type: 'data-chart', id: 'v', data: { toolCallId: 'v', spec } },
    ]);
    // No metadata was stored for the step: the reply carries the usage only.
    expect(reply.metadata).toEqual({ usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 } });
  });

  it('gives messages before the first user message a reply of its own (msg-0-reply)', () => {
    expect(toUiMessages([{ id: 1, role: 'assistant', parts: [{ type: 'text', text: 'Welcome' }] }])).toEqual([
      {
        id: 'msg-0-reply',
        role: 'assistant',
        parts: [{ type: 'step-start' }, { type: 'text', text: 'Welcome', state: 'done' }],
        metadata: { usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 } },
      },
    ]);
  });
});

describe('turnMetadata', () => {
  const grounding = { numbers: 1, supported: [], unsupported: [] };

  it('sums the usage of every step and takes model, reason and grounding from the last', () => {
    const meta = turnMetadata([
      {
        id: 1,
        role: 'assistant',
        parts: [],
        usage: { promptTokens: 5, completionTokens: 2, totalTokens: 7 },
        metadata: { model: 'a', finishReason: 'tool_calls' },
      },
      { id: 2, role: 'tool', parts: [] },
      {
        id: 3,
        role: 'assistant',
        parts: [],
        usage: { promptTokens: 9, completionTokens: 3, totalTokens: 12 },
        metadata: { model: 'b', finishReason: 'stop', grounding },
      },
    ]);
    expect(meta).toEqual({
      model: 'b',
      finishReason: 'stop',
      usage: { promptTokens: 14, completionTokens: 5, totalTokens: 19 },
      grounding,
    });
  });

  it('drops the grounding of a superseded last step, and is undefined before any step', () => {
    const step: StoredMessage = {
      id: 1,
      role: 'assistant',
      parts: [],
      metadata: { model: 'a', finishReason: 'stop', grounding, superseded: true },
    };
    expect(turnMetadata([step])).not.toHaveProperty('grounding');
    expect(turnMetadata([{ id: 1, role: 'tool', parts: [] }])).toBeUndefined();
  });
});

describe('uiFinishReason and toolErrorText', () => {
  it('speaks the AI SDK words', () => {
    expect([uiFinishReason('stop'), uiFinishReason('length'), uiFinishReason('tool_calls')]).toEqual([
      'stop',
      'length',
      'tool-calls',
    ]);
    expect([uiFinishReason('max_iterations'), uiFinishReason(undefined)]).toEqual(['other', 'other']);
  });

  it('keeps a posted error text and writes any other output as JSON', () => {
    expect(toolErrorText('no access')).toBe('no access');
    expect(toolErrorText({ code: 'forbidden' })).toBe('{"code":"forbidden"}');
    expect(toolErrorText(undefined)).toBe('null');
  });
});
