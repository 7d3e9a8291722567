import type { AggregateResponse } from '../../src/records/records.dto';
import { bodyOf, errorOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createObject, fieldSpec } from '../support/fixtures';

type Row = Record<string, unknown>;

/** Strings that would change a statement if they were ever spliced into SQL text. */
const PAYLOADS = [
  `"; drop table data.victim; --`,
  `'; drop table data.victim; --`,
  `victim; drop table data.victim`,
  `1 or 1=1`,
  `1' or '1'='1`,
  `name" from data.victim; --`,
  `name) or (1=1`,
  `name"::text, (select string_agg(secret_hash, ',') from api_keys) as "x`,
  `\\'; delete from data.victim; --`,
  `victim" cascade; --`,
  `pg_catalog.pg_class`,
  `$$; drop table data.victim; $$`,
];

/** Field-name payloads that start like an operator, so the where compiler reads them as one. */
const OPERATOR_PAYLOADS = [`$gt; drop table data.victim; --`, `$eq" or 1=1 --`, `$in'); delete from data.victim; --`];

const BASELINE = [
  { name: 'alpha', amount: 10, status: 'open' },
  { name: 'beta', amount: 20, status: "o'brien" },
  { name: 'gamma', amount: 30, status: 'open' },
];

describe('SQL injection attempts', () => {
  let t: TestApp;
  let objectCount: number;
  let keyCount: number;
  /** Rows created on purpose by the value tests; everything else must stay exactly as it was. */
  let inserted = 0;

  const enc = encodeURIComponent;
  const list = (query: Record<string, unknown>) => {
    const params: Record<string, string> = {};
    for (const [key, value] of Object.entries(query)) params[key] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get('/api/v1/objects/victim/records').query(params).set(asAdmin(t));
  };
  const aggregate = (body: unknown) =>
    t.http
      .post('/api/v1/objects/victim/aggregate')
      .set(asAdmin(t))
      .send(body as object);

  async function scalar(sql: string, params: unknown[] = []): Promise<number> {
    const [row] = await t.sql<{ n: string }>(sql, params);
    return Number(row.n);
  }

  /** The victim table, its baseline rows, the metadata and the key table are exactly as before the attack. */
  async function expectIntact(): Promise<void> {
    expect(
      await scalar(`select count(*) as n from information_schema.tables where table_schema = 'data' and table_name = 'victim'`),
    ).toBe(1);
    expect(await scalar('select count(*) as n from data.victim')).toBe(BASELINE.length + inserted);
    const baseline = await t.sql<Row>(`select name, amount, status from data.victim where name = any($1) order by name`, [
      BASELINE.map((b) => b.name),
    ]);
    expect(baseline).toEqual(BASELINE);
    expect(await scalar('select count(*) as n from object_definitions')).toBe(objectCount);
    expect(await scalar('select count(*) as n from api_keys')).toBe(keyCount);
    const cols = await t.sql<{ column_name: string }>(
      `select column_name from information_schema.columns where table_schema = 'data' and table_name = 'victim' order by ordinal_position`,
    );
    expect(cols.map((c) => c.column_name)).toEqual([
      'id',
      'created_at',
      'updated_at',
      'name',
      'amount',
      'status',
      'note',
      'meta',
    ]);
  }

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'victim', [
      fieldSpec('name', 'text'),
      fieldSpec('amount', 'number'),
      fieldSpec('status', 'select', { options: ['open', "o'brien"] }),
      fieldSpec('note', 'textarea'),
      fieldSpec('meta', 'json'),
    ]);
    for (const record of BASELINE) await t.http.post('/api/v1/objects/victim/records').set(asAdmin(t)).send(record).expect(201);
    objectCount = await scalar('select count(*) as n from object_definitions');
    keyCount = await scalar('select count(*) as n from api_keys');
  });
  afterAll(() => t.close());

  afterEach(async () => {
    await expectIntact();
  });

  describe('in object names', () => {
    it.each(PAYLOADS)('answers 404 object_not_found for the path name %j on every route', async (payload) => {
      const name = enc(payload);
      const responses = [
        await t.http.get(`/api/v1/objects/${name}`).set(asAdmin(t)),
        await t.http.patch(`/api/v1/objects/${name}`).set(asAdmin(t)).send({ label: 'x' }),
        await t.http.delete(`/api/v1/objects/${name}`).set(asAdmin(t)),
        await t.http.post(`/api/v1/objects/${name}/fields`).set(asAdmin(t)).send({ name: 'x', label: 'X', type: 'text' }),
        await t.http.get(`/api/v1/objects/${name}/records`).set(asAdmin(t)),
        await t.http.post(`/api/v1/objects/${name}/records`).set(asAdmin(t)).send({ name: 'x' }),
        await t.http.get(`/api/v1/objects/${name}/records/${enc('00000000-0000-4000-8000-000000000000')}`).set(asAdmin(t)),
        await t.http
          .post(`/api/v1/objects/${name}/aggregate`)
          .set(asAdmin(t))
          .send({ aggregations: [{ function: 'count', alias: 'n' }] }),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual(Array(8).fill([404, 'object_not_found']));
    });

    it.each(PAYLOADS)('refuses to create an object named %j with 400 invalid_name', async (payload) => {
      const res = await t.http.post('/api/v1/objects').set(asAdmin(t)).send({ name: payload, label: 'X' }).expect(400);
      expect(errorOf(res).code).toBe('invalid_name');
    });

    it.each(PAYLOADS)('refuses a lookup whose reference is %j with 400 unknown_reference', async (payload) => {
      const res = await t.http
        .post('/api/v1/objects/victim/fields')
        .set(asAdmin(t))
        .send({ name: 'link', label: 'Link', type: 'lookup', reference: payload })
        .expect(400);
      expect(errorOf(res).code).toBe('unknown_reference');
    });
  });

  describe('in field names', () => {
    const unknownFieldCode = 'unknown_field';

    it.each([...PAYLOADS, ...OPERATOR_PAYLOADS])('refuses %j as a where key with 400', async (payload) => {
      const top = await list({ where: { [payload]: 'x' } }).expect(400);
      expect(errorOf(top).code).toBe(unknownFieldCode);
      const nested = await list({ where: { $or: [{ name: 'alpha' }, { [payload]: { $eq: 1 } }] } }).expect(400);
      expect(errorOf(nested).code).toBe(unknownFieldCode);
    });

    it.each(PAYLOADS)('refuses %j in fields, orderBy, groupBy and aggregations with 400 unknown_field', async (payload) => {
      const responses = [
        await list({ fields: `name,${payload}` }),
        await list({ orderBy: [{ field: payload, order: 'asc' }] }),
        await aggregate({ groupBy: [payload], aggregations: [{ function: 'count', alias: 'n' }] }),
        await aggregate({ aggregations: [{ function: 'sum', field: payload, alias: 's' }] }),
        await aggregate({ aggregations: [{ function: 'count_distinct', field: payload, alias: 's' }] }),
        await aggregate({ aggregations: [{ function: 'count', alias: 'n' }], orderBy: [{ field: payload }] }),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual(Array(6).fill([400, 'unknown_field']));
    });

    it.each(PAYLOADS)('refuses %j as a record key on insert and update with 400 unknown_field', async (payload) => {
      const insert = await t.http
        .post('/api/v1/objects/victim/records')
        .set(asAdmin(t))
        .send({ name: 'x', [payload]: 1 })
        .expect(400);
      expect(errorOf(insert).code).toBe('unknown_field');
      const [{ id }] = await t.sql<{ id: string }>(`select id from data.victim where name = 'alpha'`);
      const update = await t.http
        .patch(`/api/v1/objects/victim/records/${id}`)
        .set(asAdmin(t))
        .send({ [payload]: 'x' })
        .expect(400);
      expect(errorOf(update).code).toBe('unknown_field');
    });

    it.each(PAYLOADS)('refuses to create a field named %j with 400 invalid_name', async (payload) => {
      const res = await t.http
        .post('/api/v1/objects/victim/fields')
        .set(asAdmin(t))
        .send({ name: payload, label: 'X', type: 'text' })
        .expect(400);
      expect(errorOf(res).code).toBe('invalid_name');
    });

    it.each(PAYLOADS)('answers 404 field_not_found for the path field %j', async (payload) => {
      const patch = await t.http
        .patch(`/api/v1/objects/victim/fields/${enc(payload)}`)
        .set(asAdmin(t))
        .send({ label: 'x' })
        .expect(404);
      expect(errorOf(patch).code).toBe('field_not_found');
      const del = await t.http
        .delete(`/api/v1/objects/victim/fields/${enc(payload)}`)
        .set(asAdmin(t))
        .expect(404);
      expect(errorOf(del).code).toBe('field_not_found');
    });
  });

  describe('in operators, directions, functions and aliases', () => {
    it.each([...PAYLOADS, ...OPERATOR_PAYLOADS])(
      'refuses the operator %j with 400 unknown_field, like an unknown field',
      async (payload) => {
        const onField = await list({ where: { amount: { [payload]: 1 } } }).expect(400);
        expect(errorOf(onField).code).toBe('unknown_field');
        const topLevel = await list({ where: { [`$${payload}`]: [{ name: 'alpha' }] } }).expect(400);
        expect(errorOf(topLevel).code).toBe('unknown_field');
      },
    );

    it.each(PAYLOADS)('refuses the orderBy direction %j with 400 invalid_order_by', async (payload) => {
      const records = await list({ orderBy: [{ field: 'name', order: payload }] }).expect(400);
      expect(errorOf(records).code).toBe('invalid_order_by');
      const groups = await aggregate({
        groupBy: ['status'],
        aggregations: [{ function: 'count', alias: 'n' }],
        orderBy: [{ field: 'n', order: payload }],
      }).expect(400);
      expect(errorOf(groups).code).toBe('invalid_order_by');
    });

    it.each(PAYLOADS)('refuses the aggregate function %j with 400 invalid_aggregate_function', async (payload) => {
      const res = await aggregate({ aggregations: [{ function: payload, field: 'amount', alias: 'x' }] }).expect(400);
      expect(errorOf(res).code).toBe('invalid_aggregate_function');
    });

    it.each(PAYLOADS)('refuses the alias %j with 400 invalid_aggregation', async (payload) => {
      const res = await aggregate({ aggregations: [{ function: 'count', alias: payload }] }).expect(400);
      expect(errorOf(res).code).toBe('invalid_aggregation');
    });

    it.each(PAYLOADS)('refuses limit and offset %j with 400 validation_failed', async (payload) => {
      const limit = await list({ limit: payload }).expect(400);
      expect(errorOf(limit).code).toBe('validation_failed');
      const offset = await list({ offset: payload }).expect(400);
      expect(errorOf(offset).code).toBe('validation_failed');
    });

    it.each(PAYLOADS)('answers 404 record_not_found for the record id %j', async (payload) => {
      const responses = [
        await t.http.get(`/api/v1/objects/victim/records/${enc(payload)}`).set(asAdmin(t)),
        await t.http
          .patch(`/api/v1/objects/victim/records/${enc(payload)}`)
          .set(asAdmin(t))
          .send({ name: 'x' }),
        await t.http.delete(`/api/v1/objects/victim/records/${enc(payload)}`).set(asAdmin(t)),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual(Array(3).fill([404, 'record_not_found']));
    });

    it.each(PAYLOADS)('answers 401 for the bearer token %j', async (payload) => {
      const res = await t.http.get('/api/v1/objects/victim/records').set('Authorization', `Bearer ${payload}`).expect(401);
      expect(errorOf(res).code).toBe('unauthorized');
    });
  });

  describe('NUL characters, which Postgres cannot even compare', () => {
    it('answers 404 for object, field and record names holding NUL', async () => {
      const responses = [
        await t.http.get('/api/v1/objects/victim%00').set(asAdmin(t)),
        await t.http.get('/api/v1/objects/%00/records').set(asAdmin(t)),
        await t.http.patch('/api/v1/objects/victim%00').set(asAdmin(t)).send({ label: 'x' }),
        await t.http.delete('/api/v1/objects/victim%00').set(asAdmin(t)),
        await t.http.patch('/api/v1/objects/victim/fields/name%00').set(asAdmin(t)).send({ label: 'x' }),
        await t.http.delete('/api/v1/objects/victim/fields/name%00').set(asAdmin(t)),
        await t.http.get('/api/v1/objects/victim/records/%00').set(asAdmin(t)),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual([
        [404, 'object_not_found'],
        [404, 'object_not_found'],
        [404, 'object_not_found'],
        [404, 'object_not_found'],
        [404, 'field_not_found'],
        [404, 'field_not_found'],
        [404, 'record_not_found'],
      ]);
    });

    it('refuses NUL in names, references, values and keys with a 400', async () => {
      const responses = [
        await t.http.post('/api/v1/objects').set(asAdmin(t)).send({ name: 'victim\u0000', label: 'X' }),
        await t.http.post('/api/v1/objects/victim/fields').set(asAdmin(t)).send({ name: 'name\u0000', label: 'X', type: 'text' }),
        await t.http
          .post('/api/v1/objects/victim/fields')
          .set(asAdmin(t))
          .send({ name: 'link', label: 'X', type: 'lookup', reference: 'victim\u0000' }),
        await list({ where: { name: 'alpha\u0000' } }),
        await list({ where: { 'name\u0000': 'alpha' } }),
        await t.http.post('/api/v1/objects/victim/records').set(asAdmin(t)).send({ name: 'a\u0000b' }),
        await t.http
          .post('/api/v1/objects/victim/records')
          .set(asAdmin(t))
          .send({ name: 'ok', meta: { 'k\u0000': 1 } }),
        await aggregate({ where: { name: '\u0000' }, aggregations: [{ function: 'count', alias: 'n' }] }),
      ];
      expect(responses.map((r) => r.status)).toEqual(Array(8).fill(400));
      expect(responses.map((r) => errorOf(r).code)).toEqual([
        'validation_failed',
        'validation_failed',
        'validation_failed',
        'invalid_value',
        'unknown_field',
        'invalid_value',
        'invalid_value',
        'validation_failed',
      ]);
    });
  });

  describe('in values', () => {
    it.each(PAYLOADS)('matches %j only literally in where values', async (payload) => {
      const queries = [
        { name: payload },
        { name: { $eq: payload } },
        { name: { $in: [payload, 'no such name'] } },
        { name: { $contains: payload } },
        { name: { $startsWith: payload } },
        { name: { $endsWith: payload } },
        { $or: [{ name: payload }, { note: { $contains: payload } }] },
      ];
      for (const where of queries) {
        const res = await list({ where }).expect(200);
        expect({ where, records: bodyOf<RecordPage>(res).records, total: bodyOf<RecordPage>(res).total }).toEqual({
          where,
          records: [],
          total: 0,
        });
      }
      const negated = await list({ where: { name: { $ne: payload } } }).expect(200);
      expect(bodyOf<RecordPage>(negated).total).toBe(BASELINE.length + inserted);
    });

    it.each(PAYLOADS)('refuses %j where a number, an id or an option is expected with 400 invalid_value', async (payload) => {
      const responses = [
        await list({ where: { amount: payload } }),
        await list({ where: { amount: { $gt: payload } } }),
        await list({ where: { id: payload } }),
        await list({ where: { status: payload } }),
        await t.http.post('/api/v1/objects/victim/records').set(asAdmin(t)).send({ name: 'x', amount: payload }),
        await t.http.post('/api/v1/objects/victim/records').set(asAdmin(t)).send({ name: 'x', status: payload }),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual(Array(6).fill([400, 'invalid_value']));
    });

    it.each(PAYLOADS)('stores %j verbatim when it is a value, and finds exactly that record', async (payload) => {
      const res = await t.http
        .post('/api/v1/objects/victim/records')
        .set(asAdmin(t))
        .send({ name: payload, note: `note ${payload}`, meta: { q: payload, [payload]: [payload] } })
        .expect(201);
      inserted += 1;
      expect(res.body).toMatchObject({ name: payload, note: `note ${payload}`, meta: { q: payload, [payload]: [payload] } });

      const [row] = await t.sql<{ name: string; note: string; q: string; keyed: string }>(
        `select name, note, meta->>'q' as q, meta->$2->>0 as keyed from data.victim where id = $1`,
        [idOf(res), payload],
      );
      expect(row).toEqual({ name: payload, note: `note ${payload}`, q: payload, keyed: payload });

      const found = await list({ where: { name: payload } }).expect(200);
      expect(bodyOf<RecordPage>(found).total).toBe(1);
      expect(bodyOf<RecordPage>(found).records.map((r: Row) => r.id)).toEqual([idOf(res)]);
      const byJson = await list({ where: { meta: { $eq: { q: payload, [payload]: [payload] } } } }).expect(200);
      expect(bodyOf<RecordPage>(byJson).records.map((r: Row) => r.id)).toEqual([idOf(res)]);
      const counted = await aggregate({
        where: { note: { $contains: payload } },
        aggregations: [{ function: 'count', alias: 'n' }],
      }).expect(200);
      expect(bodyOf<AggregateResponse>(counted).rows).toEqual([{ n: 1 }]);

      const patched = await t.http
        .patch(`/api/v1/objects/victim/records/${idOf(res)}`)
        .set(asAdmin(t))
        .send({ note: payload })
        .expect(200);
      expect(bodyOf<RecordBody>(patched).note).toBe(payload);
      const [after] = await t.sql<{ note: string }>('select note from data.victim where id = $1', [idOf(res)]);
      expect(after.note).toBe(payload);
    });

    it('stores a select option containing a quote and filters on it', async () => {
      const res = await list({ where: { status: "o'brien" } }).expect(200);
      expect(bodyOf<RecordPage>(res).records.map((r: Row) => r.name)).toEqual(['beta']);
    });

    it.each(PAYLOADS)('keeps %j as literal text in object labels and descriptions', async (payload) => {
      const res = await t.http
        .patch('/api/v1/objects/victim')
        .set(asAdmin(t))
        .send({ label: payload, description: payload })
        .expect(200);
      expect(res.body).toMatchObject({ name: 'victim', label: payload, description: payload });
      const [row] = await t.sql<{ label: string; description: string }>(
        `select label, description from object_definitions where name = 'victim'`,
      );
      expect(row).toEqual({ label: payload, description: payload });
    });
  });
});
