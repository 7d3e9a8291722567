import { EventSource } from 'eventsource';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { StreamTokenResponse } from '../../src/auth/stream-token.dto';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { match } from '../support/matchers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey } from '../support/fixtures';

const APP_ORIGIN = 'https://app.example.com';

interface ReceivedEvent {
  type: string;
  id: string;
  data: Record<string, unknown>;
}

/** Polls `predicate` every 20 ms; fails with `describe()` after `timeoutMs`. */
async function until(predicate: () => boolean, describe: () => string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`condition not met: ${describe()}`);
    await sleep(20);
  }
}

/**
 * A browser-like event stream: the WHATWG EventSource of the `eventsource` package, which sends no
 * Authorization header (a page's EventSource cannot), an Origin like a cross-origin page, and keeps
 * what the response said for the assertions.
 */
class BrowserStream {
  readonly events: ReceivedEvent[] = [];
  readonly errors: Array<{ code?: number }> = [];
  status?: number;
  headers?: Headers;
  private readonly source: EventSource;

  constructor(url: string, types: string[]) {
    this.source = new EventSource(url, {
      fetch: async (input, init) => {
        const response = await fetch(input, { ...init, headers: { ...init.headers, origin: APP_ORIGIN } });
        this.status = response.status;
        this.headers = response.headers;
        return response;
      },
    });
    for (const type of types) {
      this.source.addEventListener(type, (event) => {
        const { data, lastEventId } = event as unknown as { data: string; lastEventId: string };
        this.events.push({ type, id: lastEventId, data: JSON.parse(data) as Record<string, unknown> });
      });
    }
    this.source.addEventListener('error', (event) => this.errors.push({ code: (event as unknown as { code?: number }).code }));
  }

  get readyState(): number {
    return this.source.readyState;
  }

  of(type: string): ReceivedEvent[] {
    return this.events.filter((e) => e.type === type);
  }

  /** Resolves once the stream is open; fails when the server refused it. */
  async opened(): Promise<void> {
    await until(
      () => this.source.readyState === EventSource.OPEN || this.source.readyState === EventSource.CLOSED,
      () => `stream never opened (status ${this.status})`,
    );
    if (this.source.readyState !== EventSource.OPEN) throw new Error(`stream refused with status ${this.status}`);
  }

  /** Resolves once the server refused the stream (EventSource then fails for good, without retrying). */
  async refused(): Promise<number | undefined> {
    await until(
      () => this.source.readyState === EventSource.CLOSED,
      () => `stream not refused (status ${this.status})`,
    );
    return this.status;
  }

  waitFor(predicate: (events: ReceivedEvent[]) => boolean): Promise<void> {
    return until(
      () => predicate(this.events),
      () => JSON.stringify(this.events.map((e) => [e.type, e.data.status])),
    );
  }

  close(): void {
    this.source.close();
  }
}

const CHAT_EVENTS = ['message', 'status', 'message_part', 'action_required', 'end'];
const WATCH_EVENTS = ['ready', 'created', 'status_change', 'deleted'];

describe('stream tokens', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let alice: CreatedApiKeyResponse;
  let bob: CreatedApiKeyResponse;
  /** Every token issued in this file, to look for in the log. */
  const issued: string[] = [];
  const log: string[] = [];
  const streams: BrowserStream[] = [];

  const memberKey = async (name: string) => await createApiKey(t, { name, role: 'member', subject: name });
  const createToken = (key: string, body: Record<string, unknown> = {}) =>
    t.http.post('/api/v1/stream-tokens').set(bearer(key)).send(body);
  const tokenFor = async (key: string, chatId?: string): Promise<string> => {
    const { token } = bodyOf<StreamTokenResponse>(await createToken(key, chatId ? { chatId } : {}).expect(201));
    issued.push(token);
    return token;
  };
  const browserStream = (path: string, types = CHAT_EVENTS, origin = baseUrl) => {
    const stream = new BrowserStream(`${origin}${path}`, types);
    streams.push(stream);
    return stream;
  };
  /** A chat of `key` that answered `answer` and is waiting again. */
  const answeredChat = async (key: string, answer = 'Forty-two.'): Promise<string> => {
    llm.enqueue(MockReply.text(answer));
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(key))
      .send({ agent: 'data_chat', message: 'What is the answer?' })
      .expect(201);
    const id = bodyOf<ChatResponse>(created).id;
    await waitForChat(t, id, hasStatus('waiting'), key);
    return id;
  };
  const hashOf = (token: string) => createHash('sha256').update(token).digest('hex');

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: {
        CHAT_POLL_INTERVAL_MS: '200',
        CHAT_HEARTBEAT_INTERVAL_MS: '100',
        SSE_KEEPALIVE_MS: '1000',
        STREAM_TOKENS_PER_KEY: '5',
        CORS_ORIGINS: APP_ORIGIN,
        LOG_LEVEL: 'info',
      },
      logDestination: { write: (line: string) => void log.push(line) },
    }));
    baseUrl = await listen(t);
    alice = await memberKey('alice');
    bob = await memberKey('bob');
  });
  afterAll(async () => {
    for (const stream of streams) stream.close();
    await t.close();
    await llm.close();
  });

  it('gives any key, admin or member, a token that expires after STREAM_TOKEN_TTL_MS, stored only as a hash', async () => {
    const before = Date.now();
    const member = bodyOf<StreamTokenResponse>(await createToken(alice.secret).expect(201));
    const admin = bodyOf<StreamTokenResponse>(await createToken(t.adminKey).expect(201));
    issued.push(member.token, admin.token);
    for (const { token, expiresAt } of [member, admin]) {
      expect(token).toMatch(/^dst_[A-Za-z0-9_-]{43}$/);
      expect(Date.parse(expiresAt)).toBeGreaterThan(before);
      expect(Date.parse(expiresAt)).toBeLessThanOrEqual(Date.now() + 60_000);
    }
    expect(member.token).not.toBe(admin.token);
    const rows = await t.sql<{ token_hash: string; key_id: string; chat_id: string | null }>(
      'select token_hash, key_id, chat_id from stream_tokens where token_hash = any($1)',
      [[hashOf(member.token), hashOf(admin.token), member.token, admin.token]],
    );
    expect(rows).toHaveLength(2);
    expect(rows.find((r) => r.token_hash === hashOf(member.token))).toEqual({
      token_hash: hashOf(member.token),
      key_id: alice.id,
      chat_id: null,
    });

    // A POST without a body is a token bound to no chat.
    const bare = await t.http.post('/api/v1/stream-tokens').set(bearer(bob.secret)).expect(201);
    issued.push(bodyOf<StreamTokenResponse>(bare).token);

    const anonymous = await t.http.post('/api/v1/stream-tokens').send({}).expect(401);
    expect(errorOf(anonymous).code).toBe('unauthorized');
  });

  it("opens a chat's stream from a browser EventSource with ?token= and no Authorization, as the token's key", async () => {
    const chatId = await answeredChat(alice.secret, 'Browser hello.');
    const token = await tokenFor(alice.secret);
    const stream = browserStream(`/api/v1/chats/${chatId}/stream?token=${token}`);
    await stream.opened();
    await stream.waitFor((events) => events.some((e) => e.type === 'status' && e.data.status === 'waiting'));
    expect(stream.of('message').map((e) => e.data.role)).toEqual(['user', 'assistant']);
    expect(stream.of('message')[1].data.parts).toEqual([{ type: 'text', text: 'Browser hello.' }]);
    // A cross-origin page can read it: CORS headers and the request id are on the event stream.
    expect(stream.headers?.get('content-type')).toContain('text/event-stream');
    expect(stream.headers?.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(stream.headers?.get('x-request-id')).toEqual(expect.any(String));
    stream.close();

    // The chat list stream runs as the same key: its first event names the key's subject.
    const watch = browserStream(`/api/v1/chats/watch?token=${token}`, WATCH_EVENTS);
    await watch.opened();
    await watch.waitFor((events) => events.some((e) => e.type === 'ready'));
    expect(watch.of('ready')[0].data).toEqual({ subject: 'alice' });
    watch.close();

    // Another key's chat stays another key's chat, token or not.
    const bobs = await tokenFor(bob.secret);
    const refused = await t.http.get(`/api/v1/chats/${chatId}/stream?token=${bobs}`).expect(404);
    expect(errorOf(refused).code).toBe('chat_not_found');
  });

  it("binds a token made for a chat to that chat's streams: another chat and the chat list refuse it (401)", async () => {
    const chatA = await answeredChat(alice.secret);
    const chatB = await answeredChat(alice.secret);
    const token = await tokenFor(alice.secret, chatA);

    const stream = browserStream(`/api/v1/chats/${chatA}/stream?token=${token}`);
    await stream.opened();
    await stream.waitFor((events) => events.some((e) => e.type === 'status'));
    stream.close();
    // Route parameters are case-insensitive UUIDs, like the chat routes themselves.
    const upper = browserStream(`/api/v1/chats/${chatA.toUpperCase()}/stream?token=${token}`);
    await upper.opened();
    upper.close();

    for (const path of [`/api/v1/chats/${chatB}/stream`, '/api/v1/chats/watch']) {
      const res = await t.http.get(`${path}?token=${token}`).expect(401);
      expect(errorOf(res)).toEqual({ code: 'unauthorized', error: 'This stream token was made for another chat' });
    }
    expect(await browserStream(`/api/v1/chats/${chatB}/stream?token=${token}`).refused()).toBe(401);
  });

  it('refuses a chatId the caller does not own with 404 at creation, and a malformed body with 400', async () => {
    const alicesChat = await answeredChat(alice.secret);
    for (const chatId of [alicesChat, 'not-a-chat', '00000000-0000-4000-8000-000000000000']) {
      const res = await createToken(bob.secret, { chatId }).expect(404);
      expect(errorOf(res).code).toBe('chat_not_found');
    }
    for (const body of [{ chatId: 42 }, { chatId: 'x'.repeat(129) }, { chat: alicesChat }]) {
      const res = await createToken(bob.secret, body).expect(400);
      expect(errorOf(res).code).toBe('validation_failed');
    }
    expect(await t.sql('select 1 from stream_tokens where chat_id = $1', [alicesChat])).toEqual([]);
  });

  it('refuses a token on every route that is not an event stream (401), token creation included', async () => {
    const chatId = await answeredChat(alice.secret);
    const token = await tokenFor(alice.secret);
    const attempts = [
      t.http.get(`/api/v1/chats?token=${token}`),
      t.http.get(`/api/v1/chats/${chatId}?token=${token}`),
      t.http.get(`/api/v1/chats/${chatId}/messages?token=${token}`),
      t.http.get(`/api/v1/objects?token=${token}`),
      t.http.post(`/api/v1/stream-tokens?token=${token}`).send({}),
      t.http.post(`/api/v1/chats/${chatId}/messages?token=${token}`).send({ message: 'more' }),
    ];
    for (const attempt of attempts) {
      const res = await attempt.expect(401);
      expect(errorOf(res)).toEqual({
        code: 'unauthorized',
        error: 'Stream tokens open event streams only; send "Authorization: Bearer <key>" on this route',
      });
    }
    expect((await waitForChat(t, chatId, () => true, alice.secret)).status).toBe('waiting');
  });

  it('refuses an unknown, malformed or expired token (401), and sweeps expired tokens as new ones are made', async () => {
    const chatId = await answeredChat(alice.secret);
    for (const bad of ['dst_' + 'A'.repeat(43), 'nonsense', alice.secret]) {
      const res = await t.http.get(`/api/v1/chats/${chatId}/stream?token=${encodeURIComponent(bad)}`).expect(401);
      expect(errorOf(res).code).toBe('unauthorized');
    }
    const repeated = await t.http.get(`/api/v1/chats/${chatId}/stream?token=a&token=b`).expect(401);
    expect(errorOf(repeated).code).toBe('unauthorized');

    const token = await tokenFor(alice.secret, chatId);
    // Its minute has passed (the database's clock decides, the same on every replica).
    await t.sql(`update stream_tokens set expires_at = now() - interval '1 second' where token_hash = $1`, [hashOf(token)]);
    const expired = await t.http.get(`/api/v1/chats/${chatId}/stream?token=${token}`).expect(401);
    expect(errorOf(expired)).toEqual({
      code: 'unauthorized',
      error: 'Unknown or expired stream token, or its key was revoked',
    });
    expect(await browserStream(`/api/v1/chats/${chatId}/stream?token=${token}`).refused()).toBe(401);

    await tokenFor(bob.secret);
    expect(await t.sql('select 1 from stream_tokens where token_hash = $1', [hashOf(token)])).toEqual([]);
    expect(await t.sql('select 1 from stream_tokens where expires_at <= now()')).toEqual([]);
  });

  it("keeps a stream open past its token's expiry, and ends it when the key is revoked; the token then stops working", async () => {
    const carol = await memberKey('carol');
    const chatId = await answeredChat(carol.secret);
    const token = await tokenFor(carol.secret);
    const stream = browserStream(`/api/v1/chats/${chatId}/stream?token=${token}`);
    await stream.opened();
    await stream.waitFor((events) => events.some((e) => e.type === 'status'));

    await t.sql(`update stream_tokens set expires_at = now() - interval '1 second' where token_hash = $1`, [hashOf(token)]);
    llm.enqueue(MockReply.text('Still streaming.'));
    await t.http.post(`/api/v1/chats/${chatId}/messages`).set(bearer(carol.secret)).send({ message: 'Again?' }).expect(202);
    await stream.waitFor((events) =>
      events.some((e) => e.type === 'message' && JSON.stringify(e.data).includes('Still streaming.')),
    );
    expect(stream.readyState).toBe(EventSource.OPEN);

    const fresh = await tokenFor(carol.secret);
    await t.http.delete(`/api/v1/api-keys/${carol.id}`).set(bearer(t.adminKey)).expect(204);
    // The server ends the stream; EventSource notices (an error event) and would reconnect.
    await until(
      () => stream.errors.length > 0,
      () => 'the stream of a revoked key stayed open',
    );
    stream.close();
    const refused = await t.http.get(`/api/v1/chats/${chatId}/stream?token=${fresh}`).expect(401);
    expect(errorOf(refused).code).toBe('unauthorized');
    expect(await browserStream(`/api/v1/chats/watch?token=${fresh}`, WATCH_EVENTS).refused()).toBe(401);
    // And no new token for it.
    expect(errorOf(await createToken(carol.secret).expect(401)).code).toBe('unauthorized');
  });

  it('caps the unexpired tokens of a key (429 with Retry-After); other keys and expired tokens do not count', async () => {
    const dave = await memberKey('dave');
    const tokens: string[] = [];
    for (let i = 0; i < 5; i++) tokens.push(await tokenFor(dave.secret));
    const refused = await createToken(dave.secret).expect(429);
    expect(errorOf(refused)).toMatchObject({ code: 'too_many_stream_tokens', details: { live: 5, limit: 5 } });
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    await createToken(bob.secret).expect(201);

    await t.sql(`update stream_tokens set expires_at = now() - interval '1 second' where token_hash = $1`, [hashOf(tokens[0])]);
    issued.push(bodyOf<StreamTokenResponse>(await createToken(dave.secret).expect(201)).token);
  });

  it('opens a stream on another replica of the same database than the one that made the token', async () => {
    // The logger is the process's: the replica writes to the same lines, at the same level.
    const replica = await startTestApp({
      database: t.database,
      env: { CHAT_WORKER_ENABLED: 'false', LOG_LEVEL: 'info' },
      logDestination: { write: (line: string) => void log.push(line) },
    });
    try {
      const replicaUrl = await listen(replica);
      const chatId = await answeredChat(alice.secret, 'Made on A, read on B.');
      const token = await tokenFor(alice.secret, chatId);
      const stream = browserStream(`/api/v1/chats/${chatId}/stream?token=${token}`, CHAT_EVENTS, replicaUrl);
      await stream.opened();
      await stream.waitFor((events) => events.some((e) => e.type === 'status' && e.data.status === 'waiting'));
      expect(stream.of('message')[1].data.parts).toEqual([{ type: 'text', text: 'Made on A, read on B.' }]);
      stream.close();
    } finally {
      await replica.close();
    }
  });

  it('documents the token route and the query parameters of the event streams in the OpenAPI document', async () => {
    type Parameter = { name: string; in: string; schema?: { enum?: string[] } };
    type Operation = {
      summary?: string;
      parameters?: Parameter[];
      responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
    };
    const docs = bodyOf<{
      paths: Record<string, Record<string, Operation>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
    }>(await t.http.get('/docs-json').expect(200));
    const create = docs.paths['/api/v1/stream-tokens'].post;
    expect(create.summary).toBe('Create a stream token');
    const ref = create.responses['201'].content?.['application/json'].schema?.$ref ?? '';
    const response = docs.components.schemas[ref.split('/').at(-1)!];
    expect(Object.keys(response.properties ?? {}).sort()).toEqual(['expiresAt', 'token']);
    expect(response.required?.sort()).toEqual(['expiresAt', 'token']);

    const query = (operation: Operation) => (operation.parameters ?? []).filter((p) => p.in === 'query');
    const stream = query(docs.paths['/api/v1/chats/{id}/stream'].get);
    expect(stream.map((p) => p.name).sort()).toEqual(['afterId', 'token', 'until']);
    expect(stream.find((p) => p.name === 'until')?.schema?.enum).toEqual(['idle']);
    expect(query(docs.paths['/api/v1/chats/watch'].get).map((p) => p.name)).toEqual(['token']);
    expect(query(docs.paths['/api/v1/chats/{id}/messages'].get).map((p) => p.name)).toEqual(['afterId']);
  });

  it('never writes a token into the log: the request line names the query parameter, not its value', async () => {
    const token = await tokenFor(t.adminKey);
    const res = await t.http.get(`/api/v1/chats?token=${token}`).expect(401);
    const requestId = res.headers['x-request-id'];
    await until(
      () => log.some((line) => line.includes(requestId) && line.includes('request completed')),
      () => 'no completion line',
    );
    const line = JSON.parse(log.find((l) => l.includes(requestId) && l.includes('request completed'))!) as Record<
      string,
      unknown
    >;
    expect(line).toMatchObject({ route: '/api/v1/chats', query: ['token'], status: 401 });

    const text = log.join('');
    expect(issued.length).toBeGreaterThan(10);
    for (const value of issued) {
      expect(text).not.toContain(value);
      expect(text).not.toContain(value.slice(4, 20));
    }
  });
});

describe('chat streams with ?until=idle', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;

  const createChat = async (message = 'Hello?'): Promise<string> =>
    bodyOf<ChatResponse>(
      await t.http.post('/api/v1/chats').set(bearer(t.adminKey)).send({ agent: 'data_chat', message }).expect(201),
    ).id;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: { CHAT_POLL_INTERVAL_MS: '200', CHAT_HEARTBEAT_INTERVAL_MS: '100', SSE_KEEPALIVE_MS: '1000' },
    }));
    baseUrl = await listen(t);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('ends with an end event and closes once the running turn leaves the chat waiting', async () => {
    llm.enqueue(
      MockReply.toolCall('list_objects', {}),
      MockReply.text('Nothing here yet, as it turns out.', { chunkDelayMs: 5 }),
    );
    const id = await createChat();
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream?until=idle`, t.adminKey);
    await stream.waitForEnd();
    const types = stream.events.map((e) => e.event);
    expect(types.at(-1)).toBe('end');
    expect(stream.events.at(-1)?.data).toEqual({ status: 'waiting' });
    expect(stream.events.at(-2)).toMatchObject({ event: 'status', data: { status: 'waiting' } });
    expect(stream.of('message').map((e) => e.data.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(stream.of('end')).toHaveLength(1);
  });

  it('ends right after the catch-up when the chat is already idle', async () => {
    llm.enqueue(MockReply.text('Done already.'));
    const id = await createChat();
    await waitForChat(t, id, hasStatus('waiting'));
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream?until=idle&afterId=0`, t.adminKey);
    await stream.waitForEnd();
    expect(stream.events.map((e) => e.event)).toEqual(['message', 'message', 'status', 'end']);
    expect(stream.events.at(-1)?.data).toEqual({ status: 'waiting' });
  });

  it('ends when the chat fails, after the error status', async () => {
    llm.enqueue(MockReply.httpError(400, { message: 'bad request' }));
    const id = await createChat();
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream?until=idle`, t.adminKey);
    await stream.waitForEnd();
    expect(stream.events.at(-2)).toMatchObject({ event: 'status', data: { status: 'error', lastError: match.any(Object) } });
    expect(stream.events.at(-1)).toMatchObject({ event: 'end', data: { status: 'error' } });
  });

  it('keeps streaming across turns without until', async () => {
    llm.enqueue(MockReply.text('First answer.'));
    const id = await createChat();
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey);
    try {
      await stream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));
      llm.enqueue(MockReply.text('Second answer.'));
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'More?' }).expect(202);
      await stream.waitFor((events) => events.filter((e) => e.event === 'status' && e.data.status === 'waiting').length === 2);
      expect(stream.of('message').map((e) => e.data.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
      expect(stream.of('end')).toEqual([]);
      expect(stream.ended).toBe(false);
    } finally {
      stream.close();
    }
  });

  it('refuses any other until with 400', async () => {
    llm.enqueue(MockReply.text('Fine.'));
    const id = await createChat('Ignored');
    for (const value of ['done', 'IDLE', '']) {
      const res = await t.http.get(`/api/v1/chats/${id}/stream`).query({ until: value }).set(bearer(t.adminKey)).expect(400);
      expect(errorOf(res)).toMatchObject({ code: 'validation_failed', error: 'until must be idle' });
    }
  });
});
