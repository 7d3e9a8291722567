import type { FieldValuesResponse, RecordListResponse } from '../../src/records/records.dto';
import type { ObjectResponse } from '../../src/metadata/metadata.dto';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

/** GET /records?q= over searchable fields, and GET /fields/:field/values for filter drop-downs. */
describe('search and filter helpers', () => {
  let t: TestApp;
  let member: string;
  let scoped: string;

  const search = (key: string, query: Record<string, string>) =>
    t.http.get('/api/v1/objects/company/records').set(bearer(key)).query(query);
  const values = (key: string, field: string, query: Record<string, string> = {}) =>
    t.http.get(`/api/v1/objects/company/fields/${field}/values`).set(bearer(key)).query(query);
  const names = (res: { body: unknown }) => (res.body as RecordListResponse).records.map((r) => String(r.name)).sort();

  const COMPANIES = [
    { name: 'Café Crème', city: 'Paris', note: 'bakery', size: 10, tags: ['food'] },
    { name: 'CAFE MOKA', city: 'Lyon', note: 'coffee', size: 20, tags: ['food', 'retail'] },
    { name: 'Zürich Bank', city: 'Zürich', note: 'finance', size: 500, tags: ['finance'] },
    { name: 'Acme 100%', city: 'Paris', note: 'tools_and_more', size: 50, tags: [] },
    { name: 'Acme 1000', city: 'Berlin', note: 'café supplies', size: 5, tags: ['retail'] },
    { name: 'Nothing', city: null, note: null, size: 1, tags: ['retail'] },
  ];

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'company', [
      fieldSpec('name', 'text', { searchable: true }),
      fieldSpec('city', 'text', { searchable: true }),
      fieldSpec('note', 'textarea'),
      fieldSpec('size', 'integer'),
      fieldSpec('tags', 'multiselect', { options: ['food', 'retail', 'finance'] }),
    ]);
    const operations = COMPANIES.map((record) => ({ op: 'create', record }));
    await t.http.post('/api/v1/objects/company/records/batch').set(asAdmin(t)).send({ operations }).expect(200);
    member = (await createApiKey(t, { name: 'member', role: 'member' })).secret;
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'paris', objects: { company: { read: true, rowFilter: { city: 'Paris' }, hiddenFields: ['size'] } } })
      .expect(201);
    const key = await createApiKey(t, { name: 'paris', role: 'member' });
    scoped = key.secret;
    await t.http
      .patch(`/api/v1/api-keys/${key.id}`)
      .set(asAdmin(t))
      .send({ policies: ['paris'] })
      .expect(200);
  });
  afterAll(() => t.close());

  describe('searchable fields (metadata)', () => {
    it('shows searchable on fields and builds a trigram index over the folded text', async () => {
      const object = bodyOf<ObjectResponse>(await t.http.get('/api/v1/objects/company').set(asAdmin(t)).expect(200));
      expect(object.fields.map((f) => [f.name, f.searchable])).toEqual([
        ['name', true],
        ['city', true],
        ['note', false],
        ['size', false],
        ['tags', false],
      ]);
      const indexes = await t.sql<{ indexdef: string }>(
        `select indexdef from pg_indexes where schemaname = 'data' and tablename = 'company' and indexdef like '%gin_trgm_ops%'`,
      );
      expect(indexes.map((i) => i.indexdef).join('\n')).toMatch(/search_fold\(name\).*gin_trgm_ops/);
      expect(indexes).toHaveLength(2);
    });

    it('refuses searchable on a field that is not text-like with 400', async () => {
      const res = await t.http
        .patch('/api/v1/objects/company/fields/size')
        .set(asAdmin(t))
        .send({ searchable: true })
        .expect(400);
      expect(errorOf(res).code).toBe('invalid_searchable');
      const created = await t.http
        .post('/api/v1/objects/company/fields')
        .set(asAdmin(t))
        .send({ name: 'founded', label: 'Founded', type: 'date', searchable: true })
        .expect(400);
      expect(errorOf(created).code).toBe('invalid_searchable');
      expect((await t.http.patch('/api/v1/objects/company/fields/note').set(asAdmin(t)).send({ searchable: 'yes' })).status).toBe(
        400,
      );
    });

    it('turns searchable on and off with PATCH, with its index', async () => {
      await t.http.patch('/api/v1/objects/company/fields/note').set(asAdmin(t)).send({ searchable: true }).expect(200);
      expect(names(await search(member, { q: 'supplies' }).expect(200))).toEqual(['Acme 1000']);
      await t.http.patch('/api/v1/objects/company/fields/note').set(asAdmin(t)).send({ searchable: false }).expect(200);
      expect(names(await search(member, { q: 'supplies' }).expect(200))).toEqual([]);
      const indexes = await t.sql(
        `select 1 from pg_indexes where schemaname = 'data' and tablename = 'company' and indexdef like '%gin_trgm_ops%'`,
      );
      expect(indexes).toHaveLength(2);
    });
  });

  describe('GET /records?q=', () => {
    it('matches any searchable field, ignoring case and accents', async () => {
      expect(names(await search(member, { q: 'cafe' }).expect(200))).toEqual(['CAFE MOKA', 'Café Crème']);
      expect(names(await search(member, { q: 'CRÈME' }).expect(200))).toEqual(['Café Crème']);
      expect(names(await search(member, { q: 'zurich' }).expect(200))).toEqual(['Zürich Bank']);
      // City is searchable too; note (not searchable) is not searched.
      expect(names(await search(member, { q: 'paris' }).expect(200))).toEqual(['Acme 100%', 'Café Crème']);
      expect(names(await search(member, { q: 'bakery' }).expect(200))).toEqual([]);
    });

    it('takes % and _ literally', async () => {
      expect(names(await search(member, { q: '100%' }).expect(200))).toEqual(['Acme 100%']);
      expect(names(await search(member, { q: '_' }).expect(200))).toEqual([]);
      expect(names(await search(member, { q: "'; drop table x; --" }).expect(200))).toEqual([]);
    });

    it('is ANDed with where and with the caller’s row filter, and counts the total it matched', async () => {
      const res = await search(member, { q: 'acme', where: JSON.stringify({ size: { $gt: 10 } }) }).expect(200);
      expect(names(res)).toEqual(['Acme 100%']);
      expect((res.body as RecordListResponse).total).toBe(1);
      expect(names(await search(scoped, { q: 'a' }).expect(200))).toEqual(['Acme 100%', 'Café Crème']);
    });

    it('binds a cursor to its search text', async () => {
      const first = bodyOf<RecordListResponse>(await search(member, { q: 'a', limit: '1' }).expect(200));
      expect(first.nextCursor).toEqual(expect.any(String));
      await search(member, { q: 'a', limit: '1', cursor: first.nextCursor! }).expect(200);
      expect(errorOf(await search(member, { q: 'b', cursor: first.nextCursor! }).expect(400)).code).toBe('invalid_cursor');
    });

    it('refuses q on an object without searchable fields, and an overlong q, with 400', async () => {
      await createObject(t, 'plain', [fieldSpec('title', 'text')]);
      const res = await t.http.get('/api/v1/objects/plain/records').set(bearer(member)).query({ q: 'x' }).expect(400);
      expect(errorOf(res).code).toBe('search_not_available');
      expect(errorOf(res).error).toContain('no searchable field');
      expect((await search(member, { q: 'x'.repeat(201) })).status).toBe(400);
      expect(errorOf(await search(member, { q: 'a\u0000b' }).expect(400)).code).toBe('invalid_value');
      expect(errorOf(await values(member, 'city', { q: 'a\u0000b' }).expect(400)).code).toBe('invalid_value');
    });
  });

  describe('GET /fields/:field/values', () => {
    it('lists distinct values with counts, most frequent first, then by value, nulls last', async () => {
      const body = bodyOf<FieldValuesResponse>(await values(member, 'city').expect(200));
      expect(body.values).toEqual([
        { value: 'Paris', count: 2 },
        { value: 'Berlin', count: 1 },
        { value: 'Lyon', count: 1 },
        { value: 'Zürich', count: 1 },
        { value: null, count: 1 },
      ]);
    });

    it('counts each option of a multiselect and decodes typed values', async () => {
      expect(bodyOf<FieldValuesResponse>(await values(member, 'tags').expect(200)).values).toEqual([
        { value: 'retail', count: 3 },
        { value: 'food', count: 2 },
        { value: 'finance', count: 1 },
      ]);
      const sizes = bodyOf<FieldValuesResponse>(await values(member, 'size', { limit: '2' }).expect(200)).values;
      expect(sizes).toEqual([
        { value: 1, count: 1 },
        { value: 5, count: 1 },
      ]);
    });

    it('filters values by q (contains, ignoring case), where and view', async () => {
      expect(bodyOf<FieldValuesResponse>(await values(member, 'city', { q: 'ZÜ' }).expect(200)).values).toEqual([
        { value: 'Zürich', count: 1 },
      ]);
      expect(bodyOf<FieldValuesResponse>(await values(member, 'city', { q: '%' }).expect(200)).values).toEqual([]);
      const where = JSON.stringify({ size: { $lt: 50 } });
      expect(bodyOf<FieldValuesResponse>(await values(member, 'tags', { where }).expect(200)).values).toEqual([
        { value: 'retail', count: 3 },
        { value: 'food', count: 2 },
      ]);
      await t.http
        .post('/api/v1/objects/company/views')
        .set(bearer(member))
        .send({ name: 'small', label: 'Small', where: { size: { $lte: 10 } } })
        .expect(201);
      expect(bodyOf<FieldValuesResponse>(await values(member, 'city', { view: 'small' }).expect(200)).values).toEqual([
        { value: 'Berlin', count: 1 },
        { value: 'Paris', count: 1 },
        { value: null, count: 1 },
      ]);
      expect(errorOf(await values(member, 'city', { view: 'nope' }).expect(404)).code).toBe('view_not_found');
    });

    it('respects the caller’s policies: the row filter applies and a hidden field is unknown', async () => {
      expect(bodyOf<FieldValuesResponse>(await values(scoped, 'city').expect(200)).values).toEqual([
        { value: 'Paris', count: 2 },
      ]);
      expect(errorOf(await values(scoped, 'size').expect(400)).code).toBe('unknown_field');
    });

    it('refuses bad input with 400 and clamps a large limit', async () => {
      expect(errorOf(await values(member, 'nope').expect(400)).code).toBe('unknown_field');
      expect(errorOf(await values(member, 'city', { where: '{' }).expect(400)).code).toBe('invalid_where');
      expect((await values(member, 'city', { limit: '0' })).status).toBe(400);
      expect((await values(member, 'city', { limit: 'ten' })).status).toBe(400);
      expect((await values(member, 'city', { q: 'x'.repeat(201) })).status).toBe(400);
      expect(bodyOf<FieldValuesResponse>(await values(member, 'city', { limit: '100000' }).expect(200)).values).toHaveLength(5);
      expect(errorOf(await t.http.get('/api/v1/objects/nope/fields/x/values').set(bearer(member)).expect(404)).code).toBe(
        'object_not_found',
      );
    });
  });
});
