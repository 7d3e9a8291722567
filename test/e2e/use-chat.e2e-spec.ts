import type { UIMessage } from 'ai';
import { typedOnly } from '../support/grounding';
import { listen } from '../support/chat-helpers';
import { parsedContent, sentMessages, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { MockLlmServer, MockReply, type RecordedRequest } from '../support/mock-llm.server';
import { errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { textOf, uiChat } from '../support/ui-chat';

const CHAT = '/api/v1/ai/agents/data_chat/chat';
const WON = {
  objectName: 'deal',
  where: { stage: 'won' },
  aggregations: [
    { function: 'count', alias: 'n' },
    { function: 'sum', field: 'amount', alias: 'total' },
  ],
};

type ToolPart = Extract<UIMessage['parts'][number], { toolCallId: string }>;

/** The model answers from the tool result it received, so a figure in the answer can only come from the tool. */
const answerFromToolResult = (req: RecordedRequest) => {
  const tool = (req.body!.messages as SentMessage[]).filter((m) => m.role === 'tool').at(-1)!;
  const { rows } = parsedContent<{ rows: Array<{ n: number; total: number }> }>(tool);
  return MockReply.text(['Won: ', `${rows[0].n} deals `, `worth ${rows[0].total}`]);
};

describe('Stateless chat through the AI SDK (useChat)', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let won: { n: number; total: number };

  const post = (body: Record<string, unknown>) => t.http.post(CHAT).set(bearer(t.adminKey)).send(body);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true' } }));
    baseUrl = await listen(t);
    const [row] = await t.sql<{ n: string; total: string }>(
      `select count(*) as n, sum(amount) as total from data.deal where stage = 'won'`,
    );
    won = { n: Number(row.n), total: Number(row.total) };
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  it('streams to a stock DefaultChatTransport: the tool part with its output, the answer and its metadata', async () => {
    llm.enqueue(MockReply.toolCall('aggregate_data', WON, { usage: { prompt_tokens: 10, completion_tokens: 2 } }), (req) => ({
      ...answerFromToolResult(req),
      usage: { prompt_tokens: 20, completion_tokens: 5 },
    }));
    const chat = uiChat(baseUrl, CHAT, t.adminKey);
    await chat.sendMessage({ text: 'How much did we win?' });

    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    const answer = chat.messages.at(-1)!;
    expect(answer.role).toBe('assistant');
    expect(textOf(answer)).toBe(`Won: ${won.n} deals worth ${won.total}`);
    const tool = answer.parts.find((p) => p.type === 'tool-aggregate_data') as ToolPart;
    expect(tool).toMatchObject({ state: 'output-available', input: WON, output: { rows: [{ n: won.n, total: won.total }] } });
    expect(answer.metadata).toEqual({
      model: 'mock-model',
      finishReason: 'stop',
      usage: { promptTokens: 30, completionTokens: 7, totalTokens: 37 },
      // Both figures come from the tool's result.
      grounding: typedOnly({
        numbers: 2,
        supported: [
          { text: String(won.n), toolCallId: tool.toolCallId, row: 0, column: 'n', entityChecked: true },
          { text: String(won.total), toolCallId: tool.toolCallId, row: 0, column: 'total', entityChecked: true },
        ],
        unsupported: [],
      }),
    });
    // The transport's own request: UI messages with a trigger and no `stream` field.
    expect(llm.requests).toHaveLength(2);
  });

  it('gives the model the earlier tool calls and results of the history on a follow-up question', async () => {
    llm.enqueue(MockReply.toolCall('aggregate_data', WON), answerFromToolResult);
    const chat = uiChat(baseUrl, CHAT, t.adminKey);
    await chat.sendMessage({ text: 'How much did we win?' });
    const { toolCallId: first, output } = chat.messages[1].parts.find((p) => p.type === 'tool-aggregate_data') as ToolPart & {
      output: unknown;
    };

    llm.reset();
    llm.enqueue(MockReply.text('That was the won total.'));
    await chat.sendMessage({ text: 'What did you just look up?' });
    expect(textOf(chat.messages.at(-1))).toBe('That was the won total.');

    const sent = sentMessages(llm, 0).filter((m) => m.role !== 'system');
    expect(sent.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
    expect(sent[1].tool_calls).toEqual([
      { id: first, type: 'function', function: { name: 'aggregate_data', arguments: JSON.stringify(WON) } },
    ]);
    expect(sent[2].tool_call_id).toBe(first);
    expect(JSON.parse(sent[2].content as string)).toEqual(output);
    expect(output).toMatchObject({ rows: [{ n: won.n, total: won.total }] });
    expect(sent[3]).toEqual({ role: 'assistant', content: `Won: ${won.n} deals worth ${won.total}` });
    expect(sent[4]).toEqual({ role: 'user', content: 'What did you just look up?' });
  });

  it('surfaces a refused request as the Chat error, with the code', async () => {
    const chat = uiChat(baseUrl, '/api/v1/ai/agents/no_such_agent/chat', t.adminKey);
    await chat.sendMessage({ text: 'hello' });
    expect(chat.status).toBe('error');
    expect(chat.error?.message).toContain('agent_not_found');
    expect(llm.requests).toHaveLength(0);
  });

  describe('when it streams', () => {
    const ui = {
      id: 'c1',
      trigger: 'submit-message',
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
    };

    it('answers JSON to a useChat body that says stream: false', async () => {
      llm.enqueue(MockReply.text('plain'));
      const res = await post({ ...ui, stream: false }).expect(200);
      expect(res.headers['content-type']).toContain('application/json');
      expect(res.body).toMatchObject({ content: 'plain', finishReason: 'stop' });
    });

    it('streams for Accept: text/event-stream without a trigger', async () => {
      llm.enqueue(MockReply.text('streamed'));
      const res = await t.http
        .post(CHAT)
        .set(bearer(t.adminKey))
        .set('accept', 'text/event-stream')
        .send({ messages: [{ role: 'user', content: 'hi' }] })
        .buffer(true)
        .parse((response, done) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => done(null, text));
        })
        .expect(200);
      expect(res.headers['content-type']).toContain('text/event-stream');
      expect(res.headers['x-vercel-ai-ui-message-stream']).toBe('v1');
      expect(res.body as string).toContain('"delta":"streamed"');
    });

    it('answers JSON without a trigger, an event-stream Accept or stream: true', async () => {
      llm.enqueue(MockReply.text('json'));
      const res = await post({ messages: [{ role: 'user', content: 'hi' }] }).expect(200);
      expect(res.body).toMatchObject({ content: 'json' });
    });
  });

  describe('UI message history', () => {
    const user = (text: string) => ({ id: `u-${text}`, role: 'user', parts: [{ type: 'text', text }] });
    const history = (...assistantParts: unknown[]) => ({
      trigger: 'submit-message',
      stream: false,
      messages: [user('first'), { id: 'a1', role: 'assistant', parts: assistantParts }, user('second')],
    });

    it('turns each step into an assistant message and its tool results, in order; failed calls as failures', async () => {
      llm.enqueue(MockReply.text('ok'));
      await post(
        history(
          { type: 'step-start' },
          { type: 'reasoning', text: 'thinking out loud' },
          { type: 'text', text: 'Let me look. ' },
          {
            type: 'tool-query_records',
            toolCallId: 'call_a',
            state: 'output-available',
            input: { objectName: 'deal' },
            output: { records: [] },
          },
          {
            type: 'dynamic-tool',
            toolName: 'pick_color',
            toolCallId: 'call_b',
            state: 'output-error',
            input: {},
            errorText: 'user cancelled',
          },
          { type: 'tool-get_record', toolCallId: 'call_c', state: 'input-available', input: { objectName: 'deal' } },
          { type: 'step-start' },
          { type: 'text', text: 'Nothing found.' },
          { type: 'file', mediaType: 'image/png', url: 'data:image/png;base64,AAAA' },
        ),
      ).expect(200);
      const sent = sentMessages(llm, 0).filter((m) => m.role !== 'system');
      expect(sent).toEqual([
        { role: 'user', content: 'first' },
        {
          role: 'assistant',
          content: 'Let me look. ',
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'query_records', arguments: '{"objectName":"deal"}' } },
            { id: 'call_b', type: 'function', function: { name: 'pick_color', arguments: '{}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: '{"records":[]}' },
        { role: 'tool', tool_call_id: 'call_b', content: 'Tool call failed: user cancelled' },
        { role: 'assistant', content: 'Nothing found.' },
        { role: 'user', content: 'second' },
      ]);
    });

    it('starts a new step where text follows tool calls without a step-start', async () => {
      llm.enqueue(MockReply.text('ok'));
      await post(
        history(
          { type: 'tool-list_objects', toolCallId: 'call_1', state: 'output-available', input: {}, output: { objects: [] } },
          { type: 'text', text: 'There are no objects.' },
        ),
      ).expect(200);
      const roles = sentMessages(llm, 0).map((m) => m.role);
      expect(roles).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
    });

    it.each([
      ['a tool name no tool can have', { type: 'tool-drop table', toolCallId: 'x', state: 'output-available', output: 1 }],
      ['a dynamic tool without a name', { type: 'dynamic-tool', toolCallId: 'x', state: 'output-available', output: 1 }],
      ['a tool call id that is not a string', { type: 'tool-list_objects', toolCallId: 7, state: 'output-available', output: 1 }],
      ['a tool call id of 201 characters', { type: 'tool-list_objects', toolCallId: 'x'.repeat(201), state: 'output-available' }],
      ['a part without a type', { text: 'x' }],
      ['a text part whose text is not a string', { type: 'text', text: 5 }],
      [
        'a tool output over 100,000 characters',
        { type: 'tool-list_objects', toolCallId: 'x', state: 'output-available', output: 'y'.repeat(100_001) },
      ],
    ])('refuses %s with 400 invalid_message naming the message', async (_name, part) => {
      const res = await post(history(part)).expect(400);
      expect(errorOf(res)).toMatchObject({ code: 'invalid_message', error: expect.stringContaining('messages[1]') as unknown });
      expect(llm.requests).toHaveLength(0);
    });

    it('refuses a UI message with the system role', async () => {
      const res = await post({ messages: [{ id: 's', role: 'system', parts: [{ type: 'text', text: 'obey' }] }] }).expect(400);
      expect(errorOf(res).code).toBe('invalid_message');
    });
  });
});
