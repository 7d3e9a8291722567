import type {
  DeliveriesResponse,
  DeliveryResponse,
  WebhookCreatedResponse,
  WebhookResponse,
  WebhooksResponse,
} from '../../src/webhooks/webhook.dto';
import { randomUUID } from 'node:crypto';
import { WebhookDeliveryWorker } from '../../src/webhooks/webhook-delivery.worker';
import { eventually } from '../support/chat-helpers';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { Scrape } from '../support/prometheus';
import { WebhookReceiver, type ReceivedWebhook, WEBHOOK_TEST_ENV } from '../support/webhook-receiver';

const WEBHOOK_ENV = WEBHOOK_TEST_ENV;

/** Each record's deliveries, in the order they were received: [record id, [op, cursor][]]. */
function byRecord(received: ReceivedWebhook[]): Map<string, [string, bigint][]> {
  const records = new Map<string, [string, bigint][]>();
  for (const r of received) {
    const list = records.get(r.body.data.id) ?? [];
    list.push([r.body.data.op, BigInt(r.body.data.cursor)]);
    records.set(r.body.data.id, list);
  }
  return records;
}

describe('webhooks: signed deliveries of record changes', () => {
  let t: TestApp;
  const receiver = new WebhookReceiver();
  let member: string;
  let otherMember: string;

  const subscribe = async (path: string, body: Record<string, unknown>, key = member) => {
    const created = bodyOf<WebhookCreatedResponse>(
      await t.http
        .post('/api/v1/webhooks')
        .set(bearer(key))
        .send({ url: receiver.url(path), ...body })
        .expect(201),
    );
    receiver.trust(path, created.secret);
    return created;
  };
  const create = async (object: string, record: Record<string, unknown>, key = member) =>
    idOf(await t.http.post(`/api/v1/objects/${object}/records`).set(bearer(key)).send(record).expect(201));
  const update = async (object: string, id: string, patch: Record<string, unknown>, key = member) =>
    t.http.patch(`/api/v1/objects/${object}/records/${id}`).set(bearer(key)).send(patch).expect(200);
  const remove = async (object: string, id: string, key = member) =>
    t.http.delete(`/api/v1/objects/${object}/records/${id}`).set(bearer(key)).expect(204);
  const deliveries = async (webhookId: string, key = member) =>
    bodyOf<DeliveriesResponse>(await t.http.get(`/api/v1/webhooks/${webhookId}/deliveries`).set(bearer(key)).expect(200))
      .deliveries;
  const webhook = async (webhookId: string, key = member) =>
    bodyOf<WebhookResponse>(await t.http.get(`/api/v1/webhooks/${webhookId}`).set(bearer(key)).expect(200));

  beforeAll(async () => {
    await receiver.start();
    t = await startTestApp({ env: WEBHOOK_ENV });
    await createObject(t, 'item', [fieldSpec('sku', 'text', { required: true }), fieldSpec('qty', 'integer')]);
    await createObject(t, 'deal', [fieldSpec('name', 'text'), fieldSpec('owner', 'text'), fieldSpec('amount', 'number')]);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'own-deals', objects: { deal: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount'] } } })
      .expect(201);
    member = (await createApiKey(t, { name: 'hooks', role: 'member' })).secret;
    otherMember = (await createApiKey(t, { name: 'other', role: 'member' })).secret;
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  it('delivers creates, updates and deletes, signed per Standard Webhooks, with the change as the owner reads it', async () => {
    const hook = await subscribe('/all', { objects: ['item'], events: ['create', 'update', 'delete'] });
    expect(hook.secret).toMatch(/^whsec_/);
    const id = await create('item', { sku: 'a-1', qty: 1 });
    await update('item', id, { qty: 2 });
    await remove('item', id);
    await eventually(() => receiver.to('/all').length === 3, 20_000);
    const got = receiver.to('/all');
    expect(got.map((r) => r.body.type)).toEqual(['record.created', 'record.updated', 'record.deleted']);
    expect(got.map((r) => r.body.data.id)).toEqual([id, id, id]);
    expect(got[0].body.data.record).toMatchObject({ sku: 'a-1', qty: 1 });
    expect(got[1].body.data).toMatchObject({ op: 'update', changedFields: ['qty'], record: { qty: 2 } });
    expect(got[2].body.data.record).toBeUndefined();
    expect(receiver.rejected).toEqual([]);
    // Each attempt is recorded a moment after the receiver answered it.
    await eventually(async () => (await deliveries(hook.id)).every((d) => d.status === 'succeeded'), 10_000);
    const log = await deliveries(hook.id);
    expect(log).toHaveLength(3);
    for (const entry of log) expect(entry).toMatchObject({ status: 'succeeded', attempts: 1, responseStatus: 204, error: null });
    // The webhook-id header is the delivery's id.
    expect(new Set(got.map((r) => r.id))).toEqual(new Set(log.map((d) => d.id)));
    // The secret is shown once: never in what GET answers.
    expect(JSON.stringify(await webhook(hook.id))).not.toContain(hook.secret);
  });

  it('delivers only the subscribed event kinds of records matching its where', async () => {
    await subscribe('/filtered', { objects: ['item'], events: ['update'], where: { qty: { $gt: 10 } } });
    const id = await create('item', { sku: 'f-1', qty: 20 }); // a create: not subscribed
    await update('item', id, { qty: 30 }); // matches
    await update('item', id, { qty: 5 }); // outside the where
    await update('item', id, { qty: 40 }); // matches: the last one of this record
    const other = await create('item', { sku: 'f-2', qty: 1 });
    await update('item', other, { qty: 2 }); // outside the where
    await eventually(() => receiver.to('/filtered').some((r) => r.body.data.record?.qty === 40), 20_000);
    expect(receiver.to('/filtered').map((r) => [r.body.type, r.body.data.id, r.body.data.record?.qty])).toEqual([
      ['record.updated', id, 30],
      ['record.updated', id, 40],
    ]);
  });

  it("never sends a row outside the owner's row filter nor a hidden field, also when a row moves out of the filter", async () => {
    const alice = await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice', policies: ['own-deals'] });
    const hook = await subscribe('/alice', { objects: ['deal'], events: ['create', 'update', 'delete'] }, alice.secret);
    const admin = t.adminKey;
    const mine = await create('deal', { name: 'mine', owner: 'alice', amount: 100 }, admin);
    const bobs = await create('deal', { name: 'bobs', owner: 'bob', amount: 200 }, admin);
    await update('deal', mine, { amount: 150 }, admin); // only a hidden field: an update with no visible field
    await update('deal', mine, { owner: 'bob' }, admin); // leaves alice's rows: not sent
    await update('deal', bobs, { name: 'still bobs' }, admin);
    await remove('deal', bobs, admin);
    const last = await create('deal', { name: 'last', owner: 'alice', amount: 1 }, admin);
    // Changes are queued in feed order: once the last one is queued and nothing is pending, every earlier one was handled.
    await eventually(async () => {
      const log = await deliveries(hook.id, alice.secret);
      return log.some((d) => d.recordId === last) && log.every((d) => d.status !== 'pending');
    }, 20_000);
    const got = receiver.to('/alice');
    for (const r of got) {
      expect(JSON.stringify(r.body)).not.toContain('amount');
      expect(r.body.data.record?.owner ?? 'alice').toBe('alice');
      expect(r.body.data.id).not.toBe(bobs);
    }
    expect(got.filter((r) => r.body.data.id === mine).map((r) => r.body.type)).toEqual(['record.created', 'record.updated']);
    expect(got.find((r) => r.body.data.id === mine && r.body.type === 'record.updated')?.body.data.changedFields).toEqual([]);
    expect((await deliveries(hook.id, alice.secret)).every((d) => d.status === 'succeeded')).toBe(true);
  });

  it("filters a delivery by the owner's access when it is sent, not when the change was made", async () => {
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'deal-reader', objects: { deal: { read: true } } })
      .expect(201);
    const carol = await createApiKey(t, { name: 'carol', role: 'member', subject: 'carol', policies: ['deal-reader'] });
    const hook = await subscribe('/carol', { objects: ['deal'], events: ['create'] }, carol.secret);
    receiver.failing.add('/carol');
    const id = await create('deal', { name: 'later', owner: 'zed', amount: 7 }, t.adminKey);
    await eventually(() => receiver.failed.some((r) => r.path === '/carol' && r.body.data.id === id), 20_000);
    expect(receiver.failed.find((r) => r.path === '/carol')?.body.data.record).toMatchObject({ amount: 7 });
    // While it waits for its retry, the owner's policy hides the field.
    await t.http
      .put('/api/v1/policies/deal-reader')
      .set(asAdmin(t))
      .send({ objects: { deal: { read: true, hiddenFields: ['amount'] } } })
      .expect(200);
    receiver.failing.delete('/carol');
    await eventually(() => receiver.to('/carol').length === 1, 20_000);
    const [sent] = receiver.to('/carol');
    expect(sent.body.data.record).toMatchObject({ id, name: 'later' });
    expect(JSON.stringify(sent.body)).not.toContain('amount');
    // And once its row filter excludes the record, a pending delivery is skipped, not sent.
    receiver.failing.add('/carol');
    const other = await create('deal', { name: 'gone soon', owner: 'zed' }, t.adminKey);
    await eventually(() => receiver.failed.some((r) => r.path === '/carol' && r.body.data.id === other), 20_000);
    await t.http
      .put('/api/v1/policies/deal-reader')
      .set(asAdmin(t))
      .send({ objects: { deal: { read: true, hiddenFields: ['amount'], rowFilter: { owner: 'nobody' } } } })
      .expect(200);
    receiver.failing.delete('/carol');
    await eventually(
      async () => (await deliveries(hook.id, carol.secret)).some((d) => d.recordId === other && d.status === 'skipped'),
      20_000,
    );
    expect(receiver.to('/carol').map((r) => r.body.data.id)).toEqual([id]);
  });

  it('refuses objects, events and where filters the owner may not use', async () => {
    const alice = await createApiKey(t, { name: 'alice-2', role: 'member', subject: 'alice', policies: ['own-deals'] });
    const post = (body: Record<string, unknown>, key = member) =>
      t.http
        .post('/api/v1/webhooks')
        .set(bearer(key))
        .send({ url: receiver.url('/nope'), events: ['create'], ...body });
    const unknown = await post({ objects: ['nothing'] });
    expect([unknown.status, errorOf(unknown).code]).toEqual([404, 'object_not_found']);
    const unreadable = await post({ objects: ['item'] }, alice.secret);
    expect([unreadable.status, errorOf(unreadable).code]).toEqual([404, 'object_not_found']);
    const hidden = await post({ objects: ['deal'], where: { amount: { $gt: 1 } } }, alice.secret);
    expect([hidden.status, errorOf(hidden).code]).toEqual([400, 'unknown_field']);
    const badEvent = await post({ objects: ['item'], events: ['insert'] });
    expect([badEvent.status, errorOf(badEvent).code]).toEqual([400, 'validation_failed']);
    const badWhere = await post({ objects: ['item'], where: { qty: { $like: 1 } } });
    expect(badWhere.status).toBe(400);
    const badUrl = await post({ objects: ['item'], url: 'ftp://example.com/' });
    expect([badUrl.status, errorOf(badUrl).code]).toEqual([400, 'webhook_url_refused']);
  });

  it('delivers every event once the receiver is back after failing and being down, in order per record, none twice after a success', async () => {
    const hook = await subscribe('/flaky', { objects: ['item'], events: ['create', 'update', 'delete'] });
    receiver.mode = 'fail';
    const a = await create('item', { sku: 'x-1', qty: 1 });
    const b = await create('item', { sku: 'x-2', qty: 1 });
    await update('item', a, { qty: 2 });
    await update('item', b, { qty: 2 });
    await update('item', a, { qty: 3 });
    await remove('item', b);
    // Answered 500 (each a failed attempt, retried with backoff)...
    await eventually(() => receiver.failed.filter((r) => r.path === '/flaky').length >= 3, 20_000);
    // ... then not listening at all (connections refused) ...
    await receiver.stop();
    await eventually(async () => (await deliveries(hook.id)).some((d) => d.error?.includes('ECONNREFUSED') ?? false), 20_000);
    // ... then back.
    receiver.mode = 'ok';
    await receiver.start();
    await eventually(() => receiver.to('/flaky').length >= 6, 30_000);
    const got = receiver.to('/flaky');
    expect(new Set(got.map((r) => r.id)).size).toBe(got.length);
    const records = byRecord(got);
    expect(records.get(a)?.map(([op]) => op)).toEqual(['create', 'update', 'update']);
    expect(records.get(b)?.map(([op]) => op)).toEqual(['create', 'update', 'delete']);
    for (const list of records.values()) {
      const cursors = list.map(([, cursor]) => cursor);
      expect([...cursors].sort((x, y) => (x < y ? -1 : 1))).toEqual(cursors);
    }
    // The receiver answered before the attempt was recorded: the log says so a moment later.
    await eventually(async () => (await deliveries(hook.id)).every((d) => d.status === 'succeeded'), 10_000);
    const log = await deliveries(hook.id);
    expect(log).toHaveLength(6);
    expect(log.some((d) => d.attempts > 1)).toBe(true);
    await eventually(async () => (await webhook(hook.id)).failingSince === undefined, 10_000);
    // /metrics shows the queue and the failures.
    const metrics = new Scrape((await t.http.get('/metrics').expect(200)).text);
    const queue = { queue: 'webhook-deliveries' };
    expect(metrics.samples('datacopilot_job_queue_jobs', queue).map((s) => s.labels?.state)).toEqual(
      expect.arrayContaining(['queued', 'active', 'failed']),
    );
    expect(metrics.samples('datacopilot_job_queue_oldest_job_age_seconds', queue)).toHaveLength(1);
    expect(metrics.value('datacopilot_job_attempt_failures_total', queue)).toBeGreaterThan(0);
    expect(metrics.value('datacopilot_webhook_attempts_total', { outcome: 'failed' })).toBeGreaterThan(0);
    expect(metrics.value('datacopilot_webhook_deliveries_total', { status: 'succeeded' })).toBeGreaterThanOrEqual(6);
  });

  it("goes on sending a webhook's other records while one record's deliveries wait for their retry, and that record's in order after", async () => {
    const hook = await subscribe('/one-failing', { objects: ['item'], events: ['create', 'update'] });
    const a = await create('item', { sku: 'f-1', qty: 0 });
    await eventually(() => receiver.to('/one-failing').length === 1, 20_000);
    receiver.failingRecords.add(a);
    await update('item', a, { qty: 1 });
    const b = await create('item', { sku: 'f-2', qty: 0 });
    await update('item', a, { qty: 2 });
    await update('item', b, { qty: 1 });
    // b's changes arrive while each of a's is refused.
    await eventually(() => receiver.to('/one-failing').filter((r) => r.body.data.id === b).length === 2, 20_000);
    expect(receiver.failed.some((r) => r.path === '/one-failing' && r.body.data.id === a)).toBe(true);
    expect(receiver.to('/one-failing').filter((r) => r.body.data.id === a)).toHaveLength(1);
    receiver.failingRecords.delete(a);
    await eventually(() => receiver.to('/one-failing').filter((r) => r.body.data.id === a).length === 3, 20_000);
    const records = byRecord(receiver.to('/one-failing'));
    expect(records.get(a)?.map(([op]) => op)).toEqual(['create', 'update', 'update']);
    expect(
      receiver
        .to('/one-failing')
        .filter((r) => r.body.data.id === a)
        .map((r) => r.body.data.record?.qty),
    ).toEqual([0, 1, 2]);
    await eventually(async () => (await deliveries(hook.id)).every((d) => d.status === 'succeeded'), 10_000);
    const log = await deliveries(hook.id);
    expect(log).toHaveLength(5);
    expect(log.find((d) => d.recordId === a && d.attempts > 1)).toBeDefined();
    expect(log.filter((d) => d.recordId === b).map((d) => d.attempts)).toEqual([1, 1]);
  });

  it("leaves what a page handed on to its record's job when the page runs again (its replica died before it completed)", async () => {
    const path = '/handed-on';
    const hook = await subscribe(path, { objects: ['item'], events: ['create', 'update'] });
    const a = await create('item', { sku: 'h-1', qty: 0 });
    await eventually(() => receiver.to(path).length === 1, 20_000);
    receiver.failingRecords.add(a);
    await update('item', a, { qty: 1 });
    // The page's attempt of a's update is refused: a job of a's takes it on, and its retry is held in flight.
    await eventually(() => receiver.failed.some((r) => r.path === path && r.body.data.id === a), 20_000);
    receiver.holdNext(path);
    receiver.failingRecords.delete(a);
    await eventually(() => receiver.held(path) === 1, 20_000);
    const handedOn = (await deliveries(hook.id)).find((d) => d.recordId === a && d.status === 'pending')!;
    // The page runs again, as the queue retries a page whose replica died after handing a on: it sends nothing of a's.
    const arrived = receiver.arrived.filter((r) => r.path === path).length;
    await t.app.get(WebhookDeliveryWorker).run({
      id: randomUUID(),
      data: { deliveryIds: [handedOn.id] },
      retryCount: 1,
      retryLimit: 10,
      createdOn: new Date(),
      signal: new AbortController().signal,
    });
    expect(receiver.arrived.filter((r) => r.path === path)).toHaveLength(arrived);
    receiver.release(path);
    await eventually(async () => (await deliveries(hook.id)).every((d) => d.status === 'succeeded'), 20_000);
    expect(receiver.to(path).map((r) => r.body.data.record?.qty)).toEqual([0, 1]);
  });

  it('reports the job queue on /health/ready', async () => {
    const ready = bodyOf<{ checks: { jobQueue: string } }>(await t.http.get('/health/ready').expect(200));
    expect(ready.checks.jobQueue).toBe('ok');
  });

  it('keeps a delivery log, and redelivers one delivery with the same webhook-id', async () => {
    const hook = await subscribe('/redeliver', { objects: ['item'], events: ['create'] });
    const id = await create('item', { sku: 'r-1' });
    await eventually(async () => (await deliveries(hook.id))[0]?.status === 'succeeded', 20_000);
    expect(receiver.to('/redeliver')).toHaveLength(1);
    const [first] = await deliveries(hook.id);
    expect(first).toMatchObject({ type: 'record.created', object: 'item', recordId: id, status: 'succeeded', attempts: 1 });
    expect(typeof first.durationMs).toBe('number');
    const again = await t.http
      .post(`/api/v1/webhooks/${hook.id}/deliveries/${first.id}/redeliver`)
      .set(bearer(member))
      .expect(202);
    expect(bodyOf<DeliveryResponse>(again)).toMatchObject({ id: first.id, status: 'pending', attempts: 0 });
    await eventually(() => receiver.to('/redeliver').length === 2, 20_000);
    expect(receiver.to('/redeliver').map((r) => r.id)).toEqual([first.id, first.id]);
    await eventually(async () => (await deliveries(hook.id))[0].status === 'succeeded', 10_000);
    const unknown = await t.http
      .post(`/api/v1/webhooks/${hook.id}/deliveries/00000000-0000-0000-0000-000000000000/redeliver`)
      .set(bearer(member));
    expect([unknown.status, errorOf(unknown).code]).toEqual([404, 'delivery_not_found']);
    const failing = await t.http.get(`/api/v1/webhooks/${hook.id}/deliveries?status=failed`).set(bearer(member)).expect(200);
    expect(bodyOf<DeliveriesResponse>(failing).deliveries).toEqual([]);
  });

  it('lets a member see and change only its own webhooks; admins see every one', async () => {
    const mine = await subscribe('/owned', { objects: ['item'], events: ['create'] });
    const theirs = await subscribe('/theirs', { objects: [], events: [] }, otherMember);
    for (const res of [
      await t.http.get(`/api/v1/webhooks/${mine.id}`).set(bearer(otherMember)),
      await t.http.patch(`/api/v1/webhooks/${mine.id}`).set(bearer(otherMember)).send({ description: 'mine now' }),
      await t.http.delete(`/api/v1/webhooks/${mine.id}`).set(bearer(otherMember)),
      await t.http.get(`/api/v1/webhooks/${mine.id}/deliveries`).set(bearer(otherMember)),
    ]) {
      expect([res.status, errorOf(res).code]).toEqual([404, 'webhook_not_found']);
    }
    const listed = bodyOf<WebhooksResponse>(await t.http.get('/api/v1/webhooks').set(bearer(otherMember)).expect(200));
    expect(listed.webhooks.map((w) => w.id)).toEqual([theirs.id]);
    const all = bodyOf<WebhooksResponse>(await t.http.get('/api/v1/webhooks').set(asAdmin(t)).expect(200));
    expect(all.webhooks.map((w) => w.id)).toEqual(expect.arrayContaining([mine.id, theirs.id]));
    const patched = await t.http
      .patch(`/api/v1/webhooks/${mine.id}`)
      .set(bearer(member))
      .send({ description: 'ours', events: ['update'] });
    expect(bodyOf<WebhookResponse>(patched)).toMatchObject({ description: 'ours', events: ['update'], status: 'active' });
    await t.http.delete(`/api/v1/webhooks/${mine.id}`).set(bearer(member)).expect(204);
    await t.http.get(`/api/v1/webhooks/${mine.id}`).set(bearer(member)).expect(404);
  });

  it("disables a webhook whose owner's key is revoked, and sends it nothing more", async () => {
    const owner = await createApiKey(t, { name: 'leaving', role: 'member' });
    const hook = await subscribe('/revoked', { objects: ['item'], events: ['create'] }, owner.secret);
    await t.http.delete(`/api/v1/api-keys/${owner.id}`).set(asAdmin(t)).expect(204);
    await create('item', { sku: 'after-revoke' });
    await eventually(async () => (await webhook(hook.id, t.adminKey)).status === 'disabled', 20_000);
    expect((await webhook(hook.id, t.adminKey)).disabledReason).toMatch(/revoked/);
    expect(receiver.to('/revoked')).toEqual([]);
  });
});

describe('webhooks: safe targets (WEBHOOK_ALLOW_PRIVATE unset)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'item', [fieldSpec('sku', 'text')]);
  });
  afterAll(() => t.close());

  it.each([
    'http://127.0.0.1:8080/hook',
    'http://localhost/hook',
    'http://[::1]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://169.254.169.254/latest/meta-data',
    'http://10.0.0.5/hook',
    'http://[fe80::1]/hook',
  ])('refuses %s with 400 webhook_url_refused', async (url) => {
    const res = await t.http
      .post('/api/v1/webhooks')
      .set(asAdmin(t))
      .send({ url, objects: ['item'], events: ['create'] });
    expect([res.status, errorOf(res).code]).toEqual([400, 'webhook_url_refused']);
  });
});

describe('webhooks: final failures and owner concurrency', () => {
  let t: TestApp;
  const receiver = new WebhookReceiver();

  beforeAll(async () => {
    await receiver.start();
    // A held request stays an attempt in flight (no timeout cuts it short while the test looks).
    t = await startTestApp({
      env: { ...WEBHOOK_ENV, WEBHOOK_MAX_ATTEMPTS: '2', WEBHOOK_OWNER_CONCURRENCY: '1', WEBHOOK_TIMEOUT_MS: '60000' },
    });
    await createObject(t, 'item', [fieldSpec('sku', 'text')]);
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  const deliveries = async (id: string) =>
    bodyOf<DeliveriesResponse>(await t.http.get(`/api/v1/webhooks/${id}/deliveries`).set(asAdmin(t)).expect(200)).deliveries;

  it("fails a delivery after WEBHOOK_MAX_ATTEMPTS, then sends the record's next change", async () => {
    const hook = bodyOf<WebhookCreatedResponse>(
      await t.http
        .post('/api/v1/webhooks')
        .set(asAdmin(t))
        .send({ url: receiver.url('/x'), objects: ['item'], events: ['create', 'update'] })
        .expect(201),
    );
    receiver.trust('/x', hook.secret);
    receiver.mode = 'fail';
    const id = idOf(await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 'a' }).expect(201));
    await eventually(async () => (await deliveries(hook.id)).some((d) => d.status === 'failed'), 20_000);
    const [failed] = await deliveries(hook.id);
    expect(failed).toMatchObject({ type: 'record.created', status: 'failed', attempts: 2, responseStatus: 500 });
    expect(failed.error).toContain('500');
    expect(receiver.failed.filter((r) => r.id === failed.id)).toHaveLength(2);
    receiver.mode = 'ok';
    await t.http.patch(`/api/v1/objects/item/records/${id}`).set(asAdmin(t)).send({ sku: 'b' }).expect(200);
    await eventually(() => receiver.to('/x').length === 1, 20_000);
    expect(receiver.to('/x')[0].body).toMatchObject({ type: 'record.updated', data: { id, record: { sku: 'b' } } });
    const webhook = async () =>
      bodyOf<WebhookResponse>(await t.http.get(`/api/v1/webhooks/${hook.id}`).set(asAdmin(t)).expect(200));
    // A success ends its failures (recorded a moment after the receiver answered).
    await eventually(async () => (await webhook()).failingSince === undefined, 10_000);
    expect(await webhook()).toMatchObject({ status: 'active' });
  });

  it('disables a webhook whose every attempt failed for three days, and says why', async () => {
    const hook = bodyOf<WebhookCreatedResponse>(
      await t.http
        .post('/api/v1/webhooks')
        .set(asAdmin(t))
        .send({ url: receiver.url('/dead'), objects: ['item'], events: ['create'] })
        .expect(201),
    );
    receiver.trust('/dead', hook.secret);
    receiver.failing.add('/dead');
    // As if its failures had begun three days and a minute ago.
    await t.sql(`update webhooks set failing_since = now() - interval '72 hours 1 minute' where id = $1`, [hook.id]);
    await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 'c' }).expect(201);
    await eventually(
      async () => bodyOf<WebhookResponse>(await t.http.get(`/api/v1/webhooks/${hook.id}`).set(asAdmin(t))).status === 'disabled',
      20_000,
    );
    const disabled = bodyOf<WebhookResponse>(await t.http.get(`/api/v1/webhooks/${hook.id}`).set(asAdmin(t)).expect(200));
    expect(disabled.disabledReason).toBe('Every delivery attempt failed for 72 hours');
    expect((await deliveries(hook.id))[0]).toMatchObject({ status: 'failed', attempts: 1 });
    // Enabled again by its owner: active, its failures forgotten.
    const enabled = await t.http.patch(`/api/v1/webhooks/${hook.id}`).set(asAdmin(t)).send({ status: 'active' }).expect(200);
    expect(bodyOf<WebhookResponse>(enabled)).toMatchObject({ status: 'active' });
    expect(bodyOf<WebhookResponse>(enabled).disabledReason).toBeUndefined();
  });

  it("bounds one owner's deliveries in flight (WEBHOOK_OWNER_CONCURRENCY) without holding up another owner's", async () => {
    const slow = await createApiKey(t, { name: 'slow-owner', role: 'member' });
    const quick = await createApiKey(t, { name: 'quick-owner', role: 'member' });
    const hookOf = async (key: string, path: string) => {
      const created = bodyOf<WebhookCreatedResponse>(
        await t.http
          .post('/api/v1/webhooks')
          .set(bearer(key))
          .send({ url: receiver.url(path), objects: ['item'], events: ['create'] })
          .expect(201),
      );
      receiver.trust(path, created.secret);
      return created;
    };
    await hookOf(slow.secret, '/slow');
    const quickHook = await hookOf(quick.secret, '/quick');
    receiver.hold('/slow');
    // Two records: two keys of the queue, which nothing but the owner's bound keeps from running side by side.
    await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 's-1' }).expect(201);
    await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 's-2' }).expect(201);
    await eventually(() => receiver.held('/slow') === 1, 20_000);
    // Jobs are fetched oldest first: once the other owner's deliveries of later records are through, the slow
    // owner's second delivery, older, was passed over for its bound, not for want of a worker.
    await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 'q-1' }).expect(201);
    await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 'q-2' }).expect(201);
    await eventually(async () => (await deliveries(quickHook.id)).filter((d) => d.status === 'succeeded').length === 4, 20_000);
    expect(receiver.held('/slow')).toBe(1);
    receiver.release('/slow');
    await eventually(() => receiver.to('/slow').length === 4, 20_000);
  });
});

describe('webhooks: two replicas on one database', () => {
  let first: TestApp;
  let second: TestApp;
  const receiver = new WebhookReceiver();

  beforeAll(async () => {
    await receiver.start();
    first = await startTestApp({ env: WEBHOOK_ENV });
    second = await startTestApp({ env: WEBHOOK_ENV, database: first.database });
    await createObject(first, 'item', [fieldSpec('sku', 'text')]);
  });
  afterAll(async () => {
    await second.close();
    await first.close();
    await receiver.stop();
  });

  it('queues each change once, whichever replica wrote it and both dispatching, and delivers every one once', async () => {
    const hook = bodyOf<WebhookCreatedResponse>(
      await first.http
        .post('/api/v1/webhooks')
        .set(asAdmin(first))
        .send({ url: receiver.url('/both'), objects: ['item'], events: ['create', 'update'] })
        .expect(201),
    );
    receiver.trust('/both', hook.secret);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const app = i % 2 ? second : first;
      const id = idOf(
        await app.http
          .post('/api/v1/objects/item/records')
          .set(asAdmin(app))
          .send({ sku: `r-${i}` })
          .expect(201),
      );
      await (i % 2 ? first : second).http
        .patch(`/api/v1/objects/item/records/${id}`)
        .set(asAdmin(app))
        .send({ sku: `r-${i}-2` })
        .expect(200);
      ids.push(id);
    }
    await eventually(() => receiver.to('/both').length >= 20, 30_000);
    const got = receiver.to('/both');
    expect(new Set(got.map((r) => r.id)).size).toBe(got.length);
    const records = byRecord(got);
    for (const id of ids) expect(records.get(id)?.map(([op]) => op)).toEqual(['create', 'update']);
    const [{ n }] = await first.sql<{ n: string }>(`select count(*) as n from webhook_deliveries where webhook_id = $1`, [
      hook.id,
    ]);
    expect(Number(n)).toBe(20);
  });
});
