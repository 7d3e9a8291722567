import type { AggregateResponse } from '../../src/records/records.dto';
import type { QueryRecordsResult } from '../../src/tools/data-tools/query-records.tool';
import { match } from '../support/matchers';
import { bodyOf, errorOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

type Row = Record<string, unknown>;

const UNKNOWN_ID = '7d1c4c36-1b7a-4d5e-9a60-3a1f2b9c8e01';

const GADGET_FIELDS = [
  { name: 'title', label: 'Title', type: 'text', required: true },
  { name: 'contact_email', label: 'Email', type: 'email', unique: true },
  { name: 'homepage', label: 'Homepage', type: 'url' },
  { name: 'weight', label: 'Weight', type: 'number' },
  { name: 'price', label: 'Price', type: 'currency' },
  { name: 'quantity', label: 'Quantity', type: 'integer' },
  { name: 'active', label: 'Active', type: 'boolean' },
  { name: 'released_on', label: 'Released on', type: 'date' },
  { name: 'launched_at', label: 'Launched at', type: 'datetime' },
  { name: 'status', label: 'Status', type: 'select', options: ['draft', 'live', 'retired'] },
  { name: 'tags', label: 'Tags', type: 'multiselect', options: ['red', 'green', 'blue'] },
  { name: 'maker', label: 'Maker', type: 'lookup', reference: 'maker' },
  { name: 'specs', label: 'Specs', type: 'json' },
];

/** The 60 list-test items: deterministic values with ties, nulls and LIKE metacharacters in names. */
function itemRecord(i: number): Row {
  const pad = String(i).padStart(2, '0');
  const specialNames: Record<number, string> = { 3: 'Item 03 is 100% done', 4: 'item_04 under_score', 5: 'ITEM 05 upper' };
  const flagSets = [null, ['x'], ['y', 'z'], ['x', 'z']];
  return {
    name: specialNames[i] ?? `item ${pad}`,
    amount: i % 7 === 0 ? null : ((i * 37) % 100) + 0.5,
    qty: i % 5,
    category: i % 10 === 9 ? null : ['a', 'b', 'c'][i % 3],
    flags: flagSets[i % 4],
    active: i % 2 === 0,
    day: `2024-01-${String(1 + (i % 28)).padStart(2, '0')}`,
    at: new Date(Date.UTC(2024, 0, 1) + i * 3_600_000).toISOString(),
  };
}

describe('records API', () => {
  let t: TestApp;
  let makerId: string;

  const ids = (records: Row[]) => records.map((r) => r.id as string);

  function list(object: string, query: Record<string, unknown> = {}) {
    const params: Record<string, string> = {};
    for (const [key, value] of Object.entries(query)) params[key] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get(`/api/v1/objects/${object}/records`).query(params).set(asAdmin(t));
  }

  async function sqlIds(sqlWhere: string, params: unknown[] = [], orderBy = 'id'): Promise<string[]> {
    const rows = await t.sql<{ id: string }>(`select id from data.item where ${sqlWhere} order by ${orderBy}`, params);
    return rows.map((r) => r.id);
  }

  async function count(table: string): Promise<number> {
    const [row] = await t.sql<{ count: string }>(`select count(*) from data.${table}`);
    return Number(row.count);
  }

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'maker', [fieldSpec('name', 'text', { required: true })]);
    await t.http
      .post('/api/v1/objects')
      .set(asAdmin(t))
      .send({ name: 'gadget', label: 'Gadget', fields: GADGET_FIELDS })
      .expect(201);
    makerId = idOf(await t.http.post('/api/v1/objects/maker/records').set(asAdmin(t)).send({ name: 'Acme' }).expect(201));

    await createObject(t, 'item', [
      fieldSpec('name', 'text'),
      fieldSpec('amount', 'number'),
      fieldSpec('qty', 'integer', { label: 'Quantity' }),
      fieldSpec('category', 'select', { options: ['a', 'b', 'c'] }),
      fieldSpec('flags', 'multiselect', { options: ['x', 'y', 'z'] }),
      fieldSpec('active', 'boolean'),
      fieldSpec('day', 'date'),
      fieldSpec('at', 'datetime'),
    ]);
    for (let start = 0; start < 60; start += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, k) =>
          t.http
            .post('/api/v1/objects/item/records')
            .set(asAdmin(t))
            .send(itemRecord(start + k))
            .expect(201),
        ),
      );
    }
  });
  afterAll(() => t.close());

  describe('create, read, update, delete', () => {
    const full = () => ({
      title: 'Widget',
      contact_email: 'sales@widget.example',
      homepage: 'https://widget.example/products?id=1',
      weight: 1.25,
      price: 19.99,
      quantity: 3,
      active: true,
      released_on: '2024-03-31',
      launched_at: '2024-03-31T14:30:00+02:00',
      status: 'live',
      tags: ['red', 'blue'],
      maker: makerId,
      specs: { size: { w: 10, h: 20 }, colors: ['red', 'blue'], note: null },
    });

    it('creates a record with every field type and returns it with id and timestamps (201)', async () => {
      const res = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send(full()).expect(201);

      expect(res.body).toEqual({
        ...full(),
        id: match.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
        created_at: match.any(String),
        updated_at: match.any(String),
        // The write's change set, also in the Change-Set-Id header.
        changeSetId: res.headers['change-set-id'],
        launched_at: '2024-03-31T12:30:00.000Z',
      });
      expect(Number.isNaN(Date.parse(bodyOf<{ created_at: string }>(res).created_at))).toBe(false);

      const [row] = await t.sql<Row>(
        `select title, contact_email, homepage, weight, price::text as price, quantity::text as quantity, active,
                released_on::text as released_on, launched_at = '2024-03-31T12:30:00Z'::timestamptz as launched_ok,
                status, tags, maker::text as maker, specs
           from data.gadget where id = $1`,
        [idOf(res)],
      );
      expect(row).toEqual({
        title: 'Widget',
        contact_email: 'sales@widget.example',
        homepage: 'https://widget.example/products?id=1',
        weight: 1.25,
        price: '19.99',
        quantity: '3',
        active: true,
        released_on: '2024-03-31',
        launched_ok: true,
        status: 'live',
        tags: ['red', 'blue'],
        maker: makerId,
        specs: { size: { w: 10, h: 20 }, colors: ['red', 'blue'], note: null },
      });
    });

    it('reads a record by id exactly as it was returned on create', async () => {
      const created = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ ...full(), contact_email: 'read@widget.example' })
        .expect(201);
      const res = await t.http
        .get(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .expect(200);
      // A read is the record alone: the change set belongs to the write's answer.
      const { changeSetId, ...record } = bodyOf<RecordBody>(created);
      expect(typeof changeSetId).toBe('string');
      expect(res.body).toEqual(record);
    });

    it('stores omitted optional fields as null', async () => {
      const res = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ title: 'Bare' }).expect(201);
      for (const field of GADGET_FIELDS.filter((f) => f.name !== 'title')) expect(bodyOf<RecordBody>(res)[field.name]).toBeNull();
    });

    it('patches only the given fields, clears a field set to null, and returns the record (200)', async () => {
      const created = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ ...full(), contact_email: 'patch@widget.example' })
        .expect(201);

      const res = await t.http
        .patch(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .send({ status: 'retired', price: 5, tags: ['green'], homepage: null })
        .expect(200);

      expect(res.body).toEqual({
        ...bodyOf<RecordBody>(created),
        changeSetId: res.headers['change-set-id'],
        status: 'retired',
        price: 5,
        tags: ['green'],
        homepage: null,
        updated_at: match.any(String),
      });
      const again = await t.http
        .get(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .expect(200);
      const { changeSetId, ...updated } = bodyOf<RecordBody>(res);
      expect(changeSetId).toBe(res.headers['change-set-id']);
      expect(again.body).toEqual(updated);
    });

    it('deletes a record (204), after which it is 404 record_not_found', async () => {
      const created = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'Short-lived' })
        .expect(201);

      await t.http
        .delete(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .expect(204);

      const res = await t.http
        .get(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .expect(404);
      expect(errorOf(res).code).toBe('record_not_found');
      expect(await t.sql('select 1 from data.gadget where id = $1', [idOf(created)])).toEqual([]);
      const again = await t.http
        .delete(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .expect(404);
      expect(errorOf(again).code).toBe('record_not_found');
    });

    it('keeps a client-chosen id and answers 409 unique_violation for a taken one', async () => {
      const id = 'a1b2c3d4-0000-4000-8000-000000000001';
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ id, title: 'Chosen id' })
        .expect(201);
      expect(idOf(res)).toBe(id);
      const dup = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ id, title: 'Same id' }).expect(409);
      expect(dup.body).toMatchObject({ code: 'unique_violation', details: { field: 'id' } });
    });

    it.each([
      ['an unknown id', UNKNOWN_ID],
      ['a malformed id', 'not-an-id'],
      ['a numeric id', '42'],
    ])('answers 404 record_not_found to get, patch and delete of %s', async (_case, id) => {
      const responses = [
        await t.http.get(`/api/v1/objects/gadget/records/${id}`).set(asAdmin(t)),
        await t.http.patch(`/api/v1/objects/gadget/records/${id}`).set(asAdmin(t)).send({ title: 'x' }),
        await t.http.delete(`/api/v1/objects/gadget/records/${id}`).set(asAdmin(t)),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual(Array(3).fill([404, 'record_not_found']));
    });

    it('answers 404 object_not_found for records of an unknown object', async () => {
      const responses = [
        await t.http.get('/api/v1/objects/nope/records').set(asAdmin(t)),
        await t.http.post('/api/v1/objects/nope/records').set(asAdmin(t)).send({ title: 'x' }),
        await t.http.get(`/api/v1/objects/nope/records/${UNKNOWN_ID}`).set(asAdmin(t)),
        await t.http
          .post('/api/v1/objects/nope/aggregate')
          .set(asAdmin(t))
          .send({ aggregations: [{ function: 'count', alias: 'n' }] }),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual(Array(4).fill([404, 'object_not_found']));
    });
  });

  describe('write validation', () => {
    it('refuses a record without a required field with 400 missing_required_field naming it', async () => {
      const before = await count('gadget');
      const res = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ price: 1 }).expect(400);
      expect(res.body).toMatchObject({ code: 'missing_required_field', details: { fields: ['title'] } });
      expect(errorOf(res).error).toContain('title');
      const nulled = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ title: null }).expect(400);
      expect(nulled.body).toMatchObject({ code: 'missing_required_field', details: { fields: ['title'] } });
      expect(await count('gadget')).toBe(before);
    });

    it('refuses to clear a required field in a patch', async () => {
      const created = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ title: 'Keep me' }).expect(201);
      const res = await t.http
        .patch(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .send({ title: null })
        .expect(400);
      expect(errorOf(res).code).toBe('missing_required_field');
      const [row] = await t.sql<{ title: string }>('select title from data.gadget where id = $1', [idOf(created)]);
      expect(row.title).toBe('Keep me');
    });

    it.each([
      ['title', 42],
      ['title', { text: 'x' }],
      ['contact_email', 'not-an-email'],
      ['homepage', 'ftp://files.example'],
      ['homepage', 'javascript:alert(1)'],
      ['weight', '1.5'],
      ['weight', true],
      ['price', '19.99'],
      ['price', 1e16],
      ['quantity', 1.5],
      ['quantity', '3'],
      ['active', 'yes'],
      ['active', 1],
      ['released_on', '2024-02-30'],
      ['released_on', '31.03.2024'],
      ['launched_at', 'yesterday'],
      ['launched_at', '2024-13-01T00:00:00Z'],
      ['status', 'archived'],
      ['status', 'LIVE'],
      ['tags', ['purple']],
      ['tags', 'red'],
      ['maker', 'not-a-uuid'],
      ['maker', 17],
    ])('refuses %s = %j with 400 invalid_value naming the field', async (field, value) => {
      const before = await count('gadget');
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'Typed', [field]: value })
        .expect(400);
      expect(res.body).toMatchObject({ code: 'invalid_value', details: { field } });
      expect(errorOf(res).error).toContain(field);
      expect(await count('gadget')).toBe(before);
    });

    it('lists the allowed options when a select value is not one of them', async () => {
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'x', status: 'archived' })
        .expect(400);
      expect(errorOf<{ options: string[] }>(res).details.options).toEqual(['draft', 'live', 'retired']);
    });

    it('refuses a lookup to a nonexistent record with 400 invalid_reference naming the field', async () => {
      const before = await count('gadget');
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'Orphan', maker: UNKNOWN_ID })
        .expect(400);
      expect(res.body).toMatchObject({ code: 'invalid_reference', details: { field: 'maker' } });
      expect(errorOf(res).error).toContain('maker');
      expect(await count('gadget')).toBe(before);

      const created = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'Linked', maker: makerId })
        .expect(201);
      const patch = await t.http
        .patch(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .send({ maker: UNKNOWN_ID })
        .expect(400);
      expect(patch.body).toMatchObject({ code: 'invalid_reference', details: { field: 'maker' } });
    });

    it('answers 409 unique_violation naming the field on insert and on update', async () => {
      await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'First', contact_email: 'unique@widget.example' })
        .expect(201);
      const second = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'Second', contact_email: 'other@widget.example' })
        .expect(201);

      const insert = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'Copy', contact_email: 'unique@widget.example' })
        .expect(409);
      expect(insert.body).toMatchObject({ code: 'unique_violation', details: { field: 'contact_email' } });
      const update = await t.http
        .patch(`/api/v1/objects/gadget/records/${idOf(second)}`)
        .set(asAdmin(t))
        .send({ contact_email: 'unique@widget.example' })
        .expect(409);
      expect(update.body).toMatchObject({ code: 'unique_violation', details: { field: 'contact_email' } });

      const rows = await t.sql(`select 1 from data.gadget where contact_email = 'unique@widget.example'`);
      expect(rows).toHaveLength(1);
    });

    it('clears the lookups that point to a deleted record, and points them back when it comes out of the trash', async () => {
      const maker = idOf(
        await t.http.post('/api/v1/objects/maker/records').set(asAdmin(t)).send({ name: 'Referenced Inc' }).expect(201),
      );
      const gadget = idOf(
        await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ title: 'Points to maker', maker }).expect(201),
      );
      const deleted = await t.http.delete(`/api/v1/objects/maker/records/${maker}`).set(asAdmin(t)).expect(204);
      const read = async () =>
        bodyOf<RecordBody>(await t.http.get(`/api/v1/objects/gadget/records/${gadget}`).set(asAdmin(t)).expect(200));
      expect((await read()).maker).toBeNull();
      // One change set: the delete and the lookup it cleared.
      const cleared = bodyOf<{ versions: Array<{ changeSetId: string; changes: Record<string, unknown> }> }>(
        await t.http.get(`/api/v1/objects/gadget/records/${gadget}/history`).set(asAdmin(t)).expect(200),
      ).versions[0];
      expect(cleared).toMatchObject({
        changeSetId: deleted.headers['change-set-id'],
        changes: { maker: { before: maker, after: null } },
      });
      await t.http.post(`/api/v1/objects/maker/trash/${maker}/restore`).set(asAdmin(t)).expect(200);
      expect((await read()).maker).toBe(maker);
    });

    it('answers 409 record_referenced when deleting a record a required lookup points to, and keeps it', async () => {
      await createObject(t, 'owner', [fieldSpec('name', 'text')]);
      await createObject(t, 'pet', [fieldSpec('owner', 'lookup', { reference: 'owner', required: true })]);
      const owner = idOf(await t.http.post('/api/v1/objects/owner/records').set(asAdmin(t)).send({ name: 'Ann' }).expect(201));
      const pet = idOf(await t.http.post('/api/v1/objects/pet/records').set(asAdmin(t)).send({ owner }).expect(201));
      const res = await t.http.delete(`/api/v1/objects/owner/records/${owner}`).set(asAdmin(t)).expect(409);
      expect(errorOf(res).code).toBe('record_referenced');
      await t.http.get(`/api/v1/objects/owner/records/${owner}`).set(asAdmin(t)).expect(200);
      await t.http.delete(`/api/v1/objects/pet/records/${pet}`).set(asAdmin(t)).expect(204);
      await t.http.delete(`/api/v1/objects/owner/records/${owner}`).set(asAdmin(t)).expect(204);
    });

    it('deletes a record its own object points to (a parent folder): the child reads null until the parent comes back', async () => {
      await createObject(t, 'folder', [fieldSpec('parent', 'lookup', { reference: 'folder' })]);
      const root = idOf(await t.http.post('/api/v1/objects/folder/records').set(asAdmin(t)).send({}).expect(201));
      const child = idOf(await t.http.post('/api/v1/objects/folder/records').set(asAdmin(t)).send({ parent: root }).expect(201));
      const deleted = await t.http.delete(`/api/v1/objects/folder/records/${root}`).set(asAdmin(t)).expect(204);
      const parentOf = async () =>
        bodyOf<RecordBody>(await t.http.get(`/api/v1/objects/folder/records/${child}`).set(asAdmin(t)).expect(200)).parent;
      expect(await parentOf()).toBeNull();
      // Reverting the delete's change set brings the parent back and points the child to it again.
      await t.http.post(`/api/v1/change-sets/${deleted.headers['change-set-id']}/revert`).set(asAdmin(t)).expect(200);
      expect(await parentOf()).toBe(root);
    });

    it('refuses unknown fields with 400 unknown_field listing the available fields', async () => {
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'x', colour: 'red' })
        .expect(400);
      expect(errorOf(res).code).toBe('unknown_field');
      expect(errorOf<{ availableFields: string[] }>(res).details.availableFields).toEqual(
        expect.arrayContaining(['id', 'title', 'price', 'maker']),
      );
      const created = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ title: 'y' }).expect(201);
      const patch = await t.http
        .patch(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .send({ colour: 'red' })
        .expect(400);
      expect(errorOf(patch).code).toBe('unknown_field');
    });

    it.each([['created_at'], ['updated_at']])('refuses to write the system field %s with 400 read_only_field', async (field) => {
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'x', [field]: '2020-01-01T00:00:00Z' })
        .expect(400);
      expect(errorOf(res).code).toBe('read_only_field');
    });

    it('refuses to change a record id with 400 read_only_field', async () => {
      const created = await t.http.post('/api/v1/objects/gadget/records').set(asAdmin(t)).send({ title: 'Fixed id' }).expect(201);
      const res = await t.http
        .patch(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .send({ id: UNKNOWN_ID })
        .expect(400);
      expect(errorOf(res).code).toBe('read_only_field');
    });

    it('refuses an empty patch with 400 invalid_record', async () => {
      const created = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .send({ title: 'Nothing to do' })
        .expect(201);
      const res = await t.http
        .patch(`/api/v1/objects/gadget/records/${idOf(created)}`)
        .set(asAdmin(t))
        .send({})
        .expect(400);
      expect(errorOf(res).code).toBe('invalid_record');
    });

    it.each([['[]'], ['"a string"'], ['42'], ['null']])('refuses the JSON body %s with 400 invalid_record', async (raw) => {
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .set('content-type', 'application/json')
        .send(raw)
        .expect(400);
      expect(errorOf(res).code).toBe('invalid_record');
    });

    it('refuses malformed JSON with 400 invalid_json', async () => {
      const res = await t.http
        .post('/api/v1/objects/gadget/records')
        .set(asAdmin(t))
        .set('content-type', 'application/json')
        .send('{"title": "x",}')
        .expect(400);
      expect(errorOf(res).code).toBe('invalid_json');
    });
  });

  describe('listing', () => {
    it('returns records, total, limit and offset with the default limit of 50', async () => {
      const res = await list('item').expect(200);
      expect(res.body).toMatchObject({ total: 60, limit: 50, offset: 0 });
      expect(bodyOf<RecordPage>(res).records).toHaveLength(50);
      expect(Object.keys(bodyOf<RecordPage>(res).records[0])).toEqual([
        'id',
        'created_at',
        'updated_at',
        'name',
        'amount',
        'qty',
        'category',
        'flags',
        'active',
        'day',
        'at',
      ]);
    });

    it('orders by id when no orderBy is given', async () => {
      const res = await list('item', { limit: 1000 }).expect(200);
      expect(ids(bodyOf<RecordPage>(res).records)).toEqual(await sqlIds('true', [], 'id'));
    });

    it('clamps a limit above 1000 to 1000', async () => {
      const res = await list('item', { limit: '5000' }).expect(200);
      expect(res.body).toMatchObject({ limit: 1000, total: 60 });
      expect(bodyOf<RecordPage>(res).records).toHaveLength(60);
    });

    it.each([
      ['limit=0', { limit: '0' }],
      ['limit=abc', { limit: 'abc' }],
      ['limit=-5', { limit: '-5' }],
      ['limit=2.5', { limit: '2.5' }],
      ['offset=abc', { offset: 'abc' }],
      ['offset=-1', { offset: '-1' }],
      ['an unknown query parameter', { sort: 'name' }],
    ])('refuses %s with 400 validation_failed', async (_case, query) => {
      const res = await list('item', query).expect(400);
      expect(errorOf(res).code).toBe('validation_failed');
    });

    it('reports the real total on a page past the end', async () => {
      const res = await list('item', { offset: '500', where: { active: true } }).expect(200);
      expect(res.body).toMatchObject({ records: [], total: 30, offset: 500 });
    });

    it('gives a total equal to a direct SQL count of the same filter, whatever the page size', async () => {
      const res = await list('item', { where: { active: true, amount: { $gt: 30 } }, limit: '3' }).expect(200);
      const [{ count: expected }] = await t.sql<{ count: string }>('select count(*) from data.item where active and amount > 30');
      expect(bodyOf<RecordPage>(res).total).toBe(Number(expected));
      expect(bodyOf<RecordPage>(res).records).toHaveLength(3);
    });

    it('pages stably: pages concatenated equal one full ordered scan, without duplicates, even with ties', async () => {
      for (const orderBy of [[{ field: 'category' }], [{ field: 'qty', order: 'desc' }, { field: 'active' }], undefined]) {
        const full = await list('item', { limit: '1000', ...(orderBy ? { orderBy } : {}) }).expect(200);
        const paged: string[] = [];
        for (let offset = 0; ; offset += 7) {
          const page = await list('item', { limit: '7', offset: String(offset), ...(orderBy ? { orderBy } : {}) }).expect(200);
          expect(bodyOf<RecordPage>(page).total).toBe(60);
          if (bodyOf<RecordPage>(page).records.length === 0) break;
          paged.push(...ids(bodyOf<RecordPage>(page).records));
        }
        expect(paged).toEqual(ids(bodyOf<RecordPage>(full).records));
        expect(new Set(paged).size).toBe(60);
      }
    });

    it('sorts by orderBy with nulls last and id as the final tiebreaker, like SQL does', async () => {
      const desc = await list('item', { orderBy: [{ field: 'amount', order: 'desc' }], limit: '1000' }).expect(200);
      expect(ids(bodyOf<RecordPage>(desc).records)).toEqual(await sqlIds('true', [], 'amount desc nulls last, id'));
      expect(bodyOf<RecordPage>(desc).records.at(-1)!.amount).toBeNull();

      const multi = await list('item', {
        orderBy: [
          { field: 'category', order: 'asc' },
          { field: 'name', order: 'DESC' },
        ],
        limit: '1000',
      }).expect(200);
      expect(ids(bodyOf<RecordPage>(multi).records)).toEqual(
        await sqlIds('true', [], 'category asc nulls last, name desc nulls last, id'),
      );
    });

    it('projects the requested fields, always with id first', async () => {
      const res = await list('item', { fields: 'name,amount', limit: '5' }).expect(200);
      for (const record of bodyOf<RecordPage>(res).records) expect(Object.keys(record)).toEqual(['id', 'name', 'amount']);
      const dup = await list('item', { fields: 'qty, id ,qty', limit: '1' }).expect(200);
      expect(Object.keys(bodyOf<RecordPage>(dup).records[0])).toEqual(['id', 'qty']);
    });

    it.each([
      ['where', { where: { colour: 'red' } }],
      ['a nested where', { where: { $or: [{ name: 'x' }, { $not: { colour: 'red' } }] } }],
      ['orderBy', { orderBy: [{ field: 'colour' }] }],
      ['fields', { fields: 'name,colour' }],
    ])('answers an unknown field in %s with 400 unknown_field and the available fields', async (_case, query) => {
      const res = await list('item', query).expect(400);
      expect(errorOf(res).code).toBe('unknown_field');
      expect(errorOf(res).details).toMatchObject({ field: 'colour' });
      expect(errorOf<{ availableFields: string[] }>(res).details.availableFields).toEqual([
        'id',
        'created_at',
        'updated_at',
        'name',
        'amount',
        'qty',
        'category',
        'flags',
        'active',
        'day',
        'at',
      ]);
    });

    it.each([
      ['an unknown field operator', { amount: { $like: 5 } }, 'unknown_field'],
      ['an operator without $', { amount: { gt: 5 } }, 'unknown_field'],
      ['an unknown top-level operator', { $xor: [{ qty: 1 }] }, 'unknown_field'],
      ['a field operator at top level', { $gt: 5 }, 'unknown_field'],
      ['$contains on a number', { amount: { $contains: '5' } }, 'invalid_operator'],
      ['$gt on a boolean', { active: { $gt: false } }, 'invalid_operator'],
      ['a string for a number', { amount: { $gt: 'ten' } }, 'invalid_value'],
      ['an unknown option', { category: 'zzz' }, 'invalid_value'],
      ['$between with one bound', { amount: { $between: [1] } }, 'invalid_value'],
      ['$null with a string', { amount: { $null: 'yes' } }, 'invalid_value'],
      ['$in with a scalar', { qty: { $in: 3 } }, 'invalid_value'],
      ['an empty $or', { $or: [] }, 'invalid_where'],
      ['an array as where', [{ qty: 1 }], 'invalid_where'],
    ])('answers %s with 400 %s', async (label, where, code) => {
      const res = await list('item', { where }).expect(400);
      expect(errorOf(res).code).toBe(code);
      if (code === 'unknown_field')
        expect(errorOf<{ availableFields: string[] }>(res).details.availableFields).toEqual(
          expect.arrayContaining(['id', 'amount', 'qty']),
        );
      if (label.includes('operator'))
        expect(errorOf<{ availableOperators: string[] }>(res).details.availableOperators).toEqual(expect.any(Array));
    });

    it('refuses $in with more than 1,000 values with 400 too_many_values', async () => {
      const values = Array.from({ length: 1001 }, (_, i) => i);
      const res = await t.http
        .get('/api/v1/objects/item/records')
        .query({ where: JSON.stringify({ qty: { $in: values } }) })
        .set(asAdmin(t))
        .expect(400);
      expect(res.body).toMatchObject({ code: 'too_many_values', details: { max: 1000 } });
      const ok = await t.http
        .get('/api/v1/objects/item/records')
        .query({ where: JSON.stringify({ qty: { $in: values.slice(0, 1000) } }) })
        .set(asAdmin(t))
        .expect(200);
      expect(bodyOf<RecordPage>(ok).total).toBe(60);
    });

    it.each([
      ['where', 'invalid_where'],
      ['orderBy', 'invalid_order_by'],
    ])('answers malformed JSON in %s with 400 %s', async (param, code) => {
      const res = await list('item', { [param]: '{"qty": ' }).expect(400);
      expect(errorOf(res).code).toBe(code);
    });

    it.each([
      ['"desc" without field', [{ order: 'desc' }]],
      ['an unknown direction', [{ field: 'qty', order: 'up' }]],
      ['a misspelled key', [{ field: 'qty', direction: 'desc' }]],
      ['a multiselect field', [{ field: 'flags' }]],
      ['the same field twice', [{ field: 'qty' }, { field: 'qty', order: 'desc' }]],
    ])('answers an orderBy with %s with 400 invalid_order_by', async (_case, orderBy) => {
      const res = await list('item', { orderBy }).expect(400);
      expect(errorOf(res).code).toBe('invalid_order_by');
    });
  });

  describe('where operators match the same rows as SQL', () => {
    it.each<[string, unknown, string, unknown[]?]>([
      ['equality shorthand', { category: 'a' }, `category = 'a'`],
      ['$eq', { qty: { $eq: 3 } }, 'qty = 3'],
      ['null shorthand', { category: null }, 'category is null'],
      ['$ne (keeps nulls)', { category: { $ne: 'a' } }, `category is distinct from 'a'`],
      ['$gt', { amount: { $gt: 50.5 } }, 'amount > 50.5'],
      ['$gte', { amount: { $gte: 50.5 } }, 'amount >= 50.5'],
      ['$lt', { amount: { $lt: 20 } }, 'amount < 20'],
      ['$lte', { amount: { $lte: 20.5 } }, 'amount <= 20.5'],
      ['two operators on one field', { amount: { $gt: 10, $lt: 40 } }, 'amount > 10 and amount < 40'],
      ['$between (inclusive)', { amount: { $between: [22.5, 59.5] } }, 'amount between 22.5 and 59.5'],
      ['$in', { category: { $in: ['a', 'c'] } }, `category in ('a', 'c')`],
      ['$in with null', { category: { $in: ['b', null] } }, `(category = 'b' or category is null)`],
      ['$nin (keeps nulls)', { qty: { $nin: [0, 1] } }, 'qty not in (0, 1)'],
      ['$nin on a nullable field', { category: { $nin: ['a'] } }, `(category is null or category <> 'a')`],
      ['$contains (case-insensitive)', { name: { $contains: 'ITEM 0' } }, `name ilike '%item 0%'`],
      ['$contains with a literal %', { name: { $contains: '100%' } }, `strpos(name, '100%') > 0`],
      ['$contains with a literal _', { name: { $contains: '_' } }, `strpos(name, '_') > 0`],
      ['$notContains', { name: { $notContains: 'item 1' } }, `name not ilike '%item 1%'`],
      ['$startsWith', { name: { $startsWith: 'item 2' } }, `name ilike 'item 2%'`],
      ['$endsWith', { name: { $endsWith: '7' } }, `name like '%7'`],
      ['$null: true', { amount: { $null: true } }, 'amount is null'],
      ['$null: false', { amount: { $null: false } }, 'amount is not null'],
      ['boolean equality', { active: false }, 'not active'],
      ['date $gte', { day: { $gte: '2024-01-20' } }, `day >= '2024-01-20'`],
      ['datetime $lt with an offset', { at: { $lt: '2024-01-02T02:00:00+02:00' } }, `at < '2024-01-02T00:00:00Z'`],
      ['multiselect $contains', { flags: { $contains: 'z' } }, `flags @> '{z}'`],
      ['multiselect $in (any of)', { flags: { $in: ['y', 'x'] } }, `flags && '{x,y}'`],
      ['multiselect $eq (same set)', { flags: { $eq: ['z', 'y'] } }, `flags @> '{y,z}' and flags <@ '{y,z}'`],
      ['$and', { $and: [{ category: 'a' }, { qty: { $gte: 2 } }] }, `category = 'a' and qty >= 2`],
      ['$or', { $or: [{ category: 'c' }, { amount: { $null: true } }] }, `category = 'c' or amount is null`],
      ['$not (exact complement)', { $not: { category: 'a' } }, `not coalesce(category = 'a', false)`],
      [
        'nested combinators',
        { $and: [{ $or: [{ qty: 1 }, { qty: 2 }] }, { $not: { $or: [{ active: true }, { amount: { $lt: 30 } }] } }] },
        '(qty = 1 or qty = 2) and not coalesce(active or amount < 30, false)',
      ],
    ])('%s', async (_case, where, sqlWhere) => {
      const expected = await sqlIds(sqlWhere);
      expect(expected.length).toBeGreaterThan(0);
      expect(expected.length).toBeLessThan(60);

      const res = await list('item', { where, limit: '1000', fields: 'id' }).expect(200);

      expect(ids(bodyOf<RecordPage>(res).records).sort()).toEqual([...expected].sort());
      expect(bodyOf<RecordPage>(res).total).toBe(expected.length);
    });
  });

  describe('aggregate', () => {
    const aggregate = (body: unknown) =>
      t.http
        .post('/api/v1/objects/item/aggregate')
        .set(asAdmin(t))
        .send(body as object);

    it('computes count, sum, avg, min, max and count_distinct per group like SQL', async () => {
      const res = await aggregate({
        groupBy: ['category'],
        aggregations: [
          { function: 'count', alias: 'records' },
          { function: 'count', field: 'amount', alias: 'with_amount' },
          { function: 'sum', field: 'qty', alias: 'qty_sum' },
          { function: 'avg', field: 'amount', alias: 'amount_avg' },
          { function: 'min', field: 'day', alias: 'first_day' },
          { function: 'max', field: 'amount', alias: 'amount_max' },
          { function: 'count_distinct', field: 'qty', alias: 'qty_kinds' },
        ],
      }).expect(200);

      const expected = await t.sql<Row>(
        `select category, count(*)::int as records, count(amount)::int as with_amount, sum(qty)::int as qty_sum,
                avg(amount) as amount_avg, min(day)::text as first_day, max(amount) as amount_max, count(distinct qty)::int as qty_kinds
           from data.item group by category order by category asc nulls last`,
      );
      expect(bodyOf<AggregateResponse>(res).rows).toHaveLength(expected.length);
      bodyOf<AggregateResponse>(res).rows.forEach((row: Row, i: number) => {
        const { amount_avg, ...rest } = expected[i];
        expect(row).toEqual({ ...rest, amount_avg: match.any(Number) });
        expect(row.amount_avg as number).toBeCloseTo(amount_avg as number, 9);
      });
      expect(bodyOf<AggregateResponse>(res).rows.map((r: Row) => r.category)).toEqual(['a', 'b', 'c', null]);
    });

    it('aggregates without groupBy into one row, honouring where', async () => {
      const res = await aggregate({
        where: { active: true },
        aggregations: [
          { function: 'count', alias: 'n' },
          { function: 'sum', field: 'amount', alias: 'total' },
        ],
      }).expect(200);
      const [expected] = await t.sql<{ n: number; total: number }>(
        'select count(*)::int as n, sum(amount) as total from data.item where active',
      );
      expect(bodyOf<AggregateResponse>(res).rows).toEqual([{ n: expected.n, total: match.any(Number) }]);
      expect(bodyOf<AggregateResponse>(res).rows[0].total).toBeCloseTo(expected.total, 9);
    });

    it('orders groups by an aggregation alias and limits them (top N)', async () => {
      const res = await aggregate({
        groupBy: ['qty'],
        aggregations: [{ function: 'sum', field: 'amount', alias: 'total' }],
        orderBy: [{ field: 'total', order: 'desc' }],
        limit: 2,
      }).expect(200);
      const expected = await t.sql<{ qty: string; total: number }>(
        'select qty, sum(amount) as total from data.item group by qty order by total desc nulls last, qty limit 2',
      );
      const { rows } = bodyOf<{ rows: Array<{ qty: number; total: number }> }>(res);
      expect(rows.map((r: Row) => r.qty)).toEqual(expected.map((r) => Number(r.qty)));
      expect(rows[0].total).toBeGreaterThan(rows[1].total);
    });

    it('names an unknown function in a 400 invalid_aggregate_function', async () => {
      const res = await aggregate({ aggregations: [{ function: 'median', field: 'amount', alias: 'm' }] }).expect(400);
      expect(errorOf(res).code).toBe('invalid_aggregate_function');
      expect(errorOf(res).error).toContain('median');
      expect(errorOf(res).details).toMatchObject({
        function: 'median',
        availableFunctions: ['count', 'sum', 'avg', 'min', 'max', 'count_distinct'],
      });
    });

    it.each([
      ['an unknown aggregation field', { aggregations: [{ function: 'sum', field: 'colour', alias: 's' }] }, 'unknown_field'],
      ['an unknown groupBy field', { groupBy: ['colour'], aggregations: [{ function: 'count', alias: 'n' }] }, 'unknown_field'],
      [
        'an orderBy that is neither alias nor group',
        { aggregations: [{ function: 'count', alias: 'n' }], orderBy: [{ field: 'qty' }] },
        'unknown_field',
      ],
      ['sum of a text field', { aggregations: [{ function: 'sum', field: 'name', alias: 's' }] }, 'invalid_aggregation'],
      ['sum without a field', { aggregations: [{ function: 'sum', alias: 's' }] }, 'invalid_aggregation'],
      ['an empty aggregation list', { aggregations: [] }, 'invalid_aggregation'],
      [
        'a duplicate alias',
        {
          aggregations: [
            { function: 'count', alias: 'n' },
            { function: 'sum', field: 'qty', alias: 'n' },
          ],
        },
        'invalid_aggregation',
      ],
      ['a missing alias', { aggregations: [{ function: 'count' }] }, 'invalid_aggregation'],
      ['missing aggregations', { groupBy: ['qty'] }, 'validation_failed'],
      ['an unknown body property', { aggregations: [{ function: 'count', alias: 'n' }], having: 'x' }, 'validation_failed'],
      ['a non-numeric limit', { aggregations: [{ function: 'count', alias: 'n' }], limit: 'all' }, 'validation_failed'],
      [
        'a bad orderBy direction',
        { groupBy: ['qty'], aggregations: [{ function: 'count', alias: 'n' }], orderBy: [{ field: 'n', order: 'sideways' }] },
        'invalid_order_by',
      ],
    ])('answers %s with 400 %s', async (_case, body, code) => {
      const res = await aggregate(body).expect(400);
      expect(errorOf(res).code).toBe(code);
    });

    it('lists the available fields when an aggregation names an unknown one', async () => {
      const res = await aggregate({ aggregations: [{ function: 'max', field: 'colour', alias: 'm' }] }).expect(400);
      expect(errorOf<{ availableFields: string[] }>(res).details.availableFields).toEqual(
        expect.arrayContaining(['amount', 'qty', 'day']),
      );
    });
  });
});

describe('offset page totals (RECORDS_COUNT_CAP=20)', () => {
  let t: TestApp;
  const ROWS = 300;
  const CAP = 20;

  const list = (query: Record<string, unknown>, key = t.adminKey) => {
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(query)) params[name] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get('/api/v1/objects/tally/records').query(params).set(bearer(key));
  };
  const pageOf = async (query: Record<string, unknown>, key?: string) => bodyOf<RecordPage>(await list(query, key).expect(200));

  beforeAll(async () => {
    t = await startTestApp({ env: { RECORDS_COUNT_CAP: String(CAP) } });
    await createObject(t, 'tally', [
      fieldSpec('n', 'integer'),
      fieldSpec('score', 'number', { indexed: true }),
      fieldSpec('code', 'email', { unique: true }),
      fieldSpec('team', 'text'),
    ]);
    // Fractional scores with ties and empty ones; codes empty on every third row; team "a" on the first 12.
    await t.sql(
      `insert into data.tally (n, score, code, team)
       select g, case when g % 9 = 0 then null else (g % 40) / 7.0 end,
              case when g % 3 = 0 then null else 'c' || g || '@x.io' end, case when g < 12 then 'a' else 'b' end
       from generate_series(0, ${ROWS - 1}) g`,
    );
    await t.sql('analyze data.tally');
  });
  afterAll(() => t.close());

  /** The planner's estimate of the rows of `where`, as PostgreSQL gives it for the same filter. */
  async function planRows(where: string): Promise<number> {
    const [row] = await t.sql<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }>(
      `explain (format json) select 1 from data.tally where ${where}`,
    );
    return row['QUERY PLAN'][0].Plan['Plan Rows'];
  }

  it('counts the total exactly up to the cap, with totalExact true', async () => {
    expect(await pageOf({ where: { n: { $lt: 15 } }, limit: '5' })).toMatchObject({ total: 15, totalExact: true });
    expect(await pageOf({ where: { n: { $lt: CAP } }, limit: '5', offset: '3' })).toMatchObject({
      total: CAP,
      totalExact: true,
    });
  });

  it('knows the total of a page that holds the last match without counting, above the cap too', async () => {
    const page = await pageOf({ where: { n: { $lt: 60 } }, limit: '100' });
    expect(page).toMatchObject({ total: 60, totalExact: true });
    expect(page.records).toHaveLength(60);
    expect(await pageOf({ where: { n: { $lt: 60 } }, limit: '50', offset: '50' })).toMatchObject({ total: 60, totalExact: true });
  });

  it("above the cap, gives the planner's estimate of the filter's rows, with totalExact false", async () => {
    const all = await pageOf({ limit: '5' });
    expect(all).toMatchObject({ total: Math.round(await planRows('true')), totalExact: false });
    expect(all.records).toHaveLength(5);
    const some = await pageOf({ where: { n: { $lt: 150 } }, limit: '5' });
    expect(some.totalExact).toBe(false);
    expect(some.total).toBe(Math.max(CAP + 1, Math.round(await planRows('n < 150'))));
    // A deep page shows more than the cap already: no count, an estimate at least as large as what it saw.
    const deep = await pageOf({ where: { n: { $lt: 150 } }, limit: '5', offset: '140' });
    expect(deep.totalExact).toBe(false);
    expect(deep.total).toBeGreaterThanOrEqual(146);
  });

  it('counts every match with ?total=exact', async () => {
    expect(await pageOf({ total: 'exact', limit: '5' })).toMatchObject({ total: ROWS, totalExact: true });
    expect(await pageOf({ total: 'exact', where: { n: { $lt: 150 } }, limit: '5' })).toMatchObject({
      total: 150,
      totalExact: true,
    });
  });

  it('counts nothing with ?total=none: neither total nor totalExact', async () => {
    const page = await pageOf({ total: 'none', limit: '5' });
    expect(page.records).toHaveLength(5);
    expect(page).not.toHaveProperty('total');
    expect(page).not.toHaveProperty('totalExact');
    expect(page.nextCursor).toEqual(expect.any(String));
  });

  it('has no total after a cursor, whatever ?total asks', async () => {
    const first = await pageOf({ limit: '5' });
    const next = await pageOf({ limit: '5', cursor: first.nextCursor!, total: 'exact' });
    expect(next.records).toHaveLength(5);
    expect(next).not.toHaveProperty('total');
    expect(next).not.toHaveProperty('totalExact');
  });

  it('refuses another ?total with 400 validation_failed', async () => {
    expect(errorOf(await list({ total: 'all' }).expect(400)).code).toBe('validation_failed');
  });

  it("counts only the rows of the caller's row filter, below and above the cap", async () => {
    await t.http
      .post('/api/v1/policies')
      .set(bearer(t.adminKey))
      .send({ name: 'one-team', objects: { tally: { read: true, rowFilter: { team: '$attr.team' } } } })
      .expect(201);
    const key = async (team: string) =>
      (await createApiKey(t, { name: `team ${team}`, role: 'member', policies: ['one-team'], attributes: { team } })).secret;
    const a = await key('a');
    // 12 rows of team a: counted exactly (every row would be 300, above the cap).
    expect(await pageOf({ limit: '5' }, a)).toMatchObject({ total: 12, totalExact: true });
    expect(await pageOf({ limit: '5', total: 'exact' }, a)).toMatchObject({ total: 12, totalExact: true });
    // 288 rows of team b: the estimate is of those, not of the whole table.
    const b = await pageOf({ limit: '5' }, await key('b'));
    expect(b).toMatchObject({ total: Math.round(await planRows(`team = 'b'`)), totalExact: false });
    expect(b.total).toBeLessThan(ROWS);
  });

  it('query_records counts the same way and says when its total is an estimate; hasMore comes from the rows', async () => {
    const run = async (args: Record<string, unknown>) => {
      const res = await t.http
        .post('/api/v1/ai/tools/query_records/execute')
        .set(bearer(t.adminKey))
        .send({ arguments: { objectName: 'tally', ...args } })
        .expect(200);
      return bodyOf<{ result: QueryRecordsResult; isError: boolean }>(res);
    };
    const below = await run({ where: { n: { $lt: 15 } }, limit: 5 });
    expect(below.result).toMatchObject({ count: 5, total: 15, totalExact: true, hasMore: true });
    const above = await run({ limit: 5 });
    expect(above.result).toMatchObject({ count: 5, total: Math.round(await planRows('true')), totalExact: false, hasMore: true });
    // The last page ends the matches: its total is exact without counting.
    const last = await run({ limit: 5, offset: ROWS - 5 });
    expect(last.result).toMatchObject({ count: 5, total: ROWS, totalExact: true, hasMore: false });
  });

  it.each([
    ['score descending (indexed, empty values last)', [{ field: 'score', order: 'desc' }], 'score desc nulls last, id'],
    ['code ascending (unique, empty values last)', [{ field: 'code' }], 'code asc, id'],
    ['code descending', [{ field: 'code', order: 'desc' }], 'code desc nulls last, id'],
  ])('pages by offset and by cursor through %s in SQL order, a page at a time', async (_, orderBy, sqlOrder) => {
    const expected = (await t.sql<{ id: string }>(`select id from data.tally order by ${sqlOrder}`)).map((r) => r.id);
    const byOffset: string[] = [];
    const byCursor: string[] = [];
    let cursor: string | undefined;
    for (let offset = 0; offset < ROWS; offset += 70) {
      const page = await pageOf({ orderBy, fields: 'n', limit: '70', offset: String(offset) });
      byOffset.push(...page.records.map((r) => String(r.id)));
      const next = await pageOf({ orderBy, fields: 'n', limit: '70', ...(cursor ? { cursor } : {}) });
      byCursor.push(...next.records.map((r) => String(r.id)));
      cursor = next.nextCursor ?? undefined;
    }
    expect(byOffset).toEqual(expected);
    expect(byCursor).toEqual(expected);
    expect(cursor).toBeUndefined();
  });
});
