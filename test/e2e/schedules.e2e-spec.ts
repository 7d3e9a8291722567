import type { ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import type { RunResponse, RunsResponse, ScheduleResponse, SchedulesResponse } from '../../src/schedules/schedule.dto';
import { ScheduleTicker } from '../../src/schedules/schedule-ticker';
import type { WebhookCreatedResponse } from '../../src/webhooks/webhook.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { eventually } from '../support/chat-helpers';
import { asAdmin, createAgent, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bodyText, SmtpReceiver } from '../support/smtp-receiver';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { WebhookReceiver, WEBHOOK_TEST_ENV } from '../support/webhook-receiver';

/** Fast polls and retries; receivers on 127.0.0.1. */
const ENV = {
  ...WEBHOOK_TEST_ENV,
  SCHEDULE_POLL_INTERVAL_MS: '200',
  CHAT_POLL_INTERVAL_MS: '200',
  CHAT_HEARTBEAT_INTERVAL_MS: '100',
};

const FINAL = new Set(['succeeded', 'failed', 'skipped']);

/** The sample data: sales by region and owner, and a revenue metric over them. */
async function salesAndRevenue(t: TestApp): Promise<void> {
  await createObject(t, 'sale', [
    fieldSpec('region', 'select', { options: ['north', 'south', 'east'] }),
    fieldSpec('owner', 'text'),
    fieldSpec('amount', 'number'),
    fieldSpec('sold_on', 'date'),
  ]);
  await t.http
    .post('/api/v1/metrics')
    .set(asAdmin(t))
    .send({
      name: 'revenue',
      label: 'Revenue',
      object: 'sale',
      type: 'simple',
      measure: { function: 'sum', field: 'amount' },
      timeField: 'sold_on',
      dimensions: ['region', 'owner'],
    })
    .expect(201);
}

/** Helpers over one app: sales, schedules, runs. */
function helpers(t: () => TestApp) {
  const sale = async (record: Record<string, unknown>) =>
    idOf(await t().http.post('/api/v1/objects/sale/records').set(asAdmin(t())).send(record).expect(201));
  const setAmount = async (id: string, amount: number) =>
    t().http.patch(`/api/v1/objects/sale/records/${id}`).set(asAdmin(t())).send({ amount }).expect(200);
  const schedule = async (key: string, body: Record<string, unknown>) =>
    bodyOf<ScheduleResponse>(await t().http.post('/api/v1/schedules').set(bearer(key)).send(body).expect(201));
  const runs = async (scheduleId: string, key: string) =>
    bodyOf<RunsResponse>(await t().http.get(`/api/v1/schedules/${scheduleId}/runs`).set(bearer(key)).expect(200)).runs;
  /** Runs the schedule now and waits for the run to end and its deliveries to settle. */
  const runNow = async (scheduleId: string, key: string): Promise<RunResponse> => {
    const queued = bodyOf<RunResponse>(await t().http.post(`/api/v1/schedules/${scheduleId}/run`).set(bearer(key)).expect(202));
    expect(queued).toMatchObject({ status: 'queued', trigger: 'manual', scheduleId });
    let run: RunResponse | undefined;
    await eventually(async () => {
      run = (await runs(scheduleId, key)).find((r) => r.id === queued.id);
      return !!run && FINAL.has(run.status) && run.deliveries.every((d) => d.status !== 'pending');
    }, 30_000);
    return run!;
  };
  return { sale, setAmount, schedule, runs, runNow };
}

describe('schedules: metric alerts and questions, delivered to webhooks and by email', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  const receiver = new WebhookReceiver();
  const smtp = new SmtpReceiver();
  let member: string;
  let otherMember: string;
  let hook: WebhookCreatedResponse;
  const h = helpers(() => t);

  beforeAll(async () => {
    await receiver.start();
    await smtp.start();
    ({ t, llm } = await startAppWithMockLlm({ env: { ...ENV, SMTP_URL: smtp.url, SMTP_FROM: 'alerts@example.com' } }));
    await salesAndRevenue(t);
    member = (await createApiKey(t, { name: 'scheduler', role: 'member' })).secret;
    otherMember = (await createApiKey(t, { name: 'other', role: 'member' })).secret;
    // No objects and no events: it receives only schedule deliveries.
    hook = bodyOf<WebhookCreatedResponse>(
      await t.http
        .post('/api/v1/webhooks')
        .set(bearer(member))
        .send({ url: receiver.url('/schedules'), objects: [], events: [] })
        .expect(201),
    );
    receiver.trust('/schedules', hook.secret);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
    await receiver.stop();
    await smtp.stop();
  });

  it('fires an alert when its condition becomes true, not while it stays true, and again after it was false', async () => {
    const north = await h.sale({ region: 'north', owner: 'alice', amount: 150, sold_on: '2026-01-05' });
    const south = await h.sale({ region: 'south', owner: 'bob', amount: 50, sold_on: '2026-01-05' });
    const alert = await h.schedule(member, {
      name: 'Revenue over 100',
      every: '1h',
      action: { type: 'metric_alert', metric: 'revenue', groupBy: ['region'], condition: { op: '>', value: 100 } },
      deliver: [{ webhook: hook.id }, { email: 'ops@example.com' }],
    });
    expect(alert).toMatchObject({ every: '1h', timezone: 'UTC', status: 'active' });
    expect(Date.parse(alert.nextRunAt!)).toBeGreaterThan(Date.now());

    const first = await h.runNow(alert.id, member);
    expect(first).toMatchObject({ status: 'succeeded', fired: [{ region: 'north', revenue: 150 }] });
    expect(first.deliveries.map((d) => [d.kind, d.status])).toEqual([
      ['webhook', 'succeeded'],
      ['email', 'succeeded'],
    ]);
    const fired = receiver.to('/schedules');
    expect(fired).toHaveLength(1);
    expect(fired[0].body).toMatchObject({
      type: 'alert.fired',
      data: {
        schedule: { id: alert.id, name: 'Revenue over 100' },
        metric: 'revenue',
        condition: { op: '>', value: 100 },
        rows: [{ region: 'north', revenue: 150 }],
      },
    });
    // The webhook-id is the delivery's id.
    expect(fired[0].id).toBe(first.deliveries[0].id);
    expect(smtp.received).toHaveLength(1);
    expect(smtp.received[0]).toMatchObject({ from: 'alerts@example.com', to: ['ops@example.com'] });
    expect(smtp.received[0].raw).toContain('Subject: Revenue over 100: alert fired (1 row)');
    expect(bodyText(smtp.received[0].raw)).toContain('region: north, revenue: 150');

    // Still true: nothing fires, nothing is delivered.
    const second = await h.runNow(alert.id, member);
    expect(second).toMatchObject({ status: 'succeeded', fired: [], deliveries: [] });

    // South becomes true: only south fires.
    await h.setAmount(south, 250);
    const third = await h.runNow(alert.id, member);
    expect(third.fired).toEqual([{ region: 'south', revenue: 250 }]);

    // North goes false, then true again: it fires again.
    await h.setAmount(north, 40);
    expect((await h.runNow(alert.id, member)).fired).toEqual([]);
    await h.setAmount(north, 300);
    const fifth = await h.runNow(alert.id, member);
    expect(fifth.fired).toEqual([{ region: 'north', revenue: 300 }]);

    expect(receiver.to('/schedules').map((r) => (r.body.data as unknown as { rows: unknown[] }).rows)).toEqual([
      [{ region: 'north', revenue: 150 }],
      [{ region: 'south', revenue: 250 }],
      [{ region: 'north', revenue: 300 }],
    ]);
    expect(smtp.received).toHaveLength(3);
    expect(receiver.rejected).toEqual([]);

    // The run history, newest first.
    const history = await h.runs(alert.id, member);
    expect(history.map((r) => r.id)).toEqual([fifth.id, expect.any(String), third.id, second.id, first.id]);
    for (const run of history) {
      expect(run).toMatchObject({ status: 'succeeded', trigger: 'manual', tickAt: null, chatId: null });
      expect(Date.parse(run.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(run.startedAt!));
    }
  });

  it('retries a failed webhook delivery through the queue, with the same webhook-id, until it succeeds', async () => {
    const flaky = bodyOf<WebhookCreatedResponse>(
      await t.http
        .post('/api/v1/webhooks')
        .set(bearer(member))
        .send({ url: receiver.url('/flaky'), objects: [], events: [] })
        .expect(201),
    );
    receiver.trust('/flaky', flaky.secret);
    receiver.failing.add('/flaky');
    const alert = await h.schedule(member, {
      name: 'Any revenue',
      every: '1d',
      action: { type: 'metric_alert', metric: 'revenue', condition: { op: '>', value: 0 } },
      deliver: [{ webhook: flaky.id }],
    });
    const queued = bodyOf<RunResponse>(await t.http.post(`/api/v1/schedules/${alert.id}/run`).set(bearer(member)).expect(202));
    await eventually(() => receiver.failed.some((r) => r.path === '/flaky'), 20_000);
    receiver.failing.delete('/flaky');
    await eventually(() => receiver.to('/flaky').length === 1, 20_000);
    let run: RunResponse | undefined;
    await eventually(async () => {
      run = (await h.runs(alert.id, member)).find((r) => r.id === queued.id);
      return run?.deliveries[0]?.status === 'succeeded';
    }, 20_000);
    run = run!;
    expect(run.deliveries).toMatchObject([{ kind: 'webhook', target: flaky.id, status: 'succeeded', responseStatus: 204 }]);
    expect(run.deliveries[0].attempts).toBeGreaterThanOrEqual(2);
    const failedIds = new Set(receiver.failed.filter((r) => r.path === '/flaky').map((r) => r.id));
    expect([...failedIds]).toEqual([run.deliveries[0].id]);
    expect(receiver.to('/flaky')[0].id).toBe(run.deliveries[0].id);
    expect(receiver.to('/flaky')[0].body.type).toBe('alert.fired');
  });

  it('fires a change against the previous period', async () => {
    const day = (offset: number) => new Date(Date.now() - offset * 86_400_000).toISOString().slice(0, 10);
    await h.sale({ region: 'east', owner: 'carol', amount: 100, sold_on: day(2) });
    await h.sale({ region: 'east', owner: 'carol', amount: 180, sold_on: day(1) });
    const growth = await h.schedule(member, {
      name: 'East growth',
      cron: '0 8 * * *',
      timezone: 'Europe/Paris',
      action: {
        type: 'metric_alert',
        metric: 'revenue',
        where: { region: 'east' },
        groupBy: ['region'],
        condition: { op: 'change_pct_gt', value: 50 },
      },
      deliver: [],
    });
    expect(growth).toMatchObject({ cron: '0 8 * * *', timezone: 'Europe/Paris' });
    const run = await h.runNow(growth.id, member);
    expect(run.fired).toEqual([{ region: 'east', revenue: 180, previous: 100, changePct: 80 }]);
  });

  it('runs a question as a durable chat of the owner and delivers the answer with its grounding', async () => {
    await createAgent(t, {
      name: 'reporter',
      label: 'Reporter',
      instructions: 'Report on sales.',
      tools: ['aggregate_data'],
      grounding: 'annotate',
    });
    llm.reset();
    llm.enqueue(
      MockReply.toolCalls([
        {
          id: 'call_n',
          name: 'aggregate_data',
          arguments: { objectName: 'sale', aggregations: [{ function: 'count', alias: 'n' }] },
        },
      ]),
      (request) => {
        const messages = request.body!.messages as { role: string; content: string; tool_call_id?: string }[];
        const result = JSON.parse(messages.find((m) => m.tool_call_id === 'call_n')!.content) as { rows: { n: number }[] };
        return MockReply.text(`We recorded ${result.rows[0].n} sales so far.`);
      },
    );
    const question = await h.schedule(member, {
      name: 'Daily sales count',
      cron: '30 7 * * 1-5',
      action: { type: 'question', agent: 'reporter', message: 'How many sales do we have?' },
      deliver: [{ webhook: hook.id }],
    });
    const run = await h.runNow(question.id, member);
    expect(run).toMatchObject({ status: 'succeeded', error: null });
    expect(run.chatId).toEqual(expect.any(String));
    expect(run.deliveries).toMatchObject([{ kind: 'webhook', status: 'succeeded' }]);

    // The chat is the owner's: it reads it like any chat of its own; another key does not see it.
    const chat = bodyOf<ChatResponse>(await t.http.get(`/api/v1/chats/${run.chatId}`).set(bearer(member)).expect(200));
    expect(chat).toMatchObject({ agent: 'reporter', status: 'waiting', title: 'Daily sales count' });
    await t.http.get(`/api/v1/chats/${run.chatId}`).set(bearer(otherMember)).expect(404);
    const { messages } = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${run.chatId}/messages`).set(bearer(member)).expect(200),
    );
    const [count] = await t.sql<{ n: string }>('select count(*) as n from data.sale');
    const answer = `We recorded ${count.n} sales so far.`;
    expect(messages.at(-1)).toMatchObject({ role: 'assistant', parts: [{ type: 'text', text: answer }] });

    const delivered = receiver.to('/schedules').find((r) => r.body.type === 'question.answered');
    expect(delivered?.body).toMatchObject({
      type: 'question.answered',
      data: {
        schedule: { id: question.id, name: 'Daily sales count' },
        chatId: run.chatId,
        answer,
        grounding: { supported: [expect.objectContaining({ text: count.n, toolCallId: 'call_n', column: 'n' })] },
      },
    });
    expect(llm.pendingSteps).toBe(0);
  });

  it('refuses invalid schedules with a clear 4xx and a code', async () => {
    const alertAction = { type: 'metric_alert', metric: 'revenue', condition: { op: '>', value: 1 } };
    const refused = async (body: Record<string, unknown>, status: number, key = member) =>
      errorOf(
        await t.http
          .post('/api/v1/schedules')
          .set(bearer(key))
          .send({ name: 'x', every: '1h', action: alertAction, deliver: [], ...body })
          .expect(status),
      ).code;
    expect(await refused({ every: undefined, cron: '61 * * * *' }, 400)).toBe('invalid_cron');
    expect(await refused({ every: undefined, cron: '0 0 9 * * 1' }, 400)).toBe('invalid_cron');
    expect(await refused({ every: undefined, cron: '0 9 * * *', timezone: 'Mars/Olympus' }, 400)).toBe('invalid_timezone');
    expect(await refused({ every: '30s' }, 400)).toBe('invalid_schedule');
    expect(await refused({ every: '0m' }, 400)).toBe('invalid_schedule');
    expect(await refused({ cron: '0 9 * * *' }, 400)).toBe('invalid_schedule');
    expect(await refused({ every: undefined }, 400)).toBe('invalid_schedule');
    expect(await refused({ action: { type: 'question', agent: 'no_such_agent', message: 'hi' } }, 404)).toBe('agent_not_found');
    expect(await refused({ action: { type: 'question', agent: 'reporter' } }, 400)).toBe('validation_failed');
    expect(await refused({ action: { ...alertAction, metric: 'no_such_metric' } }, 404)).toBe('metric_not_found');
    expect(await refused({ action: { ...alertAction, condition: { op: '!=', value: 1 } } }, 400)).toBe('validation_failed');
    expect(await refused({ action: { ...alertAction, condition: undefined } }, 400)).toBe('validation_failed');
    expect(await refused({ action: { ...alertAction, groupBy: ['amount'] } }, 400)).toBe('unknown_field');
    expect(await refused({ action: { ...alertAction, where: { nope: 1 } } }, 400)).toBe('unknown_field');
    expect(await refused({ action: { type: 'report' } }, 400)).toBe('validation_failed');
    expect(await refused({ deliver: [{ email: 'not an address' }] }, 400)).toBe('validation_failed');
    expect(await refused({ deliver: [{ webhook: hook.id, email: 'a@example.com' }] }, 400)).toBe('validation_failed');
    expect(await refused({ deliver: [{}] }, 400)).toBe('validation_failed');
    // Another key's webhook is not the owner's.
    expect(await refused({ deliver: [{ webhook: hook.id }] }, 404, otherMember)).toBe('webhook_not_found');
    const ok = await h.schedule(member, { name: 'ok', every: '1d', action: alertAction, deliver: [] });
    // Another member sees none of it; the admin sees every schedule.
    expect(errorOf(await t.http.get(`/api/v1/schedules/${ok.id}`).set(bearer(otherMember)).expect(404)).code).toBe(
      'schedule_not_found',
    );
    await t.http.post(`/api/v1/schedules/${ok.id}/run`).set(bearer(otherMember)).expect(404);
    await t.http.get('/api/v1/schedules/not-a-uuid').set(bearer(member)).expect(404);
    const mine = bodyOf<SchedulesResponse>(await t.http.get('/api/v1/schedules').set(bearer(otherMember)).expect(200));
    expect(mine.schedules).toEqual([]);
    const all = bodyOf<SchedulesResponse>(await t.http.get('/api/v1/schedules').set(asAdmin(t)).expect(200));
    expect(all.schedules.map((s) => s.id)).toContain(ok.id);
    // PATCH checks what changes; DELETE removes it.
    expect(
      errorOf(await t.http.patch(`/api/v1/schedules/${ok.id}`).set(bearer(member)).send({ cron: 'nope' }).expect(400)).code,
    ).toBe('invalid_cron');
    const paused = bodyOf<ScheduleResponse>(
      await t.http.patch(`/api/v1/schedules/${ok.id}`).set(bearer(member)).send({ status: 'disabled' }).expect(200),
    );
    expect(paused).toMatchObject({ status: 'disabled', nextRunAt: null });
    const retimed = bodyOf<ScheduleResponse>(
      await t.http
        .patch(`/api/v1/schedules/${ok.id}`)
        .set(bearer(member))
        .send({ status: 'active', cron: '15 6 * * *', timezone: 'America/New_York' })
        .expect(200),
    );
    expect(retimed).toMatchObject({ status: 'active', cron: '15 6 * * *', timezone: 'America/New_York' });
    expect(retimed.every).toBeUndefined();
    expect(Date.parse(retimed.nextRunAt!)).toBeGreaterThan(Date.now());
    await t.http.delete(`/api/v1/schedules/${ok.id}`).set(bearer(member)).expect(204);
    await t.http.get(`/api/v1/schedules/${ok.id}`).set(bearer(member)).expect(404);
  });
});

describe('schedules: owners, access and replicas', () => {
  let a: TestApp;
  let b: TestApp;
  const h = helpers(() => a);
  const alertOn = (groupBy: string[], deliver: unknown[] = []) => ({
    name: `alert by ${groupBy.join(', ')}`,
    every: '1h',
    action: { type: 'metric_alert', metric: 'revenue', groupBy, condition: { op: '>', value: 0 } },
    deliver,
  });

  beforeAll(async () => {
    // No SMTP_URL on these replicas.
    a = await startTestApp({ env: ENV });
    b = await startTestApp({ env: ENV, database: a.database });
    await salesAndRevenue(a);
    await h.sale({ region: 'north', owner: 'alice', amount: 10, sold_on: '2026-01-05' });
    await h.sale({ region: 'south', owner: 'bob', amount: 20, sold_on: '2026-01-05' });
  });
  afterAll(async () => {
    await b.close();
    await a.close();
  });

  it('records email_not_configured on an email delivery when SMTP_URL is not set', async () => {
    const key = (await createApiKey(a, { name: 'mailer', role: 'member' })).secret;
    const alert = await h.schedule(key, alertOn(['region'], [{ email: 'ops@example.com' }]));
    const run = await h.runNow(alert.id, key);
    expect(run.status).toBe('succeeded');
    expect(run.deliveries).toMatchObject([
      { kind: 'email', target: 'ops@example.com', status: 'failed', errorCode: 'email_not_configured' },
    ]);
  });

  it('stops a schedule whose owner key was revoked: its run is skipped and it is disabled', async () => {
    const owner = await createApiKey(a, { name: 'leaving', role: 'member' });
    const alert = await h.schedule(owner.secret, alertOn(['region']));
    await a.http.delete(`/api/v1/api-keys/${owner.id}`).set(asAdmin(a)).expect(204);
    const run = await h.runNow(alert.id, a.adminKey);
    expect(run).toMatchObject({ status: 'skipped', deliveries: [] });
    expect(run.fired).toBeUndefined();
    expect(run.error).toContain('revoked');
    const stopped = bodyOf<ScheduleResponse>(await a.http.get(`/api/v1/schedules/${alert.id}`).set(asAdmin(a)).expect(200));
    expect(stopped).toMatchObject({ status: 'disabled', nextRunAt: null });
    expect(stopped.disabledReason).toContain('revoked');
    // No tick is due any more, whatever the clock says.
    await a.sql(
      `update "schedules" set "next_run_at" = now() - interval '1 minute' where "id" = $1 and "next_run_at" is not null`,
      [alert.id],
    );
    await a.app.get(ScheduleTicker).tick();
    expect(await h.runs(alert.id, a.adminKey)).toHaveLength(1);
  });

  it("runs under the owner's access as it is at run time: a row filter added later hides the other rows", async () => {
    await a.http
      .post('/api/v1/policies')
      .set(asAdmin(a))
      .send({ name: 'own-sales', objects: { sale: { read: true, rowFilter: { owner: '$subject' } } } })
      .expect(201);
    const alice = await createApiKey(a, { name: 'alice', role: 'member', subject: 'alice' });
    const alert = await h.schedule(alice.secret, alertOn(['owner']));
    const before = await h.runNow(alert.id, alice.secret);
    expect(before.fired).toEqual(
      expect.arrayContaining([
        { owner: 'alice', revenue: 10 },
        { owner: 'bob', revenue: 20 },
      ]),
    );
    // Narrowed: alice now reads only her own sales.
    await a.http
      .patch(`/api/v1/api-keys/${alice.id}`)
      .set(asAdmin(a))
      .send({ policies: ['own-sales'] })
      .expect(200);
    await h.sale({ region: 'east', owner: 'alice', amount: 5, sold_on: '2026-01-06' });
    await h.sale({ region: 'east', owner: 'carol', amount: 7, sold_on: '2026-01-06' });
    await a.sql(`update "schedule_alert_states" set "holds" = false where "schedule_id" = $1`, [alert.id]);
    const after = await h.runNow(alert.id, alice.secret);
    expect(after.fired).toEqual([{ owner: 'alice', revenue: 15 }]);
  });

  it('fires a condition once when runs of one alert overlap', async () => {
    const key = (await createApiKey(a, { name: 'overlap', role: 'member' })).secret;
    const alert = await h.schedule(key, alertOn(['region']));
    const runs = await Promise.all([1, 2, 3, 4].map(() => h.runNow(alert.id, key)));
    for (const run of runs) expect(run.status).toBe('succeeded');
    const firing = runs.filter((run) => run.fired!.length > 0);
    expect(firing).toHaveLength(1);
    expect(firing[0].fired!.map((row) => row.region).sort()).toEqual(['east', 'north', 'south']);
  });

  it('queues each due tick once across two replicas, and ticks missed while none ran as one run', async () => {
    const key = (await createApiKey(a, { name: 'ticker', role: 'member' })).secret;
    const alert = await h.schedule(key, alertOn(['region']));
    const tickers = [a.app.get(ScheduleTicker), b.app.get(ScheduleTicker)];
    for (let k = 1; k <= 4; k++) {
      // A tick due k hours ago (as if every replica had been down since): found by both replicas at once.
      await a.sql(`update "schedules" set "next_run_at" = now() - make_interval(hours => $2) where "id" = $1`, [alert.id, k]);
      const queued = await Promise.all([...tickers, ...tickers].map((ticker) => ticker.tick()));
      expect(queued.reduce((sum, n) => sum + n, 0)).toBeLessThanOrEqual(1);
      await eventually(async () => {
        const [row] = await a.sql<{ due: boolean }>(`select "next_run_at" > now() as due from "schedules" where "id" = $1`, [
          alert.id,
        ]);
        return row.due;
      }, 10_000);
    }
    await eventually(async () => (await h.runs(alert.id, key)).filter((r) => FINAL.has(r.status)).length === 4, 30_000);
    const runs = await h.runs(alert.id, key);
    expect(runs).toHaveLength(4);
    expect(new Set(runs.map((r) => r.tickAt)).size).toBe(4);
    for (const run of runs) expect(run).toMatchObject({ trigger: 'tick', status: 'succeeded' });
    // Whichever run went first fired every region; the others, taking turns on the alert's state, found nothing new
    // (the queue may start a later tick's run first).
    const firing = runs.filter((run) => run.fired!.length > 0);
    expect(firing).toHaveLength(1);
    expect(firing[0].fired!.map((row) => row.region).sort()).toEqual(['east', 'north', 'south']);
    const [jobs] = await a.sql<{ n: string }>(
      `select count(*) as n from pgboss.job where name = 'schedule-runs' and data->>'runId' = any($1)`,
      [runs.map((r) => r.id)],
    );
    expect(Number(jobs.n)).toBe(4);
    // The replicas' own timers find a due tick too, with nobody calling tick().
    await a.sql(`update "schedules" set "next_run_at" = now() - interval '1 second' where "id" = $1`, [alert.id]);
    await eventually(async () => (await h.runs(alert.id, key)).filter((r) => FINAL.has(r.status)).length === 5, 30_000);
    expect(new Set((await h.runs(alert.id, key)).map((r) => r.tickAt)).size).toBe(5);
    // The next tick is an hour after the missed one it ran for, in the future: missed ticks were not caught up.
    const [next] = await a.sql<{ ahead: boolean }>(
      `select "next_run_at" > now() and "next_run_at" <= now() + interval '1 hour' as ahead from "schedules" where "id" = $1`,
      [alert.id],
    );
    expect(next.ahead).toBe(true);
  });
});
