import type { ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import type { LlmMessage, LlmTool } from '../../src/llm/llm.types';
import { CountTokens, estimateTokens, loadTokenizer } from '../../src/runtime/context-window';
import { sentMessages, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { hasStatus, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

/** Room for the tool schemas, a question and its whole result, but not for several turns of them. */
const BUDGET = 2200;
const MARKER = /^\[result elided to fit the context window: \d+ characters\]$/;
/** Five deals with every field: some 1,100 tokens of JSON, so that a few turns outgrow the budget. */
const FIVE_DEALS = { objectName: 'deal', limit: 5, orderBy: [{ field: 'name', order: 'asc' }] };

/** Every tool message answers a call of the assistant message before it, and every call has its answer. */
function expectPairedToolCalls(messages: SentMessage[]): void {
  const open = new Set<string>();
  for (const message of messages) {
    if (message.role === 'tool') {
      expect(open.delete(message.tool_call_id!)).toBe(true);
      continue;
    }
    expect([...open]).toEqual([]);
    for (const call of message.tool_calls ?? []) open.add(call.id);
  }
  expect([...open]).toEqual([]);
}

describe('the context window: what a model call sends is bounded', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let count: CountTokens;

  /** The estimate of what the model received in request `index`, counted as the app counts. */
  const receivedTokens = (index: number) =>
    estimateTokens(sentMessages(llm, index) as LlmMessage[], (llm.requests[index].body?.tools ?? []) as LlmTool[], count);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: {
        SEED: 'true',
        CHAT_POLL_INTERVAL_MS: '200',
        CHAT_HEARTBEAT_INTERVAL_MS: '100',
        // Failures that can be retried are, twice per call and three times per chat: a context-length error must not be.
        LLM_MAX_RETRIES: '2',
      },
    }));
    count = await loadTokenizer();
    await t.http
      .post('/api/v1/ai/agents')
      .set(bearer(t.adminKey))
      .send({
        name: 'small_window',
        label: 'Small window',
        instructions: 'You answer questions about deals.',
        model: { contextTokens: BUDGET },
        tools: ['query_records'],
        allowedObjects: ['deal'],
      })
      .expect(201);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('takes model.contextTokens on an agent and refuses one out of bounds', async () => {
    const agent = await t.http.get('/api/v1/ai/agents/small_window').set(bearer(t.adminKey)).expect(200);
    expect(bodyOf<{ model: unknown }>(agent).model).toEqual({ contextTokens: BUDGET });
    const refused = await t.http
      .post('/api/v1/ai/agents')
      .set(bearer(t.adminKey))
      .send({ name: 'tiny', label: 'Tiny', instructions: 'x', model: { contextTokens: 10 } })
      .expect(400);
    expect(errorOf(refused).code).toBe('validation_failed');
  });

  it('sends a durable chat whose history outgrew the budget bounded: old results elided first, then old turns; the stored history stays whole', async () => {
    const create = await t.http
      .post('/api/v1/chats')
      .set(bearer(t.adminKey))
      .send({ agent: 'small_window', message: 'Question 1' })
      .expect(201);
    const id = bodyOf<ChatResponse>(create).id;
    const turns = 6;
    for (let n = 1; n <= turns; n++) {
      llm.enqueue(MockReply.toolCall('query_records', FIVE_DEALS), MockReply.text(`Answer ${n}`));
      if (n > 1) {
        await t.http
          .post(`/api/v1/chats/${id}/messages`)
          .set(bearer(t.adminKey))
          .send({ message: `Question ${n}` })
          .expect(202);
      }
      const chat = await waitForChat(t, id, hasStatus('waiting', 'error'));
      expect(chat).toMatchObject({ status: 'waiting', lastError: null });
    }
    expect(llm.requests).toHaveLength(2 * turns);

    // Every request fits; the conversation it came from did not, from some turn on.
    for (let i = 0; i < llm.requests.length; i++) expect(receivedTokens(i)).toBeLessThanOrEqual(BUDGET);
    const last = sentMessages(llm, 2 * turns - 1);
    const firstOfLastTurn = sentMessages(llm, 2 * turns - 2);
    for (const sent of [firstOfLastTurn, last]) {
      expect(sent[0].role).toBe('system');
      expectPairedToolCalls(sent);
    }
    // The oldest turns were left out whole; the newest ones and the latest question are there.
    const questions = last.filter((m) => m.role === 'user').map((m) => m.content);
    expect(questions.length).toBeLessThan(turns);
    expect(questions).toEqual(Array.from(questions, (_, i) => `Question ${turns - questions.length + 1 + i}`));
    // The current turn's own result is whole.
    const results = last.filter((m) => m.role === 'tool');
    expect(results.at(-1)!.content).not.toMatch(MARKER);
    expect(JSON.parse(results.at(-1)!.content!)).toMatchObject({ records: expect.any(Array) as unknown });
    // Older results were elided, oldest first: once one is whole, every later one is too.
    const elided = results.map((m) => MARKER.test(m.content!));
    expect(elided[0]).toBe(true);
    expect(elided).toEqual([...elided].sort((a, b) => Number(b) - Number(a)));

    // Stored: every turn, every result whole.
    const stored = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200),
    ).messages;
    expect(stored.map((m) => m.role)).toEqual(
      Array.from({ length: turns }, () => ['user', 'assistant', 'tool', 'assistant']).flat(),
    );
    for (const message of stored.filter((m) => m.role === 'tool')) {
      expect(message.parts[0]).toMatchObject({ type: 'tool-result', output: { records: expect.any(Array) as unknown } });
    }
  });

  it('trims a stateless chat the same way', async () => {
    const history = Array.from({ length: 4 }, (_, i) => [
      { id: `u${i}`, role: 'user', parts: [{ type: 'text', text: `Question ${i + 1}` }] },
      {
        id: `a${i}`,
        role: 'assistant',
        parts: [
          {
            type: 'tool-query_records',
            toolCallId: `call_${i}`,
            state: 'output-available',
            input: FIVE_DEALS,
            output: { records: Array.from({ length: 10 }, (_, r) => ({ name: `Deal ${i}-${r}`, notes: 'n'.repeat(200) })) },
          },
          { type: 'text', text: `Answer ${i + 1}` },
        ],
      },
    ]).flat();
    llm.enqueue(MockReply.text('Fifth answer'));
    const res = await t.http
      .post('/api/v1/ai/agents/small_window/chat')
      .set(bearer(t.adminKey))
      .send({ messages: [...history, { id: 'u4', role: 'user', parts: [{ type: 'text', text: 'Question 5' }] }], stream: false })
      .expect(200);
    expect(bodyOf<{ content: string }>(res).content).toBe('Fifth answer');
    expect(receivedTokens(0)).toBeLessThanOrEqual(BUDGET);
    const sent = sentMessages(llm, 0);
    expectPairedToolCalls(sent);
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'Question 5' });
    const results = sent.filter((m) => m.role === 'tool');
    expect(results.length).toBeGreaterThan(0);
    expect(results[0].content).toMatch(MARKER);
  });

  it('trims an OpenAI-compatible request the same way', async () => {
    const messages = Array.from({ length: 4 }, (_, i) => [
      { role: 'user', content: `Question ${i + 1}` },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'lookup', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: `call_${i}`, content: JSON.stringify({ rows: 'r'.repeat(2000) }) },
      { role: 'assistant', content: `Answer ${i + 1}` },
    ]).flat();
    llm.enqueue(MockReply.text('Fifth answer'));
    const res = await t.http
      .post('/v1/chat/completions')
      .set(bearer(t.adminKey))
      .send({
        model: 'small_window',
        messages: [...messages, { role: 'user', content: 'Question 5' }],
        tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
      })
      .expect(200);
    expect(bodyOf<{ choices: Array<{ message: { content: string } }> }>(res).choices[0].message.content).toBe('Fifth answer');
    expect(receivedTokens(0)).toBeLessThanOrEqual(BUDGET);
    const sent = sentMessages(llm, 0);
    expectPairedToolCalls(sent);
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'Question 5' });
    expect(sent.filter((m) => m.role === 'tool')[0].content).toMatch(MARKER);
  });

  it('refuses a latest message that alone exceeds the budget with 400 context_too_large (context_length_exceeded on /v1, a durable chat in error), without calling the model', async () => {
    const res = await t.http
      .post('/api/v1/ai/agents/small_window/chat')
      .set(bearer(t.adminKey))
      .send({ messages: [{ role: 'user', content: 'How many deals? '.repeat(1000) }], stream: false })
      .expect(400);
    expect(errorOf<{ contextTokens: number }>(res)).toMatchObject({
      code: 'context_too_large',
      details: { contextTokens: BUDGET },
    });
    const v1 = await t.http
      .post('/v1/chat/completions')
      .set(bearer(t.adminKey))
      .send({ model: 'small_window', messages: [{ role: 'user', content: 'How many deals? '.repeat(1000) }] })
      .expect(400);
    expect(bodyOf<{ error: unknown }>(v1).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'context_length_exceeded',
    });
    const create = await t.http
      .post('/api/v1/chats')
      .set(bearer(t.adminKey))
      .send({ agent: 'small_window', message: 'How many deals? '.repeat(1000) })
      .expect(201);
    const chat = await waitForChat(t, bodyOf<ChatResponse>(create).id, hasStatus('error', 'waiting'));
    expect(chat).toMatchObject({ status: 'error', lastError: { code: 'context_too_large' } });
    expect(llm.requests).toHaveLength(0);
  });

  describe('a model endpoint answering 400 context_length_exceeded', () => {
    const tooLong = () =>
      MockReply.httpError(400, {
        message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        code: 'context_length_exceeded',
        param: 'messages',
        headers: { 'x-should-retry': 'true' },
      });

    it('ends a durable chat in error with llm_context_length after one request', async () => {
      llm.enqueue(tooLong(), MockReply.text('never sent'), MockReply.text('never sent'));
      const create = await t.http
        .post('/api/v1/chats')
        .set(bearer(t.adminKey))
        .send({ agent: 'small_window', message: 'How many deals?' })
        .expect(201);
      const chat = await waitForChat(t, bodyOf<ChatResponse>(create).id, hasStatus('error', 'waiting'));
      expect(chat.status).toBe('error');
      expect(chat.lastError?.code).toBe('llm_context_length');
      expect(llm.requests).toHaveLength(1);
    });

    it('answers a stateless chat 400 llm_context_length, and /v1 400 context_length_exceeded', async () => {
      llm.enqueue(tooLong(), MockReply.text('never sent'));
      const res = await t.http
        .post('/api/v1/ai/agents/small_window/chat')
        .set(bearer(t.adminKey))
        .send({ messages: [{ role: 'user', content: 'How many deals?' }], stream: false })
        .expect(400);
      expect(errorOf(res).code).toBe('llm_context_length');
      expect(llm.requests).toHaveLength(1);

      llm.reset();
      llm.enqueue(tooLong(), MockReply.text('never sent'));
      const v1 = await t.http
        .post('/v1/chat/completions')
        .set(bearer(t.adminKey))
        .send({ model: 'small_window', messages: [{ role: 'user', content: 'How many deals?' }] })
        .expect(400);
      expect(bodyOf<{ error: unknown }>(v1).error).toMatchObject({
        type: 'invalid_request_error',
        code: 'context_length_exceeded',
      });
      expect(llm.requests).toHaveLength(1);
    });
  });
});
