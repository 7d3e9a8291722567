import type { ChangesResponse } from '../../src/changes/changes.dto';
import type { RunResponse, RunsResponse, ScheduleResponse } from '../../src/schedules/schedule.dto';
import type { DeliveriesResponse, DeliveryResponse, WebhookCreatedResponse } from '../../src/webhooks/webhook.dto';
import { spawnApp, type AppProcess } from '../support/app-process';
import { eventually } from '../support/chat-helpers';
import { fieldSpec } from '../support/fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, idOf } from '../support/responses';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { bearer, startTestApp, type TestApp } from '../support/test-app';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * Replicas killed outright (SIGKILL: no shutdown hook, the job's claim left as it was) in the middle of
 * their automation work. Replica A is a process of its own; replica B, in this process, takes over once
 * A's job lease ends. Two replicas never running one schedule tick twice is in schedules.e2e-spec.ts.
 *
 * A's attempt timeout and question timeout are long enough that A is still in the middle of its work
 * when it is killed; the leases beyond them (JOB_LEASE_MARGIN_S) and the queue's look for ended leases
 * (JOB_SUPERVISE_INTERVAL_S) are short, so that B retries within seconds.
 */
const ENV = {
  // The test polls run and delivery state every few milliseconds as a member key for up to a minute.
  RATE_LIMIT_PER_MINUTE: '0',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_RETRY_DELAY_S: '1',
  WEBHOOK_RETRY_DELAY_MAX_S: '2',
  WEBHOOK_TIMEOUT_MS: '20000',
  SCHEDULE_QUESTION_TIMEOUT_S: '20',
  JOB_LEASE_MARGIN_S: '1',
  JOB_SUPERVISE_INTERVAL_S: '1',
  JOB_POLL_INTERVAL_MS: '500',
  EVENTS_POLL_INTERVAL_MS: '200',
  SCHEDULE_POLL_INTERVAL_MS: '200',
  CHAT_POLL_INTERVAL_MS: '200',
  CHAT_HEARTBEAT_INTERVAL_MS: '100',
  // B takes over a chat whose replica stopped beating soon.
  CHAT_STALE_AFTER_MS: '1500',
};

/** Long enough for a lease to end, the queue to notice and B to retry, with a loaded machine's slack. */
const TAKE_OVER_MS = 90_000;

type Http = TestApp['http'];

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

describe('a replica killed in the middle of automation work', () => {
  let database: TestDatabase;
  const receiver = new WebhookReceiver();
  let a: AppProcess | undefined;
  let b: TestApp | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    await receiver.start();
  });
  afterEach(async () => {
    await a?.cleanUp();
    await b?.close();
    a = b = undefined;
  });
  afterAll(async () => {
    await receiver.stop();
    await database.drop();
  });

  const memberKey = async (http: Http, adminKey: string, name: string) =>
    bodyOf<{ secret: string }>(
      await http.post('/api/v1/api-keys').set(bearer(adminKey)).send({ name, role: 'member' }).expect(201),
    ).secret;
  const subscribe = async (http: Http, key: string, path: string, body: Record<string, unknown>) => {
    const hook = bodyOf<WebhookCreatedResponse>(
      await http
        .post('/api/v1/webhooks')
        .set(bearer(key))
        .send({ url: receiver.url(path), ...body })
        .expect(201),
    );
    receiver.trust(path, hook.secret);
    return hook;
  };

  it('has a delivery cut off by the kill retried by another replica: every change received, in order per record, none completed twice', async () => {
    const path = '/killed-delivery';
    a = await spawnApp(database.url, ENV);
    const adminKey = a.adminKey;
    await a.http
      .post('/api/v1/objects')
      .set(bearer(adminKey))
      .send({ name: 'parcel', label: 'Parcel', fields: [fieldSpec('label', 'text'), fieldSpec('qty', 'number')] })
      .expect(201);
    const member = await memberKey(a.http, adminKey, 'courier');
    const hook = await subscribe(a.http, member, path, { objects: ['parcel'], events: ['create', 'update', 'delete'] });
    const deliveries = async (http: Http) =>
      bodyOf<DeliveriesResponse>(await http.get(`/api/v1/webhooks/${hook.id}/deliveries`).set(bearer(member)).expect(200))
        .deliveries;
    const create = async (http: Http, record: Record<string, unknown>) =>
      idOf(await http.post('/api/v1/objects/parcel/records').set(bearer(member)).send(record).expect(201));
    const update = async (http: Http, id: string, qty: number) =>
      http.patch(`/api/v1/objects/parcel/records/${id}`).set(bearer(member)).send({ qty }).expect(200);

    // The first delivery (of A, the only replica yet) is held: A is in the middle of its attempt.
    receiver.holdNext(path);
    const first = await create(a.http, { label: 'first', qty: 1 });
    await eventually(() => receiver.held(path) === 1, 20_000);
    const [heldRequest] = receiver.arrived.filter((r) => r.path === path);
    expect(heldRequest.body.data).toMatchObject({ id: first, op: 'create' });
    // More changes while it is held: of the held record (they wait behind it) and of others (they go on).
    await update(a.http, first, 2);
    const second = await create(a.http, { label: 'second', qty: 1 });
    await update(a.http, second, 2);

    b = await startTestApp({ database, env: ENV });
    await a.kill();
    // Killed mid-attempt: the attempt started and has no outcome.
    const cutOff = (await deliveries(b.http)).find((d) => d.id === heldRequest.id)!;
    expect(cutOff).toMatchObject({ status: 'pending', attempts: 1, responseStatus: null, error: null });
    // The receiver answers now, to nobody: A's connection died with it.
    receiver.release(path);
    expect(receiver.abandoned.map((r) => r.id)).toEqual([heldRequest.id]);

    await update(b.http, first, 3);
    await update(b.http, second, 3);
    const third = await create(b.http, { label: 'third', qty: 1 });
    await b.http.delete(`/api/v1/objects/parcel/records/${third}`).set(bearer(member)).expect(204);

    let log: DeliveryResponse[] = [];
    await eventually(async () => {
      log = await deliveries(b!.http);
      return log.length === 8 && log.every((d) => d.status === 'succeeded');
    }, TAKE_OVER_MS);

    // Every change of the feed was received with a 2xx, each exactly once.
    const feed = bodyOf<ChangesResponse>(
      await b.http.get('/api/v1/objects/parcel/changes').query({ after: '0' }).set(bearer(member)).expect(200),
    ).changes;
    expect(feed).toHaveLength(8);
    const accepted = receiver.to(path);
    expect(accepted.map((r) => r.body.data.cursor).sort()).toEqual(feed.map((c) => c.cursor).sort());
    expect(new Set(accepted.map((r) => r.id)).size).toBe(accepted.length);
    // One webhook-id per change, however often it was sent: a retry is a redelivery of the same id.
    const arrived = receiver.arrived.filter((r) => r.path === path);
    for (const [cursor, sent] of groupBy(arrived, (r) => r.body.data.cursor)) {
      expect([cursor, new Set(sent.map((r) => r.id)).size]).toEqual([cursor, 1]);
    }
    // The cut-off delivery arrived twice: A's attempt, never answered, and B's retry, answered.
    expect(arrived.filter((r) => r.id === heldRequest.id)).toHaveLength(2);
    expect(accepted.filter((r) => r.id === heldRequest.id)).toHaveLength(1);

    // In order per record, as received with a 2xx.
    const byRecord = groupBy(accepted, (r) => r.body.data.id);
    expect([...byRecord.keys()].sort()).toEqual([first, second, third].sort());
    for (const [id, received] of byRecord) {
      const cursors = received.map((r) => BigInt(r.body.data.cursor));
      expect([id, cursors]).toEqual([id, [...cursors].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))]);
    }
    expect(byRecord.get(first)!.map((r) => [r.body.data.op, r.body.data.record?.qty])).toEqual([
      ['create', 1],
      ['update', 2],
      ['update', 3],
    ]);
    expect(byRecord.get(third)!.map((r) => r.body.data.op)).toEqual(['create', 'delete']);

    // The log: the cut-off delivery succeeded on its second attempt or later; the others as sent.
    const retried = log.find((d) => d.id === heldRequest.id)!;
    expect(retried).toMatchObject({ status: 'succeeded', responseStatus: 204, error: null });
    expect(retried.attempts).toBeGreaterThanOrEqual(2);
    expect(log.map((d) => d.id).sort()).toEqual(accepted.map((r) => r.id).sort());
    expect(receiver.rejected).toEqual([]);
  }, 180_000);

  it('has a scheduled question cut off by the kill finished by another replica: one chat, one run succeeded, the answer received once', async () => {
    const path = '/killed-question';
    const llm = await MockLlmServer.start();
    try {
      const env = { ...ENV, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', LLM_MAX_RETRIES: '0' };
      a = await spawnApp(database.url, env);
      const adminKey = a.adminKey;
      await a.http
        .post('/api/v1/ai/agents')
        .set(bearer(adminKey))
        .send({ name: 'night_reporter', label: 'Night reporter', instructions: 'Report briefly.', tools: [] })
        .expect(201);
      const member = await memberKey(a.http, adminKey, 'reporter');
      const hook = await subscribe(a.http, member, path, { objects: [], events: [] });
      const question = bodyOf<ScheduleResponse>(
        await a.http
          .post('/api/v1/schedules')
          .set(bearer(member))
          .send({
            name: 'Nightly summary',
            cron: '0 3 * * *',
            action: { type: 'question', agent: 'night_reporter', message: 'Summarise the night.' },
            deliver: [{ webhook: hook.id }],
          })
          .expect(201),
      );
      const runs = async (http: Http) =>
        bodyOf<RunsResponse>(await http.get(`/api/v1/schedules/${question.id}/runs`).set(bearer(member)).expect(200)).runs;

      // The model never answers A: the run waits for its chat's answer when A is killed.
      llm.enqueue(MockReply.hang(), MockReply.text('All quiet overnight.'));
      const queued = bodyOf<RunResponse>(
        await a.http.post(`/api/v1/schedules/${question.id}/run`).set(bearer(member)).expect(202),
      );
      await llm.waitForRequests(1, 20_000);
      const [started] = await runs(a.http);
      expect(started).toMatchObject({ id: queued.id, status: 'running' });
      expect(started.chatId).toEqual(expect.any(String));

      b = await startTestApp({ database, env });
      await a.kill();

      let run: RunResponse | undefined;
      await eventually(async () => {
        run = (await runs(b!.http)).find((r) => r.id === queued.id);
        return run?.status !== 'running' && run?.deliveries.every((d) => d.status !== 'pending') === true;
      }, TAKE_OVER_MS);
      expect(run).toMatchObject({ status: 'succeeded', error: null, chatId: started.chatId });
      expect(run!.deliveries).toMatchObject([{ kind: 'webhook', target: hook.id, status: 'succeeded', responseStatus: 204 }]);
      // One chat for the run, answered once: B took over A's chat rather than asking again.
      const chats = await b.sql<{ id: string }>(`select id from chats`);
      expect(chats.map((c) => c.id)).toEqual([started.chatId]);
      const answers = await b.sql<{ n: number }>(
        `select count(*)::int as n from chat_messages where chat_id = $1 and role = 'assistant'`,
        [started.chatId],
      );
      expect(answers[0].n).toBe(1);
      expect(llm.requests).toHaveLength(2);

      // Received once: one webhook-id, answered 2xx once, carrying the answer of the run's chat.
      const arrived = receiver.arrived.filter((r) => r.path === path);
      expect(new Set(arrived.map((r) => r.id))).toEqual(new Set([run!.deliveries[0].id]));
      const accepted = receiver.to(path);
      expect(accepted).toHaveLength(1);
      const event = accepted[0].body as unknown as { type: string; data: { chatId: string; answer: string } };
      expect(event).toMatchObject({
        type: 'question.answered',
        data: { chatId: started.chatId, answer: 'All quiet overnight.' },
      });
      expect(receiver.rejected).toEqual([]);
    } finally {
      await llm.close();
    }
  }, 180_000);
});
