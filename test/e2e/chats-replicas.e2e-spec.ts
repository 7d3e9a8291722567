import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import { COMMITTED_EVENT } from '../../src/database/commit-announcer.service';
import { PUBSUB_CHANNEL } from '../../src/database/pg-pubsub.service';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import { startAppWithMockLlm, sentMessages } from '../support/agent-fixtures';
import { eventually, hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { createTestDatabase } from '../support/test-database';
import { bearer, startTestApp, TEST_ADMIN_KEY, type TestApp } from '../support/test-app';

const FORM_TOOL = {
  name: 'show_form',
  description: 'Show a form.',
  inputSchema: { type: 'object', properties: { title: { type: 'string' } } },
};
const FAST = { CHAT_POLL_INTERVAL_MS: '100', CHAT_HEARTBEAT_INTERVAL_MS: '100' };

describe('durable chats across replicas', () => {
  it('runs a chat created on A, takes its tool results on B, and streams on B what A does', async () => {
    const { t: a, llm } = await startAppWithMockLlm({ env: { ...FAST, SEED: 'true' } });
    const b = await startTestApp({
      database: a.database,
      env: { ...FAST, CHAT_WORKER_ENABLED: 'false', OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k' },
    });
    try {
      const bUrl = await listen(b);
      llm.enqueue(
        MockReply.toolCalls([
          {
            id: 'c_builtin',
            name: 'aggregate_data',
            arguments: { objectName: 'account', aggregations: [{ function: 'count', alias: 'n' }] },
          },
          { id: 'c_form', name: 'show_form', arguments: { title: 'Region?' } },
        ]),
        MockReply.text('Done on A'),
      );
      const id = bodyOf<ChatResponse>(
        await a.http
          .post('/api/v1/chats')
          .set(bearer(a.adminKey))
          .send({ agent: 'data_chat', message: 'hello', dynamicTools: [FORM_TOOL] })
          .expect(201),
      ).id;
      const stream = await SseClient.open(bUrl, `/api/v1/chats/${id}/stream`, b.adminKey);
      await stream.waitFor((events) => events.some((e) => e.event === 'action_required'));
      expect(stream.of('action_required').at(-1)!.data.pendingToolCalls).toEqual([
        { id: 'c_form', name: 'show_form', arguments: { title: 'Region?' } },
      ]);

      await b.http
        .post(`/api/v1/chats/${id}/tool-results`)
        .set(bearer(b.adminKey))
        .send({ results: [{ toolCallId: 'c_form', output: 'EMEA' }] })
        .expect(204);
      await stream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));
      stream.close();
      expect(stream.of('message').map((e) => e.data.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
      expect(
        stream
          .of('message_part')
          .map((e) => e.data.delta)
          .join(''),
      ).toBe('Done on A');
      const ids = stream.of('message').map((e) => e.data.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(
        sentMessages(llm, 1)
          .filter((m) => m.role === 'tool')
          .map((m) => m.tool_call_id),
      ).toEqual(['c_builtin', 'c_form']);
    } finally {
      await b.close();
      await a.close();
      await llm.close();
    }
  });
});

describe('shutting a replica down', () => {
  it('hands its in-flight chat back as pending, and another replica finishes it', async () => {
    const database = await createTestDatabase();
    const { t: a, llm } = await startAppWithMockLlm({ database, env: FAST });
    llm.enqueue(MockReply.hang(), MockReply.text('finished elsewhere'));
    const id = bodyOf<ChatResponse>(
      await a.http.post('/api/v1/chats').set(bearer(a.adminKey)).send({ agent: 'data_chat', message: 'x' }).expect(201),
    ).id;
    await llm.waitForRequests(1);
    const b = await startTestApp({
      database: a.database,
      env: { ...FAST, CHAT_WORKER_ENABLED: 'false', OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k' },
    });
    try {
      await a.close();
      const [row] = await b.sql<{ status: string; worker_id: string | null }>(
        `select status, worker_id from chats where id = $1`,
        [id],
      );
      expect(row).toEqual({ status: 'pending', worker_id: null });
      const c = await startTestApp({
        database: b.database,
        env: { ...FAST, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', LLM_MAX_RETRIES: '0' },
      });
      try {
        await waitForChat(b, id, hasStatus('waiting'));
        const rows = await b.sql<{ role: string }>(`select role from chat_messages where chat_id = $1 order by id`, [id]);
        expect(rows.map((r) => r.role)).toEqual(['user', 'assistant']);
      } finally {
        await c.close();
      }
    } finally {
      await b.close();
      await llm.close();
      await database.drop();
    }
  });
});

describe('announcements of chat events', () => {
  it('sends no NOTIFY from chat writes, only announcements of the newest event id, fewer than the events', async () => {
    const { t, llm } = await startAppWithMockLlm({ env: { ...FAST, EVENTS_ANNOUNCE_WINDOW_MS: '300' } });
    const listener = new Client({ connectionString: t.database.url });
    const payloads: Array<Record<string, unknown>> = [];
    try {
      await listener.connect();
      listener.on('notification', (m) => payloads.push(JSON.parse(m.payload!) as Record<string, unknown>));
      await listener.query(`listen "${PUBSUB_CHANNEL}"`);
      llm.enqueue(MockReply.text(['Hello ', 'there']));
      const id = bodyOf<ChatResponse>(
        await t.http.post('/api/v1/chats').set(bearer(t.adminKey)).send({ agent: 'data_chat', message: 'hi' }).expect(201),
      ).id;
      await waitForChat(t, id, hasStatus('waiting'));
      const [{ newest, events }] = await t.sql<{ newest: string; events: string }>(
        `select max(id) as newest, count(*) as events from chat_events where chat_id = $1`,
        [id],
      );
      await eventually(() => payloads.some((p) => p.chatEvents === Number(newest)));
      expect(payloads.map((p) => p.type)).toEqual(payloads.map(() => COMMITTED_EVENT));
      // Created, the message, running, the answer's text, its message and status: commits of several events each, announced per window.
      expect(Number(events)).toBeGreaterThanOrEqual(6);
      expect(payloads.length).toBeLessThan(Number(events));
    } finally {
      await listener.end();
      await t.close();
      await llm.close();
    }
  });
});

describe('a stream opened while events committed before its read are still unread here', () => {
  it('does not replay the statuses its opening read already showed, and sends the ones after it', async () => {
    const llm = await MockLlmServer.start();
    const database = await createTestDatabase();
    const t = await startTestApp({
      database,
      env: { OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', CHAT_WORKER_ENABLED: 'false', EVENTS_POLL_INTERVAL_MS: '600000' },
    });
    try {
      const url = await listen(t);
      const id = bodyOf<ChatResponse>(
        await t.http.post('/api/v1/chats').set(bearer(t.adminKey)).send({ agent: 'data_chat', message: 'hello' }).expect(201),
      ).id;
      // Another replica's commit, not announced yet: the chat's new status, and its event in the log.
      const commitElsewhere = async (status: string): Promise<number> => {
        const [{ id: eventId }] = await t.sql<{ id: string }>(
          `with c as (update chats set status = $2 where id = $1 returning id, owner)
           insert into chat_events (chat_id, event, prev)
           select id, jsonb_build_object('type', 'status', 'chatId', id, 'owner', owner, 'status', $2::text), chat_event_prev(id) from c
           returning id`,
          [id, status],
        );
        return Number(eventId);
      };
      const announce = (eventId: number) =>
        t.sql(`select pg_notify($1, $2)`, [
          PUBSUB_CHANNEL,
          JSON.stringify({ type: COMMITTED_EVENT, replica: 'elsewhere', chatEvents: eventId }),
        ]);
      await commitElsewhere('running');
      // The stream's read shows running; the event saying so reaches this replica only afterwards.
      const stream = await SseClient.open(url, `/api/v1/chats/${id}/stream?afterId=0`, t.adminKey);
      try {
        await stream.waitFor((events) => events.some((e) => e.event === 'status'));
        await announce(await commitElsewhere('waiting'));
        await stream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));
        expect(stream.of('status').map((e) => e.data.status)).toEqual(['running', 'waiting']);
      } finally {
        stream.close();
      }
    } finally {
      await t.close();
      await llm.close();
      await database.drop();
    }
  });
});

describe('a replica killed between its commits and their announcement', () => {
  let child: ChildProcess | undefined;

  afterEach(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
  });

  /**
   * B (no worker) creates a chat and streams it; a worker process whose announcements are held back
   * (a window longer than the test) runs the turn and is killed once the turn is committed, so nothing
   * ever announces its events. `deliver` then makes B read them.
   */
  async function streamOfUnannouncedTurn(
    bEnv: Record<string, string>,
    deliver: (b: TestApp, env: Record<string, string>) => Promise<void>,
  ): Promise<SseClient> {
    expect(existsSync(mainJs)).toBe(true);
    const llm = await MockLlmServer.start();
    const database = await createTestDatabase();
    const dataDir = await mkdtemp(join(tmpdir(), 'silent-worker-'));
    const env = { OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', LLM_MAX_RETRIES: '0', ...FAST };
    const b = await startTestApp({ database, env: { ...env, ...bEnv, CHAT_WORKER_ENABLED: 'false' } });
    try {
      child = await spawnReplica(database.url, dataDir, { ...env, EVENTS_ANNOUNCE_WINDOW_MS: '600000' });
      llm.enqueue(MockReply.text(['Answer ', 'from A'], { delayMs: 300 }));
      const bUrl = await listen(b);
      const id = bodyOf<ChatResponse>(
        await b.http.post('/api/v1/chats').set(bearer(b.adminKey)).send({ agent: 'data_chat', message: 'hello' }).expect(201),
      ).id;
      const stream = await SseClient.open(bUrl, `/api/v1/chats/${id}/stream`, b.adminKey);
      await waitForChat(b, id, hasStatus('waiting'));
      child.kill('SIGKILL');
      await new Promise((resolve) => child!.once('exit', resolve));
      await deliver(b, env);
      await stream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));
      stream.close();
      return stream;
    } finally {
      if (child && child.exitCode === null) child.kill('SIGKILL');
      await b.close();
      await llm.close();
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    }
  }

  function expectWholeTurn(stream: SseClient): void {
    expect(stream.of('message').map((e) => e.data.role)).toEqual(['user', 'assistant']);
    expect(stream.of('message').at(-1)!.data.parts).toEqual([{ type: 'text', text: 'Answer from A' }]);
    expect(
      stream
        .of('message_part')
        .map((e) => e.data.delta)
        .join(''),
    ).toBe('Answer from A');
    const statuses = stream.of('status').map((e) => e.data.status);
    expect(statuses).toContain('running');
    expect(statuses.at(-1)).toBe('waiting');
  }

  it("has its events delivered to a stream on another replica by that replica's poll", async () => {
    const stream = await streamOfUnannouncedTurn({ EVENTS_POLL_INTERVAL_MS: '200' }, () => Promise.resolve());
    expectWholeTurn(stream);
  });

  it('has its events delivered to a stream on another replica by the next announcement of any replica', async () => {
    const stream = await streamOfUnannouncedTurn({ EVENTS_POLL_INTERVAL_MS: '600000' }, async (b, env) => {
      // Another replica commits something else: its announcement makes B read everything new.
      const c = await startTestApp({ database: b.database, env: { ...env, CHAT_WORKER_ENABLED: 'false' } });
      try {
        await c.http.post('/api/v1/chats').set(bearer(c.adminKey)).send({ agent: 'data_chat', message: 'other' }).expect(201);
      } finally {
        await c.close();
      }
    });
    expectWholeTurn(stream);
  });
});

describe('agents across replicas', () => {
  it('refuses on every replica an agent that one replica deleted, though the others had it cached', async () => {
    const { t: a, llm } = await startAppWithMockLlm({ env: FAST });
    const b = await startTestApp({
      database: a.database,
      env: { ...FAST, CHAT_WORKER_ENABLED: 'false', OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k' },
    });
    try {
      await a.http
        .post('/api/v1/ai/agents')
        .set(bearer(a.adminKey))
        .send({ name: 'short_lived', label: 'Short lived', instructions: 'Answer briefly.', tools: [] })
        .expect(201);
      const chatOnB = () =>
        b.http
          .post('/api/v1/ai/agents/short_lived/chat')
          .set(bearer(b.adminKey))
          .send({ messages: [{ role: 'user', content: 'hi' }] });
      llm.enqueue(MockReply.text('Still here.'));
      // B loads the agent (and keeps it) for this chat.
      expect(bodyOf<StatelessChatResponse>(await chatOnB().expect(200)).content).toBe('Still here.');

      await a.http.delete('/api/v1/ai/agents/short_lived').set(bearer(a.adminKey)).expect(204);
      // The deletion reaches B by NOTIFY: a chat sent before it arrives may still run (and call the model).
      await eventually(async () => (await chatOnB()).status === 404);
      const asked = llm.requests.length;
      const refused = await chatOnB().expect(404);
      expect(errorOf(refused).code).toBe('agent_not_found');
      // Refused before any model call, and for good.
      expect(llm.requests).toHaveLength(asked);
    } finally {
      await b.close();
      await a.close();
      await llm.close();
    }
  });
});

describe('a worker killed mid-chat', () => {
  let child: ChildProcess | undefined;

  afterEach(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
  });

  it('is replaced by another instance that finishes the chat without losing or doubling a message', async () => {
    expect(existsSync(mainJs)).toBe(true); // built by `npm test`'s pretest step
    const llm = await MockLlmServer.start();
    const database = await createTestDatabase();
    const dataDir = await mkdtemp(join(tmpdir(), 'killed-worker-'));
    const env = { OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', LLM_MAX_RETRIES: '0', ...FAST };
    // The API instance takes requests but runs no chats; the child process is the only worker.
    const api = await startTestApp({ database, env: { ...env, CHAT_WORKER_ENABLED: 'false', SEED: 'true' } });
    let rescuer: Awaited<ReturnType<typeof startTestApp>> | undefined;
    try {
      child = await spawnReplica(database.url, dataDir, env);

      llm.enqueue(
        MockReply.toolCall('aggregate_data', { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] }),
        MockReply.hang(),
        MockReply.text('All 2000 deals counted.'),
      );
      const id = bodyOf<ChatResponse>(
        await api.http
          .post('/api/v1/chats')
          .set(bearer(api.adminKey))
          .send({ agent: 'data_chat', message: 'count deals' })
          .expect(201),
      ).id;
      await llm.waitForRequests(2, 20_000);
      const beforeKill = await api.sql<{ role: string }>(`select role from chat_messages where chat_id = $1 order by id`, [id]);
      expect(beforeKill.map((r) => r.role)).toEqual(['user', 'assistant', 'tool']);

      child.kill('SIGKILL');
      await new Promise((resolve) => child!.once('exit', resolve));
      expect((await waitForChat(api, id, () => true)).status).toBe('running');

      rescuer = await startTestApp({ database, env: { ...env, CHAT_STALE_AFTER_MS: '500' } });
      const done = await waitForChat(api, id, hasStatus('waiting'), api.adminKey, 20_000);
      expect(done.lastError).toBeNull();
      const rows = await api.sql<{ role: string; parts: Array<{ type: string; text?: string; toolCallId?: string }> }>(
        `select role, parts from chat_messages where chat_id = $1 order by id`,
        [id],
      );
      expect(rows.map((r) => r.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
      expect(rows[3].parts).toEqual([{ type: 'text', text: 'All 2000 deals counted.' }]);
      expect(llm.requests).toHaveLength(3);
      const resumed = sentMessages(llm, 2).filter((m) => m.role !== 'system');
      expect(resumed.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    } finally {
      if (child && child.exitCode === null) child.kill('SIGKILL');
      await rescuer?.close();
      await api.close();
      await llm.close();
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

const mainJs = join(__dirname, '../../dist/src/main.js');

/** The built app (`npm test`'s pretest step) in a process of its own, listening: one that a test can kill outright. */
async function spawnReplica(databaseUrl: string, dataDir: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(join(__dirname, '../../node_modules/.bin/node'), [mainJs], {
    env: {
      ...process.env,
      ...env,
      NODE_OPTIONS: '',
      DATABASE_URL: databaseUrl,
      PORT: '0',
      SEED: 'false',
      ADMIN_API_KEY: TEST_ADMIN_KEY,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  await waitUntil(
    () => output.includes('listening on'),
    30_000,
    () => output,
  );
  return child;
}

async function waitUntil(condition: () => boolean, timeoutMs: number, describe: () => string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`timed out; output: ${describe()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
