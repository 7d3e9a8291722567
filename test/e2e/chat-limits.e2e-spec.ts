import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { sentMessages, startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply, RecordedRequest } from '../support/mock-llm.server';
import type { ErrorBody } from '../../src/common/http-exception.filter';
import { errorOf, idOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey } from '../support/fixtures';

const FAST = { CHAT_POLL_INTERVAL_MS: '200', CHAT_HEARTBEAT_INTERVAL_MS: '100' };

/** A gate the model's answers wait behind, so a test decides when the worker's slots free up. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** Queues `count` answers that each wait for `opened`. */
function enqueueGated(llm: MockLlmServer, count: number, opened: Promise<void>): void {
  for (let i = 0; i < count; i++) {
    llm.enqueue(async () => {
      await opened;
      return MockReply.text('ok', { delayMs: 10 });
    });
  }
}

/** The user message a model request answers: which chat the worker was running. */
function askedBy(llm: MockLlmServer, request: RecordedRequest): string {
  return String(
    sentMessages(llm, request.index)
      .filter((m) => m.role === 'user')
      .at(-1)?.content,
  );
}

describe("one member cannot starve everyone's durable chats (finding 6)", () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: string;
  let aliceSubject: string;
  let bob: string;
  const aliceChats: string[] = [];

  const create = (key: string, message: string) =>
    t.http.post('/api/v1/chats').set(bearer(key)).send({ agent: 'data_chat', message });

  beforeAll(async () => {
    // One worker slot and at most 6 chats in flight per key make the queue and the cap easy to fill.
    ({ t, llm } = await startAppWithMockLlm({
      env: { ...FAST, CHAT_WORKER_CONCURRENCY: '1', CHAT_MAX_IN_FLIGHT_PER_KEY: '6' },
    }));
    ({ secret: alice, subject: aliceSubject } = await createApiKey(t, { name: 'alice', role: 'member' }));
    bob = (await createApiKey(t, { name: 'bob', role: 'member' })).secret;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it("claims another key's first chat before the first key's backlog, and refuses chats beyond the cap with 429 and Retry-After", async () => {
    const answers = gate();
    enqueueGated(llm, 7, answers.opened);
    for (let i = 1; i <= 6; i++) aliceChats.push(idOf(await create(alice, `alice ${i}`).expect(201)));
    // The only slot runs alice 1; alice 2..6 are pending, and the 7th is over the cap.
    await llm.waitForRequests(1);
    const refused = await create(alice, 'alice 7').expect(429);
    expect(refused.headers['retry-after']).toBe('5');
    expect(refused.body).toMatchObject({ code: 'too_many_chats', details: { inFlight: 6, limit: 6 } });
    // The cap is per key: bob's chat is accepted, and comes next although alice's backlog is older.
    const bobChat = idOf(await create(bob, 'bob 1').expect(201));
    expect((await waitForChat(t, aliceChats[1], () => true, alice)).status).toBe('pending');

    answers.open();
    await waitForChat(t, bobChat, hasStatus('waiting'), bob);
    for (const id of aliceChats) await waitForChat(t, id, hasStatus('waiting'), alice);
    expect(llm.requests.map((request) => askedBy(llm, request))).toEqual([
      'alice 1',
      'bob 1',
      'alice 2',
      'alice 3',
      'alice 4',
      'alice 5',
      'alice 6',
    ]);
    const [{ n }] = await t.sql<{ n: string }>(`select count(*) as n from chats where owner = $1`, [aliceSubject]);
    expect(Number(n)).toBe(6);
  });

  it('counts new messages against the same cap, and frees a slot when a chat is answered', async () => {
    llm.reset();
    const answers = gate();
    enqueueGated(llm, 6, answers.opened);
    // Five waiting chats take a new turn: one runs, four wait for the slot.
    for (const id of aliceChats.slice(0, 5)) {
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(alice)).send({ message: 'again' }).expect(202);
    }
    await llm.waitForRequests(1);
    aliceChats.push(idOf(await create(alice, 'alice 7').expect(201)));
    const refused = await t.http
      .post(`/api/v1/chats/${aliceChats[5]}/messages`)
      .set(bearer(alice))
      .send({ message: 'one more' })
      .expect(429);
    expect(refused.headers['retry-after']).toBe('5');
    expect(errorOf(refused).code).toBe('too_many_chats');
    expect((await waitForChat(t, aliceChats[5], () => true, alice)).status).toBe('waiting');

    answers.open();
    for (const id of aliceChats) await waitForChat(t, id, hasStatus('waiting'), alice);
    llm.enqueue(MockReply.text('ok'));
    await t.http.post(`/api/v1/chats/${aliceChats[5]}/messages`).set(bearer(alice)).send({ message: 'one more' }).expect(202);
    await waitForChat(t, aliceChats[5], hasStatus('waiting'), alice);
  });
});

describe('the in-flight cap holds when one key starts turns on two replicas at once', () => {
  it('admits exactly the cap of concurrent new messages and new chats, and writes nothing for the refused ones', async () => {
    // No workers: admitted chats stay pending, so the count the cap guards stays put while the test reads it.
    const env = { ...FAST, CHAT_WORKER_ENABLED: 'false', CHAT_MAX_IN_FLIGHT_PER_KEY: '3' };
    const { t: a, llm } = await startAppWithMockLlm({ env });
    const b = await startTestApp({ database: a.database, env: { ...env, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k' } });
    try {
      const key = await createApiKey(a, { name: 'racer', role: 'member' });
      const waiting = await a.sql<{ id: string }>(
        `insert into chats (id, owner, owner_role, owner_key_id, agent, status)
         select gen_random_uuid(), $1, 'member', $2, 'data_chat', 'waiting' from generate_series(1, 8)
         returning id`,
        [key.subject, key.id],
      );
      const replicas = [a, b];
      const requests = [
        ...waiting.map(({ id }, i) =>
          replicas[i % 2].http
            .post(`/api/v1/chats/${id}/messages`)
            .set(bearer(key.secret))
            .send({ message: `turn ${i}` }),
        ),
        ...[0, 1].map((i) =>
          replicas[i % 2].http
            .post('/api/v1/chats')
            .set(bearer(key.secret))
            .send({ agent: 'data_chat', message: `new ${i}` }),
        ),
      ];
      const responses = await Promise.all(requests.map((request) => request.then((res) => res)));
      const statuses = responses.map((res) => res.status);
      expect(statuses.filter((status) => status === 202 || status === 201)).toHaveLength(3);
      expect(statuses.filter((status) => status === 429)).toHaveLength(7);
      for (const res of responses.filter((r) => r.status === 429)) expect(errorOf(res).code).toBe('too_many_chats');

      const inFlight = await a.sql<{ id: string }>(`select id from chats where owner = $1 and status = 'pending'`, [key.subject]);
      expect(inFlight).toHaveLength(3);
      // Every admitted chat has its user message; no refused one got a message or a chat row.
      const [{ messages }] = await a.sql<{ messages: number }>(
        `select count(*)::int as messages from chat_messages m join chats c on c.id = m.chat_id where c.owner = $1`,
        [key.subject],
      );
      expect(messages).toBe(3);
      const [{ chats }] = await a.sql<{ chats: number }>(`select count(*)::int as chats from chats where owner = $1`, [
        key.subject,
      ]);
      expect(chats).toBe(8 + statuses.slice(8).filter((status) => status === 201).length);
    } finally {
      await b.close();
      await a.close();
      await llm.close();
    }
  });
});

describe('one key creates chats on two replicas at once', () => {
  let a: TestApp;
  let b: TestApp;
  let llm: MockLlmServer;

  beforeAll(async () => {
    // No workers: admitted chats stay pending, so the count the cap guards stays put while a test reads it.
    const env = { ...FAST, CHAT_WORKER_ENABLED: 'false', CHAT_MAX_IN_FLIGHT_PER_KEY: '3' };
    ({ t: a, llm } = await startAppWithMockLlm({ env }));
    b = await startTestApp({ database: a.database, env: { ...env, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k' } });
  });
  afterAll(async () => {
    await b.close();
    await a.close();
    await llm.close();
  });

  it('admits exactly the cap of new chats, each with its message and its events; a refused one writes nothing', async () => {
    const key = await createApiKey(a, { name: 'creator', role: 'member' });
    const responses = await Promise.all(
      [0, 1, 2, 3, 4, 5, 6, 7].map((i) =>
        [a, b][i % 2].http
          .post('/api/v1/chats')
          .set(bearer(key.secret))
          .send({ agent: 'data_chat', message: `new ${i}` })
          .then((res) => res),
      ),
    );
    const created = responses.filter((res) => res.status === 201).map((res) => idOf(res));
    expect(created).toHaveLength(3);
    const refused = responses.filter((res) => res.status === 429);
    expect(refused).toHaveLength(5);
    for (const res of refused) expect(errorOf(res)).toMatchObject({ code: 'too_many_chats', details: { limit: 3 } });

    const chats = await a.sql<{ id: string; status: string; messages: number; events: string[] }>(
      `select c.id, c.status,
              (select count(*)::int from chat_messages m where m.chat_id = c.id) as messages,
              (select array_agg(e.event->>'type' order by e.id) from chat_events e where e.chat_id = c.id) as events
         from chats c where c.owner = $1`,
      [key.subject],
    );
    expect(chats.map((chat) => chat.id).sort()).toEqual([...created].sort());
    for (const chat of chats) expect(chat).toMatchObject({ status: 'pending', messages: 1, events: ['created', 'message'] });
    const [{ events }] = await a.sql<{ events: number }>(
      `select count(*)::int as events from chat_events where event->>'owner' = $1`,
      [key.subject],
    );
    expect(events).toBe(6);
  });

  it('creates one chat for a useChat id that both replicas get first at once; the other request is refused with 409', async () => {
    const key = await createApiKey(a, { name: 'ui', role: 'member' });
    const body = {
      id: 'same-chat',
      trigger: 'submit-message',
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
    };
    // The winner's answer is its turn's stream, which no worker runs here: its status is all it needs to give.
    const aborts = [new AbortController(), new AbortController()];
    const responses = await Promise.all(
      [a, b].map(async (replica, i) => {
        const res = await fetch(`${await listen(replica)}/api/v1/ai/agents/data_chat/chats`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: aborts[i].signal,
        });
        const error = res.status === 200 ? undefined : ((await res.json()) as ErrorBody);
        aborts[i].abort();
        return { status: res.status, code: error?.code };
      }),
    );
    expect(responses.map((res) => res.status).sort()).toEqual([200, 409]);
    expect(responses.find((res) => res.status === 409)!.code).toBe('chat_busy');
    const chats = await a.sql<{ messages: number }>(
      `select (select count(*)::int from chat_messages m where m.chat_id = c.id) as messages from chats c where c.owner = $1`,
      [key.subject],
    );
    expect(chats).toEqual([{ messages: 1 }]);
  });
});

describe('a revoked key loses its open streams on every replica (finding 7)', () => {
  it('ends the streams that a key revoked through replica A holds on replica B, which deliver nothing more', async () => {
    const { t: a, llm } = await startAppWithMockLlm({ env: FAST });
    const b = await startTestApp({
      database: a.database,
      env: { ...FAST, CHAT_WORKER_ENABLED: 'false', OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k' },
    });
    const streams: SseClient[] = [];
    try {
      const bUrl = await listen(b);
      const member = await createApiKey(a, { name: 'soon revoked', role: 'member' });
      const answers = gate();
      enqueueGated(llm, 1, answers.opened);
      const id = idOf(
        await a.http.post('/api/v1/chats').set(bearer(member.secret)).send({ agent: 'data_chat', message: 'hi' }).expect(201),
      );
      const chatStream = await SseClient.open(bUrl, `/api/v1/chats/${id}/stream`, member.secret);
      const watch = await SseClient.open(bUrl, '/api/v1/chats/watch', member.secret);
      const adminWatch = await SseClient.open(bUrl, '/api/v1/chats/watch', b.adminKey);
      streams.push(chatStream, watch, adminWatch);
      await chatStream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'running'));
      await watch.waitFor((events) => events.some((e) => e.event === 'ready'));

      await a.http.delete(`/api/v1/api-keys/${member.id}`).set(bearer(a.adminKey)).expect(204);
      await chatStream.waitForEnd(2_000);
      await watch.waitForEnd(2_000);
      const seen = [chatStream.events.length, watch.events.length];

      // The key's turn stops too (key_revoked): the model's late answer is never written, and nothing reaches the
      // closed streams.
      await waitUntilChat(b, id, 'error');
      answers.open();
      await sleep(300);
      expect([chatStream.events.length, watch.events.length]).toEqual(seen);
      const [{ n }] = await b.sql<{ n: string }>(`select count(*) as n from chat_messages where chat_id = $1`, [id]);
      expect(Number(n)).toBe(1);
      // Another key's stream on the same replica stays open, and the revoked key cannot open a new one.
      expect(adminWatch.ended).toBe(false);
      await b.http.get('/api/v1/chats/watch').set(bearer(member.secret)).expect(401);
    } finally {
      for (const stream of streams) stream.close();
      await b.close();
      await a.close();
      await llm.close();
    }
  });
});

/** Polls the chat's status in the table (its key may be revoked, so not through the API). */
async function waitUntilChat(t: TestApp, id: string, status: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await t.sql<{ status: string }>(`select status from chats where id = $1`, [id]);
    if (row?.status === status) return;
    if (Date.now() > until) throw new Error(`chat ${id} is ${row?.status}, not ${status}`);
    await sleep(25);
  }
}

describe('slow request bodies and stream floods are bounded (finding 11)', () => {
  const REQUEST_TIMEOUT_MS = 500;
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let member: string;
  const streams: SseClient[] = [];

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: { ...FAST, HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), SSE_MAX_STREAMS_PER_KEY: '2' },
    }));
    baseUrl = await listen(t);
    member = (await createApiKey(t, { name: 'streamer', role: 'member' })).secret;
  });
  afterAll(async () => {
    for (const stream of streams) stream.close();
    await t.close();
    await llm.close();
  });

  it('cuts off a body trickled one byte at a time once the request timeout has passed', async () => {
    const port = Number(new URL(baseUrl).port);
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const started = Date.now();
    socket.write(
      'POST /api/v1/chats HTTP/1.1\r\nHost: localhost\r\n' +
        `Authorization: Bearer ${member}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`,
    );
    // 1,000 bytes at one per 100 ms would take 100 s.
    const trickle = setInterval(() => socket.write(' '), 100);
    try {
      const outcome = await Promise.race([closed.then(() => 'closed'), sleep(10_000, 'still open', { ref: false })]);
      expect(outcome).toBe('closed');
      expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
      expect(Date.now() - started).toBeLessThan(5_000);
      if (answer) expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });

  it('refuses a stream beyond the per-key cap with 429 and Retry-After, keeps the open ones working, and frees a slot when one closes', async () => {
    const watch = await SseClient.open(baseUrl, '/api/v1/chats/watch', member);
    streams.push(watch);
    llm.enqueue(MockReply.text('first answer'));
    const id = idOf(
      await t.http.post('/api/v1/chats').set(bearer(member)).send({ agent: 'data_chat', message: 'hi' }).expect(201),
    );
    const chatStream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, member);
    streams.push(chatStream);
    await chatStream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));

    for (const path of ['/api/v1/chats/watch', `/api/v1/chats/${id}/stream`]) {
      const refused = await t.http.get(path).set(bearer(member)).expect(429);
      expect(refused.headers['retry-after']).toBe('5');
      expect(refused.body).toMatchObject({ code: 'too_many_streams', details: { open: 2, limit: 2 } });
    }
    // Counted per key: another key still streams.
    const adminWatch = await SseClient.open(baseUrl, '/api/v1/chats/watch', t.adminKey);
    streams.push(adminWatch);

    // Both open streams outlive the request timeout and still deliver the next turn.
    await sleep(REQUEST_TIMEOUT_MS * 3);
    llm.enqueue(MockReply.text('second answer'));
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(member)).send({ message: 'again' }).expect(202);
    await chatStream.waitFor((events) => events.filter((e) => e.event === 'message' && e.data.role === 'assistant').length === 2);
    await watch.waitFor((events) => events.some((e) => e.event === 'status_change' && e.data.status === 'pending'));
    expect([watch.ended, chatStream.ended]).toEqual([false, false]);

    watch.close();
    const reopened = await openWhenFree(baseUrl, '/api/v1/chats/watch', member);
    streams.push(reopened);
    await reopened.waitFor((events) => events.some((e) => e.event === 'ready'));
  });
});

/** Opens a stream once the server has seen an earlier one close (its slot is freed on the close event). */
async function openWhenFree(baseUrl: string, path: string, key: string, timeoutMs = 5_000): Promise<SseClient> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await SseClient.open(baseUrl, path, key);
    } catch (error) {
      if (Date.now() > until) throw error;
      await sleep(50);
    }
  }
}
