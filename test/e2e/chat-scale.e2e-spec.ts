import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat, eventually } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { Scrape } from '../support/prometheus';
import { bodyOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

describe('durable chats at scale: model-call slots and streams', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { LLM_MAX_CONCURRENCY: '1', CHAT_POLL_INTERVAL_MS: '200' } }));
    baseUrl = await listen(t);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  const queued = async () => new Scrape((await t.http.get('/metrics').expect(200)).text).value('datacopilot_llm_calls_queued');

  async function startChat(message: string): Promise<string> {
    const res = await t.http.post('/api/v1/chats').set(bearer(t.adminKey)).send({ agent: 'data_chat', message }).expect(201);
    return bodyOf<ChatResponse>(res).id;
  }

  it('sends one model call at a time with LLM_MAX_CONCURRENCY=1: the second chat waits for the slot, then answers', async () => {
    llm.enqueue(MockReply.text('First answer.', { delayMs: 600 }), MockReply.text('Second answer.'));
    const first = await startChat('first');
    await llm.waitForRequests(1);
    const second = await startChat('second');
    // Both chats run; the second one's call waits for the slot instead of reaching the model.
    await eventually(async () => (await queued()) === 1);
    expect(llm.requestCount).toBe(1);
    await waitForChat(t, first, hasStatus('waiting'));
    await waitForChat(t, second, hasStatus('waiting'));
    expect(llm.requestCount).toBe(2);
    expect(await queued()).toBe(0);
  });

  it('lets an interrupted chat leave the queue for a slot without ever calling the model', async () => {
    llm.enqueue(MockReply.text('Slow answer.', { delayMs: 1_500 }));
    const slow = await startChat('slow');
    await llm.waitForRequests(1);
    const waiting = await startChat('never sent');
    await eventually(async () => (await queued()) === 1);
    await t.http.post(`/api/v1/chats/${waiting}/interrupt`).set(bearer(t.adminKey)).expect(202);
    await eventually(async () => (await queued()) === 0);
    await waitForChat(t, waiting, hasStatus('waiting'));
    await waitForChat(t, slow, hasStatus('waiting'));
    // The interrupted chat's call never went out; its history holds only the user's message.
    expect(llm.requestCount).toBe(1);
    const res = await t.http.get(`/api/v1/chats/${waiting}/messages`).set(bearer(t.adminKey)).expect(200);
    expect(bodyOf<ChatMessagesResponse>(res).messages.map((m) => m.role)).toEqual(['user']);
  });

  it('holds no transaction while a chat waits on the model', async () => {
    llm.enqueue(MockReply.text('Slow answer.', { delayMs: 1_000 }));
    const id = await startChat('take your time');
    await llm.waitForRequests(1);
    await sleep(500);
    // Seen from another connection half way through the model's second: no session of the app has had a
    // transaction open since the call started (short ones, e.g. the worker's maintenance, may come and go).
    const open = await t.sql<{ state: string }>(
      `select state from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and xact_start < now() - interval '400 milliseconds'`,
    );
    expect(open).toEqual([]);
    await waitForChat(t, id, hasStatus('waiting'));
  });

  it("streams a turn's messages as they are persisted, each once and in order, with the ids GET /messages shows", async () => {
    llm.enqueue(
      MockReply.toolCall(
        'aggregate_data',
        { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] },
        // Late enough that the stream is open: these messages reach it through their events.
        { delayMs: 300 },
      ),
      MockReply.text('Counted.'),
    );
    const id = await startChat('How many deals?');
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey);
    try {
      await waitForChat(t, id, hasStatus('waiting'));
      await stream.waitFor((events) => events.filter((e) => e.event === 'message').length === 4);
      const res = await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200);
      const streamed = stream.events.filter((e) => e.event === 'message').map((e) => e.data);
      expect(streamed).toEqual(bodyOf<ChatMessagesResponse>(res).messages);
    } finally {
      stream.close();
    }
  });
});
