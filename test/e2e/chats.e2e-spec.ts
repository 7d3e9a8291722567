import { setTimeout as sleep } from 'node:timers/promises';
import { startAppWithMockLlm, sentMessages, sentToolNames } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bearer, TestApp } from '../support/test-app';

const FORM_TOOL = {
  name: 'show_form', description: 'Show a form to the user and return what they entered.',
  inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
};

describe('durable chats', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let otherKey: string;

  const create = (body: Record<string, unknown>, key = t.adminKey) => t.http.post('/api/v1/chats').set(bearer(key)).send(body);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: { SEED: 'true', CHAT_POLL_INTERVAL_MS: '200', CHAT_HEARTBEAT_INTERVAL_MS: '100', CHAT_ACTION_TIMEOUT_MS: '60000', SSE_KEEPALIVE_MS: '1000', LOG_LEVEL: 'warn' },
    }));
    baseUrl = await listen(t);
    otherKey = (await t.http.post('/api/v1/api-keys').set(bearer(t.adminKey)).send({ name: 'other', role: 'member', subject: 'someone-else' }).expect(201)).body.secret;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('pauses for a client tool called beside a built-in one, then completes with both results seen by the model', async () => {
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_builtin', name: 'aggregate_data', arguments: { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] } },
        { id: 'call_client', name: 'show_form', arguments: { title: 'Pick a region' } },
      ]),
      MockReply.text('Thanks, EMEA it is: 2000 deals.'),
    );
    const created = await create({ agent: 'data_chat', message: 'How many deals in my region?', dynamicTools: [FORM_TOOL] }).expect(201);
    expect(created.body).toMatchObject({ status: 'pending', agent: 'data_chat' });
    const id = created.body.id;

    const paused = await waitForChat(t, id, hasStatus('requires_action'));
    expect(paused.pendingToolCalls).toEqual([{ id: 'call_client', name: 'show_form', arguments: { title: 'Pick a region' } }]);
    expect(sentToolNames(llm, 0)).toEqual(['list_objects', 'describe_object', 'query_records', 'get_record', 'aggregate_data', 'show_form']);

    const before = (await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200)).body.messages;
    expect(before.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(before[2].parts[0]).toMatchObject({ type: 'tool-result', toolCallId: 'call_builtin', isError: false, output: { rows: [{ n: 2000 }] } });

    await t.http.post(`/api/v1/chats/${id}/tool-results`).set(bearer(t.adminKey))
      .send({ results: [{ toolCallId: 'call_client', output: { region: 'EMEA' } }] }).expect(204);
    const done = await waitForChat(t, id, hasStatus('waiting'));
    expect(done.pendingToolCalls).toBeUndefined();

    const seen = sentMessages(llm, 1).filter((m) => m.role === 'tool');
    expect(seen.map((m) => m.tool_call_id)).toEqual(['call_builtin', 'call_client']);
    expect(JSON.parse(seen[0].content).rows[0].n).toBe(2000);
    expect(JSON.parse(seen[1].content)).toEqual({ region: 'EMEA' });
    const after = (await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200)).body.messages;
    expect(after.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
    expect(after[4].parts).toEqual([{ type: 'text', text: 'Thanks, EMEA it is: 2000 deals.' }]);
  });

  it('streams statuses, live text deltas and persisted messages, and resumes without loss', async () => {
    llm.enqueue(MockReply.toolCall('list_objects', {}), MockReply.text('Here are your objects and more words to stream', { chunkDelayMs: 5 }));
    const created = await create({ agent: 'data_chat', message: 'What objects exist?' }).expect(201);
    const id = created.body.id;
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey);
    await stream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));
    stream.close();
    const messages = stream.of('message');
    expect(messages.map((e) => e.data.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(messages.map((e) => Number(e.id))).toEqual(messages.map((e) => e.data.id));
    expect(stream.of('message_part').map((e) => e.data.delta).join('')).toBe('Here are your objects and more words to stream');

    // Resume after the second message: the rest, exactly once.
    const resumed = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey, { 'last-event-id': String(messages[1].data.id) });
    await resumed.waitFor((events) => events.some((e) => e.event === 'status'));
    resumed.close();
    expect(resumed.of('message').map((e) => e.data.id)).toEqual(messages.slice(2).map((e) => e.data.id));
  });

  it('hides another owner\'s chat behind a 404', async () => {
    llm.enqueue(MockReply.text('hi'));
    const id = (await create({ agent: 'data_chat', message: 'mine' }).expect(201)).body.id;
    await waitForChat(t, id, hasStatus('waiting'));
    for (const request of [
      t.http.get(`/api/v1/chats/${id}`), t.http.get(`/api/v1/chats/${id}/messages`),
      t.http.post(`/api/v1/chats/${id}/messages`).send({ message: 'x' }), t.http.post(`/api/v1/chats/${id}/interrupt`),
      t.http.post(`/api/v1/chats/${id}/tool-results`).send({ results: [{ toolCallId: 'a', output: 1 }] }),
    ]) {
      const res = await request.set(bearer(otherKey));
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('chat_not_found');
    }
    const list = await t.http.get('/api/v1/chats').set(bearer(otherKey)).expect(200);
    expect(list.body.chats.map((c: { id: string }) => c.id)).not.toContain(id);
  });
});
