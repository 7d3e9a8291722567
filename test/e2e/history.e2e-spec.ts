import type { ChangesResponse } from '../../src/changes/changes.dto';
import { ChangesService } from '../../src/changes/changes.service';
import { DataService } from '../../src/data/data.service';
import { SYSTEM_CALLER } from '../../src/governance/access.service';
import type { ChangeSetResponse, ChangeSetsResponse, HistoryResponse, TrashResponse } from '../../src/history/history.dto';
import type { BatchRecordsResponse } from '../../src/records/records.dto';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

describe('record history, the trash and change sets', () => {
  let t: TestApp;
  let member: string;
  let other: string;
  let alice: string;

  const create = async (record: Record<string, unknown>, key = member) =>
    bodyOf<Record<string, unknown> & { id: string; changeSetId: string }>(
      await t.http.post('/api/v1/objects/deal/records').set(bearer(key)).send(record).expect(201),
    );
  const patch = async (id: string, values: Record<string, unknown>, key = member) =>
    bodyOf<Record<string, unknown> & { changeSetId: string }>(
      await t.http.patch(`/api/v1/objects/deal/records/${id}`).set(bearer(key)).send(values).expect(200),
    );
  const history = async (id: string, key = member, query = '') =>
    bodyOf<HistoryResponse>(await t.http.get(`/api/v1/objects/deal/records/${id}/history${query}`).set(bearer(key)).expect(200));
  const read = async (id: string, key = member) =>
    bodyOf<Record<string, unknown>>(await t.http.get(`/api/v1/objects/deal/records/${id}`).set(bearer(key)).expect(200));

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'deal', [
      fieldSpec('name', 'text', { required: true, unique: true }),
      fieldSpec('amount', 'currency'),
      fieldSpec('stage', 'select', { options: ['open', 'won', 'lost'] }),
      fieldSpec('owner', 'text'),
      fieldSpec('close_date', 'date'),
    ]);
    member = (await createApiKey(t, { name: 'grid', role: 'member' })).secret;
    other = (await createApiKey(t, { name: 'other', role: 'member' })).secret;
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'own-deals',
        objects: {
          deal: {
            read: true,
            create: true,
            update: true,
            delete: true,
            rowFilter: { owner: '$subject' },
            hiddenFields: ['amount'],
          },
        },
      })
      .expect(201);
    alice = (await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice', policies: ['own-deals'] })).secret;
  });
  afterAll(() => t.close());

  it('keeps a version per write with who, how, its change set and each field before → after, newest first', async () => {
    const created = await create({ name: 'Acme', amount: 100, stage: 'open', close_date: '2026-12-01' });
    const id = created.id;
    const first = await patch(id, { amount: 250 });
    const second = await patch(id, { stage: 'won', owner: 'ann' }, other);
    expect(new Set([created.changeSetId, first.changeSetId, second.changeSetId]).size).toBe(3);
    const { versions, nextCursor } = await history(id);
    expect(nextCursor).toBeNull();
    expect(versions.map((v) => [v.op, v.actor, v.via, v.changeSetId])).toEqual([
      ['update', 'other', 'api', second.changeSetId],
      ['update', 'self', 'api', first.changeSetId],
      ['create', 'self', 'api', created.changeSetId],
    ]);
    expect(versions[0].changes).toEqual({ stage: { before: 'open', after: 'won' }, owner: { before: null, after: 'ann' } });
    expect(versions[1].changes).toEqual({ amount: { before: 100, after: 250 } });
    expect(versions[2].changes).toMatchObject({
      name: { before: null, after: 'Acme' },
      close_date: { before: null, after: '2026-12-01' },
    });
    expect(versions[0].keyId).toBeUndefined();
    // Admins learn which key.
    const asAdminKey = await history(id, t.adminKey);
    expect(typeof asAdminKey.versions[0].keyId).toBe('string');
    // Pages, newest first.
    const page = await history(id, member, '?limit=2');
    expect(page.versions).toHaveLength(2);
    const rest = await history(id, member, `?limit=2&cursor=${page.nextCursor}`);
    expect(rest.versions.map((v) => v.op)).toEqual(['create']);
    // The record as it was at a version.
    const then = bodyOf<Record<string, unknown>>(
      await t.http.get(`/api/v1/objects/deal/records/${id}/history/${versions[1].version}`).set(bearer(member)).expect(200),
    );
    expect(then).toMatchObject({ id, name: 'Acme', amount: 250, stage: 'open', owner: null });
    const missing = await t.http.get(`/api/v1/objects/deal/records/${id}/history/999999999`).set(bearer(member)).expect(404);
    expect(errorOf(missing).code).toBe('version_not_found');
  });

  it('restores a version as a new one (via restore), under If-Match', async () => {
    const { id } = await create({ name: 'Restorable', amount: 10, stage: 'open' });
    await patch(id, { amount: 20, stage: 'lost' });
    const [, createdVersion] = (await history(id)).versions;
    const stale = await t.http
      .post(`/api/v1/objects/deal/records/${id}/restore`)
      .set(bearer(member))
      .set('if-match', '"1"')
      .send({ version: createdVersion.version })
      .expect(412);
    expect(errorOf(stale).code).toBe('precondition_failed');
    const restored = await t.http
      .post(`/api/v1/objects/deal/records/${id}/restore`)
      .set(bearer(member))
      .send({ version: createdVersion.version })
      .expect(200);
    expect(restored.body).toMatchObject({ id, amount: 10, stage: 'open' });
    expect(restored.headers['change-set-id']).toBe(bodyOf<{ changeSetId: string }>(restored).changeSetId);
    const [latest] = (await history(id)).versions;
    expect(latest).toMatchObject({
      op: 'update',
      via: 'restore',
      changes: { amount: { before: 20, after: 10 }, stage: { before: 'lost', after: 'open' } },
    });
    const bad = await t.http
      .post(`/api/v1/objects/deal/records/${id}/restore`)
      .set(bearer(member))
      .send({ version: 'x' })
      .expect(400);
    expect(errorOf(bad).code).toBe('validation_failed');
  });

  it('moves deleted records to the trash, out of every read, and restores them (409 when a live record took the unique value)', async () => {
    const { id } = await create({ name: 'Trashy', amount: 5 });
    const deleted = await t.http.delete(`/api/v1/objects/deal/records/${id}`).set(bearer(member)).expect(204);
    expect(deleted.headers['change-set-id']).toMatch(/^[0-9a-f-]{36}$/);
    await t.http.get(`/api/v1/objects/deal/records/${id}`).set(bearer(member)).expect(404);
    const count = bodyOf<{ count: number }>(
      await t.http
        .post('/api/v1/objects/deal/aggregate')
        .set(bearer(member))
        .send({ where: { name: 'Trashy' }, aggregations: [{ fn: 'count', alias: 'count' }] }),
    );
    expect(JSON.stringify(count)).not.toContain('"count":1');
    const trash = bodyOf<TrashResponse>(await t.http.get('/api/v1/objects/deal/trash').set(bearer(member)).expect(200));
    expect(trash.records[0]).toMatchObject({
      id,
      actor: 'self',
      changeSetId: deleted.headers['change-set-id'],
      record: { name: 'Trashy', amount: 5 },
    });
    // A live record takes its unique name: the restore is refused, nothing changes.
    const taker = await create({ name: 'Trashy' });
    const conflict = await t.http.post(`/api/v1/objects/deal/trash/${id}/restore`).set(bearer(member)).expect(409);
    expect(errorOf(conflict).code).toBe('unique_violation');
    await t.http.delete(`/api/v1/objects/deal/records/${taker.id}`).set(bearer(member)).expect(204);
    const back = await t.http.post(`/api/v1/objects/deal/trash/${id}/restore`).set(bearer(member)).expect(200);
    expect(back.body).toMatchObject({ id, name: 'Trashy', amount: 5 });
    expect(await read(id)).toMatchObject({ name: 'Trashy' });
    expect((await history(id)).versions.map((v) => v.op)).toEqual(['restore', 'delete', 'create']);
    // Purge: admins only.
    await t.http.delete(`/api/v1/objects/deal/trash/${taker.id}`).set(bearer(member)).expect(403);
    await t.http.delete(`/api/v1/objects/deal/trash/${taker.id}`).set(asAdmin(t)).expect(204);
    await t.http.post(`/api/v1/objects/deal/trash/${taker.id}/restore`).set(bearer(member)).expect(404);
  });

  it('reverts a batch as one change set, and the revert of the revert redoes it', async () => {
    const a = await create({ name: 'Batch A', amount: 1 });
    const b = await create({ name: 'Batch B', amount: 2 });
    const batch = await t.http
      .post('/api/v1/objects/deal/records/batch')
      .set(bearer(member))
      .send({
        operations: [
          { op: 'update', id: a.id, record: { amount: 11 } },
          { op: 'delete', id: b.id },
          { op: 'create', record: { name: 'Batch C', amount: 3 } },
        ],
      })
      .expect(200);
    const { changeSetId: setId, results } = bodyOf<BatchRecordsResponse>(batch);
    expect(batch.headers['change-set-id']).toBe(setId);
    const cId = results[2].id!;
    const set = bodyOf<ChangeSetResponse>(await t.http.get(`/api/v1/change-sets/${setId}`).set(bearer(member)).expect(200));
    expect(set).toMatchObject({ id: setId, via: 'batch', actor: 'self', object: 'deal', records: 3 });
    expect(set.changes!.map((c) => [c.id, c.op])).toEqual([
      [a.id, 'update'],
      [b.id, 'delete'],
      [cId, 'create'],
    ]);
    expect(set.changes![0].changes).toEqual({ amount: { before: 1, after: 11 } });
    // Its change events carry it too.
    const feed = bodyOf<ChangesResponse>(
      await t.http.get('/api/v1/objects/deal/changes?limit=1000').set(bearer(member)).expect(200),
    );
    const events = feed.changes.filter((c) => c.changeSetId === setId);
    expect(events.map((c) => [c.op, c.id])).toEqual([
      ['update', a.id],
      ['delete', b.id],
      ['create', cId],
    ]);
    // Another member may not revert it.
    await t.http.post(`/api/v1/change-sets/${setId}/revert`).set(bearer(other)).expect(403);
    const revert = bodyOf<{ changeSetId: string }>(
      await t.http.post(`/api/v1/change-sets/${setId}/revert`).set(bearer(member)).expect(200),
    );
    expect(await read(a.id)).toMatchObject({ amount: 1 });
    expect(await read(b.id)).toMatchObject({ name: 'Batch B', amount: 2 });
    await t.http.get(`/api/v1/objects/deal/records/${cId}`).set(bearer(member)).expect(404);
    expect(bodyOf<ChangeSetResponse>(await t.http.get(`/api/v1/change-sets/${setId}`).set(bearer(member))).revertedBy).toBe(
      revert.changeSetId,
    );
    // Reverting the revert redoes the batch.
    await t.http.post(`/api/v1/change-sets/${revert.changeSetId}/revert`).set(bearer(member)).expect(200);
    expect(await read(a.id)).toMatchObject({ amount: 11 });
    await t.http.get(`/api/v1/objects/deal/records/${b.id}`).set(bearer(member)).expect(404);
    expect(await read(cId)).toMatchObject({ name: 'Batch C' });
  });

  it('refuses a revert when a record changed since, naming each field with the value expected and now; nothing written', async () => {
    const a = await create({ name: 'Conflict A', amount: 1, stage: 'open' });
    const b = await create({ name: 'Conflict B', amount: 2 });
    const batch = await t.http
      .post('/api/v1/objects/deal/records/batch')
      .set(bearer(member))
      .send({
        operations: [
          { op: 'update', id: a.id, record: { amount: 10 } },
          { op: 'update', id: b.id, record: { amount: 20 } },
        ],
      })
      .expect(200);
    await patch(a.id, { amount: 99 }, other);
    const refused = await t.http
      .post(`/api/v1/change-sets/${bodyOf<BatchRecordsResponse>(batch).changeSetId}/revert`)
      .set(bearer(member))
      .expect(409);
    expect(errorOf(refused).code).toBe('revert_conflict');
    expect(errorOf(refused).details).toEqual({ records: [{ id: a.id, field: 'amount', expected: 10, current: 99 }] });
    expect(await read(b.id)).toMatchObject({ amount: 20 });
  });

  it('clears a lookup only when its record really goes: a delete that misses (stale If-Match) leaves it pointing', async () => {
    await createObject(t, 'task', [fieldSpec('title', 'text'), fieldSpec('deal', 'lookup', { reference: 'deal' })]);
    const deal = await create({ name: 'Pointed at' });
    const task = bodyOf<{ id: string }>(
      await t.http.post('/api/v1/objects/task/records').set(bearer(member)).send({ title: 'Call', deal: deal.id }).expect(201),
    );
    const batch = await t.http
      .post('/api/v1/objects/deal/records/batch')
      .set(bearer(member))
      .send({ atomic: false, operations: [{ op: 'delete', id: deal.id, ifMatch: '"1"' }] })
      .expect(200);
    expect(bodyOf<BatchRecordsResponse>(batch).results[0]).toMatchObject({ status: 412 });
    const taskNow = async () =>
      bodyOf<{ deal: string | null }>(
        await t.http.get(`/api/v1/objects/task/records/${task.id}`).set(bearer(member)).expect(200),
      );
    expect((await taskNow()).deal).toBe(deal.id);
    // A delete that goes through clears it; the trash restore points it back.
    await t.http.delete(`/api/v1/objects/deal/records/${deal.id}`).set(bearer(member)).expect(204);
    expect((await taskNow()).deal).toBeNull();
    // The delete's change set lists the deal alone: the task it cleared is undone with it, not as a record of its own.
    const [latest] = bodyOf<ChangeSetsResponse>(
      await t.http.get('/api/v1/change-sets?object=deal&actor=self&limit=1').set(bearer(member)).expect(200),
    ).changeSets;
    expect(latest).toMatchObject({ object: 'deal', records: 1 });
    await t.http.post(`/api/v1/objects/deal/trash/${deal.id}/restore`).set(bearer(member)).expect(200);
    expect((await taskNow()).deal).toBe(deal.id);
  });

  it('reads history, the trash and change sets of an object with a formula field (computed, never a change)', async () => {
    await createObject(t, 'quote', [fieldSpec('qty', 'integer'), fieldSpec('price', 'number')]);
    await t.http
      .post('/api/v1/objects/quote/fields')
      .set(asAdmin(t))
      .send({ name: 'total', label: 'Total', type: 'formula', expression: '{qty} * {price}', resultType: 'number' })
      .expect(201);
    const made = bodyOf<{ id: string }>(
      await t.http.post('/api/v1/objects/quote/records').set(bearer(member)).send({ qty: 2, price: 5 }).expect(201),
    );
    const changed = bodyOf<{ changeSetId: string; total: number }>(
      await t.http.patch(`/api/v1/objects/quote/records/${made.id}`).set(bearer(member)).send({ qty: 3 }).expect(200),
    );
    expect(changed.total).toBe(15);
    const { versions } = bodyOf<HistoryResponse>(
      await t.http.get(`/api/v1/objects/quote/records/${made.id}/history`).set(bearer(member)).expect(200),
    );
    expect(versions[0].changes).toEqual({ qty: { before: 2, after: 3 } });
    const then = bodyOf<Record<string, unknown>>(
      await t.http.get(`/api/v1/objects/quote/records/${made.id}/history/${versions[1].version}`).set(bearer(member)).expect(200),
    );
    expect(then).toMatchObject({ qty: 2, total: 10 });
    await t.http.get(`/api/v1/change-sets/${changed.changeSetId}`).set(bearer(member)).expect(200);
    await t.http.post(`/api/v1/change-sets/${changed.changeSetId}/revert`).set(bearer(member)).expect(200);
    await t.http.delete(`/api/v1/objects/quote/records/${made.id}`).set(bearer(member)).expect(204);
    const trash = bodyOf<TrashResponse>(await t.http.get('/api/v1/objects/quote/trash').set(bearer(member)).expect(200));
    expect(trash.records[0].record).toMatchObject({ qty: 2, total: 10 });
    const back = bodyOf<{ total: number }>(
      await t.http.post(`/api/v1/objects/quote/trash/${made.id}/restore`).set(bearer(member)).expect(200),
    );
    expect(back.total).toBe(10);
  });

  it('lists change sets of the objects a key may read, its own with actor=self', async () => {
    const mine = await create({ name: 'Listed' });
    const list = bodyOf<ChangeSetsResponse>(
      await t.http.get('/api/v1/change-sets?actor=self&limit=5').set(bearer(member)).expect(200),
    );
    expect(list.changeSets[0]).toMatchObject({ id: mine.changeSetId, via: 'api', actor: 'self', records: 1 });
    expect(list.changeSets.every((s) => s.actor === 'self')).toBe(true);
    const next = bodyOf<ChangeSetsResponse>(
      await t.http.get(`/api/v1/change-sets?actor=self&limit=5&cursor=${list.nextCursor}`).set(bearer(member)).expect(200),
    );
    expect(next.changeSets.map((s) => s.id)).not.toContain(mine.changeSetId);
    const bad = await t.http.get('/api/v1/change-sets?cursor=nope').set(bearer(member)).expect(400);
    expect(errorOf(bad).code).toBe('invalid_cursor');
    await t.http.get('/api/v1/change-sets/00000000-0000-4000-8000-000000000000').set(bearer(member)).expect(404);
  });

  it('shows history only as the key may read it: hidden fields left out, records outside its row filter not found', async () => {
    const hers = await create({ name: 'Alice deal', amount: 500, owner: 'alice' });
    const theirs = await create({ name: 'Bob deal', amount: 600, owner: 'bob' });
    await patch(hers.id, { amount: 700 });
    await patch(hers.id, { stage: 'won' });
    const seen = await history(hers.id, alice);
    // The update of amount alone is not one of her versions; no version shows amount.
    expect(seen.versions.map((v) => v.op)).toEqual(['update', 'create']);
    expect(JSON.stringify(seen)).not.toContain('amount');
    expect(JSON.stringify(seen)).not.toContain('700');
    const hidden = await t.http.get(`/api/v1/objects/deal/records/${theirs.id}/history`).set(bearer(alice)).expect(404);
    expect(errorOf(hidden).code).toBe('record_not_found');
    await t.http.get(`/api/v1/objects/deal/records/${theirs.id}/history/1`).set(bearer(alice)).expect(404);
    const then = bodyOf<Record<string, unknown>>(
      await t.http
        .get(`/api/v1/objects/deal/records/${hers.id}/history/${seen.versions[1].version}`)
        .set(bearer(alice))
        .expect(200),
    );
    expect(then).not.toHaveProperty('amount');
    // Change sets of records she may not read show none of them.
    const set = bodyOf<ChangeSetResponse>(
      await t.http.get(`/api/v1/change-sets/${theirs.changeSetId}`).set(bearer(alice)).expect(200),
    );
    expect(set.records).toBe(0);
    expect(set.changes).toEqual([]);
    // The trash too.
    await t.http.delete(`/api/v1/objects/deal/records/${theirs.id}`).set(bearer(member)).expect(204);
    const trash = bodyOf<TrashResponse>(await t.http.get('/api/v1/objects/deal/trash?limit=200').set(bearer(alice)).expect(200));
    expect(trash.records.map((r) => r.id)).not.toContain(theirs.id);
    await t.http.post(`/api/v1/objects/deal/trash/${theirs.id}/restore`).set(bearer(alice)).expect(404);
  });

  it('rebuilds a version from compacted history once changes are past the feed retention', async () => {
    const { id } = await create({ name: 'Compacted', amount: 1, stage: 'open' });
    await patch(id, { amount: 2 });
    await patch(id, { stage: 'won' });
    await patch(id, { amount: 3 });
    const before = await history(id);
    const pruned = await t.app.get(ChangesService).prune(Date.now() + 8 * 86_400_000);
    expect(pruned.compacted).toBeGreaterThanOrEqual(3);
    expect(await history(id)).toEqual(before);
    const at = async (v: string) =>
      bodyOf<Record<string, unknown>>(
        await t.http.get(`/api/v1/objects/deal/records/${id}/history/${v}`).set(bearer(member)).expect(200),
      );
    const [third, second, first, created] = before.versions;
    expect(await at(third.version)).toMatchObject({ amount: 3, stage: 'won' });
    expect(await at(second.version)).toMatchObject({ amount: 2, stage: 'won' });
    expect(await at(first.version)).toMatchObject({ amount: 2, stage: 'open' });
    expect(await at(created.version)).toMatchObject({ amount: 1, stage: 'open' });
    // The server's own writes carry a change set too.
    const written = await t.app.get(DataService).update(SYSTEM_CALLER, 'deal', id, { amount: 4 });
    expect(written.changeSetId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await history(id)).versions[0]).toMatchObject({
      actor: 'system',
      changeSetId: written.changeSetId,
      changes: { amount: { before: 3, after: 4 } },
    });
  });
});
