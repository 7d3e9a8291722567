import type { BatchRecordsResponse } from '../../src/records/records.dto';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey, createObject, fieldSpec } from '../support/fixtures';

const UNKNOWN_ID = '7d1c4c36-1b7a-4d5e-9a60-3a1f2b9c8e01';

interface BatchErrorDetails {
  errors: { index: number; code: string; field?: string; error: string }[];
}

describe('batch edits: POST /api/v1/objects/:name/records/batch', () => {
  let t: TestApp;
  let member: string;

  const batch = (body: unknown, key = member) =>
    t.http
      .post('/api/v1/objects/item/records/batch')
      .set(bearer(key))
      .send(body as object);
  const count = async () => Number((await t.sql<{ n: string }>('select count(*) as n from data.item'))[0].n);
  const creates = (n: number, from = 0) =>
    Array.from({ length: n }, (_, i) => ({ op: 'create', record: { sku: `sku-${from + i}`, qty: from + i } }));
  const createOne = async (sku: string, qty: number) =>
    t.http.post('/api/v1/objects/item/records').set(bearer(member)).send({ sku, qty }).expect(201);

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'item', [
      fieldSpec('sku', 'text', { label: 'SKU', required: true, unique: true }),
      fieldSpec('qty', 'integer', { label: 'Quantity' }),
      fieldSpec('owner', 'text'),
    ]);
    member = (await createApiKey(t, { name: 'grid', role: 'member' })).secret;
  });
  afterAll(() => t.close());
  beforeEach(() => t.sql('delete from data.item'));

  it('creates 1,000 records in one request, each with its id and ETag, in request order', async () => {
    const res = await batch({ operations: creates(1000) }).expect(200);
    const { results } = bodyOf<BatchRecordsResponse>(res);
    expect(results).toHaveLength(1000);
    expect(results.map((r) => r.index)).toEqual([...Array(1000).keys()]);
    expect(results.every((r) => r.status === 201 && /^"\d+"$/.test(r.etag ?? ''))).toBe(true);
    const rows = await t.sql<{ id: string; sku: string }>('select id, sku from data.item');
    expect(rows).toHaveLength(1000);
    const skuById = new Map(rows.map((r) => [r.id, r.sku]));
    expect(results.map((r) => skuById.get(r.id!))).toEqual(creates(1000).map((c) => c.record.sku));
    const one = await t.http.get(`/api/v1/objects/item/records/${results[42].id}`).set(bearer(member)).expect(200);
    expect(one.headers.etag).toBe(results[42].etag);
  });

  it('refuses 1,001 operations and an empty list with 400, writing nothing', async () => {
    const tooMany = await batch({ operations: creates(1001) }).expect(400);
    expect(errorOf(tooMany).code).toBe('validation_failed');
    expect((await batch({ operations: [] })).status).toBe(400);
    expect((await batch({ operations: creates(1), atomic: 'yes' })).status).toBe(400);
    expect(await count()).toBe(0);
  });

  it('rolls back 1,000 operations for one bad value and names its index and field', async () => {
    const operations: unknown[] = creates(1000);
    operations[537] = { op: 'create', record: { sku: 'bad', qty: 'many' } };
    const res = await batch({ operations }).expect(400);
    const body = errorOf<BatchErrorDetails>(res);
    expect(body.code).toBe('invalid_value');
    expect(body.details.errors).toEqual([expect.objectContaining({ index: 537, code: 'invalid_value', field: 'qty' })]);
    expect(await count()).toBe(0);
  });

  it('updates and deletes with ifMatch, answering each with its status and new ETag', async () => {
    const a = await createOne('a', 1);
    const b = await createOne('b', 2);
    const res = await batch({
      operations: [
        { op: 'update', id: idOf(a), record: { qty: 10 }, ifMatch: a.headers.etag },
        { op: 'delete', id: idOf(b), ifMatch: b.headers.etag },
        { op: 'create', record: { sku: 'c', qty: 3 } },
      ],
    }).expect(200);
    const { results } = bodyOf<BatchRecordsResponse>(res);
    expect(results.map((r) => [r.index, r.status])).toEqual([
      [0, 200],
      [1, 204],
      [2, 201],
    ]);
    const read = await t.http
      .get(`/api/v1/objects/item/records/${idOf(a)}`)
      .set(bearer(member))
      .expect(200);
    expect(read.body).toMatchObject({ qty: 10 });
    expect(read.headers.etag).toBe(results[0].etag);
    expect((await t.sql<{ sku: string }>('select sku from data.item order by sku')).map((r) => r.sku)).toEqual(['a', 'c']);
  });

  it('answers a stale ifMatch inside a batch with 412 and writes none of the batch', async () => {
    const a = await createOne('a', 1);
    const stale = a.headers.etag;
    await t.http
      .patch(`/api/v1/objects/item/records/${idOf(a)}`)
      .set(bearer(member))
      .send({ qty: 2 })
      .expect(200);
    const res = await batch({
      operations: [
        { op: 'create', record: { sku: 'new', qty: 1 } },
        { op: 'update', id: idOf(a), record: { qty: 99 }, ifMatch: stale },
      ],
    }).expect(412);
    const body = errorOf<BatchErrorDetails>(res);
    expect(body.code).toBe('precondition_failed');
    expect(body.details.errors).toEqual([expect.objectContaining({ index: 1, code: 'precondition_failed' })]);
    expect(await t.sql<{ sku: string; qty: number }>('select sku, qty::int as qty from data.item')).toEqual([
      { sku: 'a', qty: 2 },
    ]);
  });

  it('names every failing operation, with the status of the first, when several fail for different reasons', async () => {
    await createOne('taken', 1);
    const res = await batch({
      operations: [
        { op: 'create', record: { sku: 'ok-1' } },
        { op: 'update', id: UNKNOWN_ID, record: { qty: 1 } },
        { op: 'create', record: { sku: 'taken' } },
        { op: 'create', record: { qty: 5 } },
        { op: 'upsert', record: {} },
        { op: 'delete', id: UNKNOWN_ID, extra: true },
        { op: 'update', id: UNKNOWN_ID, record: { qty: 1 }, ifMatch: 'not-a-tag' },
        { op: 'create', record: { sku: 'ok-2', nope: 1 } },
      ],
    }).expect(404);
    const body = errorOf<BatchErrorDetails>(res);
    expect(body.code).toBe('record_not_found');
    expect(body.details.errors.map((e) => [e.index, e.code, e.field])).toEqual([
      [1, 'record_not_found', undefined],
      [2, 'unique_violation', 'sku'],
      [3, 'missing_required_field', 'sku'],
      [4, 'invalid_operation', undefined],
      [5, 'invalid_operation', undefined],
      [6, 'invalid_if_match', undefined],
      [7, 'unknown_field', 'nope'],
    ]);
    expect((await t.sql<{ sku: string }>('select sku from data.item')).map((r) => r.sku)).toEqual(['taken']);
  });

  it('with "atomic": false applies what it can and reports each failure in its result', async () => {
    await createOne('taken', 1);
    const res = await batch({
      atomic: false,
      operations: [
        { op: 'create', record: { sku: 'x', qty: 1 } },
        { op: 'create', record: { sku: 'taken' } },
        { op: 'create', record: { sku: 'y', qty: 'two' } },
        { op: 'delete', id: UNKNOWN_ID },
        { op: 'create', record: { sku: 'z', qty: 3 } },
      ],
    }).expect(200);
    const { results } = bodyOf<BatchRecordsResponse>(res);
    expect(results.map((r) => [r.index, r.status, r.error?.code])).toEqual([
      [0, 201, undefined],
      [1, 409, 'unique_violation'],
      [2, 400, 'invalid_value'],
      [3, 404, 'record_not_found'],
      [4, 201, undefined],
    ]);
    expect(results[1].id).toBeNull();
    expect(results[3].id).toBe(UNKNOWN_ID);
    expect((await t.sql<{ sku: string }>('select sku from data.item order by sku')).map((r) => r.sku)).toEqual([
      'taken',
      'x',
      'z',
    ]);
  });

  it("applies the caller's policies like single writes: row filter, hidden fields and the actions granted", async () => {
    await t.http
      .post('/api/v1/policies')
      .set(bearer(t.adminKey))
      .send({
        name: 'own-items',
        objects: { item: { read: true, create: true, update: true, rowFilter: { owner: '$subject' }, hiddenFields: ['qty'] } },
      })
      .expect(201);
    const ann = (await createApiKey(t, { name: 'rep', role: 'member', subject: 'ann', policies: ['own-items'] })).secret;
    const bobs = idOf(
      await t.http.post('/api/v1/objects/item/records').set(bearer(t.adminKey)).send({ sku: 'bob-1', owner: 'bob' }),
    );

    const res = await batch(
      {
        atomic: false,
        operations: [
          { op: 'create', record: { sku: 'ann-1', owner: 'ann' } },
          { op: 'create', record: { sku: 'ann-2', owner: 'bob' } },
          { op: 'create', record: { sku: 'ann-3', owner: 'ann', qty: 4 } },
          { op: 'update', id: bobs, record: { sku: 'mine now' } },
          { op: 'delete', id: bobs },
        ],
      },
      ann,
    ).expect(200);
    expect(bodyOf<BatchRecordsResponse>(res).results.map((r) => [r.status, r.error?.code])).toEqual([
      [201, undefined],
      [403, 'forbidden'],
      [400, 'unknown_field'],
      [404, 'record_not_found'],
      [403, 'forbidden'],
    ]);
    expect((await t.sql<{ sku: string }>('select sku from data.item order by sku')).map((r) => r.sku)).toEqual([
      'ann-1',
      'bob-1',
    ]);
  });

  it('is 404 for an object the caller may not read, and 401 without a key', async () => {
    await t.http
      .post('/api/v1/objects/nope/records/batch')
      .set(bearer(member))
      .send({ operations: creates(1) })
      .expect(404);
    await t.http
      .post('/api/v1/objects/item/records/batch')
      .send({ operations: creates(1) })
      .expect(401);
  });
});
