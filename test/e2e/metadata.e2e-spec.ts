import type { ObjectListResponse, ObjectResponse } from '../../src/metadata/metadata.dto';
import { match } from '../support/matchers';
import { bodyOf, errorOf, idOf, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey } from '../support/fixtures';

interface ColumnRow {
  column_name: string;
  data_type: string;
  udt_name: string;
  is_nullable: 'YES' | 'NO';
  numeric_precision: number | null;
  numeric_scale: number | null;
}

describe('metadata API', () => {
  let t: TestApp;
  let memberKey: string;

  const createObject = (body: unknown) =>
    t.http
      .post('/api/v1/objects')
      .set(asAdmin(t))
      .send(body as object);

  async function columns(table: string): Promise<Record<string, ColumnRow>> {
    const rows = await t.sql<ColumnRow>(
      `select column_name, data_type, udt_name, is_nullable, numeric_precision, numeric_scale
         from information_schema.columns where table_schema = 'data' and table_name = $1`,
      [table],
    );
    return Object.fromEntries(rows.map((r) => [r.column_name, r]));
  }

  async function tableExists(table: string): Promise<boolean> {
    const [row] = await t.sql<{ reg: string | null }>(`select to_regclass($1) as reg`, [`data.${table}`]);
    return row.reg !== null;
  }

  async function indexesOf(table: string): Promise<string[]> {
    const rows = await t.sql<{ indexdef: string }>(
      `select indexdef from pg_indexes where schemaname = 'data' and tablename = $1`,
      [table],
    );
    return rows.map((r) => r.indexdef);
  }

  async function definitionCounts(): Promise<{ objects: number; fields: number }> {
    const [row] = await t.sql<{ objects: string; fields: string }>(
      `select (select count(*) from object_definitions) as objects, (select count(*) from field_definitions) as fields`,
    );
    return { objects: Number(row.objects), fields: Number(row.fields) };
  }

  beforeAll(async () => {
    t = await startTestApp();
    memberKey = (await createApiKey(t, { name: 'member', role: 'member' })).secret;
    await createObject({
      name: 'company',
      label: 'Company',
      fields: [{ name: 'name', label: 'Name', type: 'text', required: true }],
    }).expect(201);
  });
  afterAll(() => t.close());

  describe('objects', () => {
    it('creates an object with a physical table holding one typed column per field', async () => {
      const res = await createObject({
        name: 'typed_thing',
        label: 'Typed thing',
        description: 'Every field type',
        fields: [
          { name: 'title', label: 'Title', type: 'text', required: true },
          { name: 'body', label: 'Body', type: 'textarea' },
          { name: 'contact_email', label: 'Email', type: 'email' },
          { name: 'homepage', label: 'Homepage', type: 'url' },
          { name: 'phone', label: 'Phone', type: 'phone' },
          { name: 'weight', label: 'Weight', type: 'number' },
          { name: 'price', label: 'Price', type: 'currency' },
          { name: 'share', label: 'Share', type: 'percent' },
          { name: 'quantity', label: 'Quantity', type: 'integer' },
          { name: 'active', label: 'Active', type: 'boolean' },
          { name: 'released_on', label: 'Released on', type: 'date' },
          { name: 'launched_at', label: 'Launched at', type: 'datetime' },
          { name: 'status', label: 'Status', type: 'select', options: ['draft', 'live'] },
          { name: 'tags', label: 'Tags', type: 'multiselect', options: ['red', 'blue'] },
          { name: 'company', label: 'Company', type: 'lookup', reference: 'company' },
          { name: 'specs', label: 'Specs', type: 'json' },
        ],
      }).expect(201);

      expect(res.body).toMatchObject({ name: 'typed_thing', label: 'Typed thing', description: 'Every field type' });
      expect(bodyOf<ObjectResponse>(res).fields.map((f: { name: string }) => f.name)).toEqual([
        'title',
        'body',
        'contact_email',
        'homepage',
        'phone',
        'weight',
        'price',
        'share',
        'quantity',
        'active',
        'released_on',
        'launched_at',
        'status',
        'tags',
        'company',
        'specs',
      ]);
      expect(bodyOf<ObjectResponse>(res).fields[0]).toMatchObject({
        name: 'title',
        label: 'Title',
        type: 'text',
        required: true,
        unique: false,
      });
      expect(bodyOf<ObjectResponse>(res).fields.find((f: { name: string }) => f.name === 'status')).toMatchObject({
        type: 'select',
        options: ['draft', 'live'],
      });
      expect(bodyOf<ObjectResponse>(res).fields.find((f: { name: string }) => f.name === 'company')).toMatchObject({
        type: 'lookup',
        reference: 'company',
      });

      const cols = await columns('typed_thing');
      const typeOf = (name: string) => [cols[name]?.data_type, cols[name]?.udt_name];
      expect(typeOf('id')).toEqual(['uuid', 'uuid']);
      expect(typeOf('created_at')).toEqual(['timestamp with time zone', 'timestamptz']);
      expect(typeOf('updated_at')).toEqual(['timestamp with time zone', 'timestamptz']);
      for (const name of ['title', 'body', 'contact_email', 'homepage', 'phone', 'status'])
        expect(typeOf(name)).toEqual(['text', 'text']);
      expect(typeOf('weight')).toEqual(['double precision', 'float8']);
      expect(typeOf('price')).toEqual(['numeric', 'numeric']);
      expect([cols.price.numeric_precision, cols.price.numeric_scale]).toEqual([18, 2]);
      expect(typeOf('share')).toEqual(['numeric', 'numeric']);
      expect(typeOf('quantity')).toEqual(['bigint', 'int8']);
      expect(typeOf('active')).toEqual(['boolean', 'bool']);
      expect(typeOf('released_on')).toEqual(['date', 'date']);
      expect(typeOf('launched_at')).toEqual(['timestamp with time zone', 'timestamptz']);
      expect(typeOf('tags')).toEqual(['ARRAY', '_text']);
      expect(typeOf('company')).toEqual(['uuid', 'uuid']);
      expect(typeOf('specs')).toEqual(['jsonb', 'jsonb']);
      expect(Object.keys(cols)).toHaveLength(19);
      expect(cols.title.is_nullable).toBe('NO');
      expect(cols.body.is_nullable).toBe('YES');

      const fks = await t.sql<{ def: string }>(
        `select pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'data.typed_thing'::regclass and contype = 'f'`,
      );
      expect(fks.map((f) => f.def)).toEqual([expect.stringMatching(/FOREIGN KEY \(company\) REFERENCES data\.company\(id\)/)]);
    });

    it('lists objects with label, description and field count', async () => {
      await createObject({
        name: 'listed',
        label: 'Listed',
        description: 'Shown in the list',
        fields: [
          { name: 'a', label: 'A', type: 'text' },
          { name: 'b', label: 'B', type: 'integer' },
        ],
      }).expect(201);

      const res = await t.http.get('/api/v1/objects').set(asAdmin(t)).expect(200);

      expect(bodyOf<ObjectListResponse>(res).objects).toEqual(
        expect.arrayContaining([
          { name: 'listed', label: 'Listed', description: 'Shown in the list', fieldCount: 2 },
          { name: 'company', label: 'Company', description: null, fieldCount: 1 },
        ]),
      );
      const names = bodyOf<ObjectListResponse>(res).objects.map((o: { name: string }) => o.name);
      expect(names).toEqual([...names].sort());
    });

    it('gets one object with its fields but without system columns', async () => {
      const res = await t.http.get('/api/v1/objects/company').set(bearer(memberKey)).expect(200);
      expect(res.body).toEqual({
        name: 'company',
        label: 'Company',
        description: null,
        fields: [{ name: 'name', label: 'Name', type: 'text', required: true, unique: false, indexed: false, searchable: false }],
      });
    });

    it('answers 404 object_not_found for an unknown object on get, patch and delete', async () => {
      const responses = [
        await t.http.get('/api/v1/objects/nothing_here').set(asAdmin(t)),
        await t.http.patch('/api/v1/objects/nothing_here').set(asAdmin(t)).send({ label: 'X' }),
        await t.http.delete('/api/v1/objects/nothing_here').set(asAdmin(t)),
        await t.http.post('/api/v1/objects/nothing_here/fields').set(asAdmin(t)).send({ name: 'a', label: 'A', type: 'text' }),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual(Array(4).fill([404, 'object_not_found']));
    });

    it('patches label and description and nothing else', async () => {
      await createObject({ name: 'patchable', label: 'Before', fields: [{ name: 'a', label: 'A', type: 'text' }] }).expect(201);

      const res = await t.http
        .patch('/api/v1/objects/patchable')
        .set(asAdmin(t))
        .send({ label: 'After', description: 'Now described' })
        .expect(200);

      expect(res.body).toMatchObject({
        name: 'patchable',
        label: 'After',
        description: 'Now described',
        fields: [expect.objectContaining({ name: 'a' })],
      });
      const again = await t.http.get('/api/v1/objects/patchable').set(asAdmin(t)).expect(200);
      expect(again.body).toMatchObject({ label: 'After', description: 'Now described' });
    });

    it.each([
      ['a rename', { name: 'renamed' }],
      ['a numeric label', { label: 5 }],
      ['an empty label', { label: '' }],
      ['an unknown property', { color: 'blue' }],
    ])('refuses %s in a patch with 400 validation_failed', async (_case, body) => {
      const res = await t.http.patch('/api/v1/objects/company').set(asAdmin(t)).send(body).expect(400);
      expect(errorOf(res).code).toBe('validation_failed');
      const again = await t.http.get('/api/v1/objects/company').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(again).label).toBe('Company');
    });

    it('deletes an object with its table and metadata', async () => {
      await createObject({ name: 'doomed', label: 'Doomed', fields: [{ name: 'a', label: 'A', type: 'text' }] }).expect(201);
      await t.http.post('/api/v1/objects/doomed/records').set(asAdmin(t)).send({ a: 'row' }).expect(201);
      expect(await tableExists('doomed')).toBe(true);

      await t.http.delete('/api/v1/objects/doomed').set(asAdmin(t)).expect(204);

      expect(await tableExists('doomed')).toBe(false);
      const res = await t.http.get('/api/v1/objects/doomed').set(asAdmin(t)).expect(404);
      expect(errorOf(res).code).toBe('object_not_found');
      const defs = await t.sql(`select 1 from object_definitions where name = 'doomed'`);
      expect(defs).toEqual([]);
      const orphans = await t.sql(
        `select 1 from field_definitions f where not exists (select 1 from object_definitions o where o.id = f.object_id)`,
      );
      expect(orphans).toEqual([]);
    });

    it('answers 409 object_exists for a duplicate object and keeps the original', async () => {
      const res = await createObject({
        name: 'company',
        label: 'Another company',
        fields: [{ name: 'other', label: 'Other', type: 'text' }],
      }).expect(409);
      expect(errorOf(res).code).toBe('object_exists');
      const cols = await columns('company');
      expect(Object.keys(cols).sort()).toEqual(['created_at', 'id', 'name', 'updated_at']);
      const again = await t.http.get('/api/v1/objects/company').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(again).label).toBe('Company');
    });

    it('answers 409 object_referenced when deleting an object another object looks up, and keeps both', async () => {
      await createObject({ name: 'parent_thing', label: 'Parent', fields: [{ name: 'a', label: 'A', type: 'text' }] }).expect(
        201,
      );
      await createObject({
        name: 'child_thing',
        label: 'Child',
        fields: [{ name: 'parent', label: 'Parent', type: 'lookup', reference: 'parent_thing' }],
      }).expect(201);

      const res = await t.http.delete('/api/v1/objects/parent_thing').set(asAdmin(t)).expect(409);

      expect(errorOf(res).code).toBe('object_referenced');
      expect(errorOf(res).details).toEqual({ referencedBy: [{ object: 'child_thing', field: 'parent' }] });
      expect(await tableExists('parent_thing')).toBe(true);
      await t.http.get('/api/v1/objects/parent_thing').set(asAdmin(t)).expect(200);

      // Once the lookup is gone, the delete goes through.
      await t.http.delete('/api/v1/objects/child_thing/fields/parent').set(asAdmin(t)).expect(204);
      await t.http.delete('/api/v1/objects/parent_thing').set(asAdmin(t)).expect(204);
      expect(await tableExists('parent_thing')).toBe(false);
    });

    it('deletes an object whose lookup references itself', async () => {
      await createObject({
        name: 'tree_node',
        label: 'Node',
        fields: [{ name: 'parent', label: 'Parent', type: 'lookup', reference: 'tree_node' }],
      }).expect(201);
      const root = await t.http.post('/api/v1/objects/tree_node/records').set(asAdmin(t)).send({}).expect(201);
      await t.http
        .post('/api/v1/objects/tree_node/records')
        .set(asAdmin(t))
        .send({ parent: idOf(root) })
        .expect(201);

      await t.http.delete('/api/v1/objects/tree_node').set(asAdmin(t)).expect(204);
      expect(await tableExists('tree_node')).toBe(false);
    });
  });

  describe('name and type validation', () => {
    it.each([
      ['uppercase', 'Deal', 'invalid_name'],
      ['a space', 'my deal', 'invalid_name'],
      ['64 characters', 'a'.repeat(64), 'invalid_name'],
      ['a leading digit', '1deal', 'invalid_name'],
      ['a leading underscore', '_deal', 'invalid_name'],
      ['a hyphen', 'my-deal', 'invalid_name'],
      ['SQL', 'drop table x;--', 'invalid_name'],
      ['a quote', 'deal"', 'invalid_name'],
      ['an empty name', '', 'invalid_name'],
      ['a reserved word', 'select', 'reserved_name'],
      ['another reserved word', 'table', 'reserved_name'],
      ['a pg_ prefix', 'pg_thing', 'reserved_name'],
    ])('refuses an object name with %s (400 %s) and creates nothing', async (_case, name, code) => {
      const before = await definitionCounts();
      const res = await createObject({ name, label: 'X', fields: [{ name: 'a', label: 'A', type: 'text' }] }).expect(400);
      expect(errorOf(res).code).toBe(code);
      expect(await definitionCounts()).toEqual(before);
    });

    it('accepts an object name of exactly 63 characters', async () => {
      const name = `o${'x'.repeat(62)}`;
      await createObject({ name, label: 'Long' }).expect(201);
      expect(await tableExists(name)).toBe(true);
    });

    it.each([
      ['uppercase', 'Amount', 'invalid_name'],
      ['a space', 'the amount', 'invalid_name'],
      ['64 characters', 'f'.repeat(64), 'invalid_name'],
      ['a leading digit', '2nd_amount', 'invalid_name'],
      ['SQL', 'drop table x;--', 'invalid_name'],
      ['the system column id', 'id', 'reserved_name'],
      ['the system column created_at', 'created_at', 'reserved_name'],
      ['the system column updated_at', 'updated_at', 'reserved_name'],
      ['a reserved word', 'select', 'reserved_name'],
      ['a system column of Postgres', 'ctid', 'reserved_name'],
    ])('refuses a field name with %s (400 %s) on create and on add, leaving no trace', async (_case, name, code) => {
      const before = await definitionCounts();
      const created = await createObject({
        name: 'bad_field_holder',
        label: 'X',
        fields: [{ name, label: 'F', type: 'text' }],
      }).expect(400);
      expect(errorOf(created).code).toBe(code);
      expect(await tableExists('bad_field_holder')).toBe(false);

      const added = await t.http
        .post('/api/v1/objects/company/fields')
        .set(asAdmin(t))
        .send({ name, label: 'F', type: 'text' })
        .expect(400);
      expect(errorOf(added).code).toBe(code);
      expect(await definitionCounts()).toEqual(before);
      expect(Object.keys(await columns('company')).sort()).toEqual(['created_at', 'id', 'name', 'updated_at']);
    });

    it.each([
      ['an unknown type', { name: 'f', label: 'F', type: 'money' }, 'validation_failed'],
      ['a select without options', { name: 'f', label: 'F', type: 'select' }, 'missing_options'],
      ['a select with empty options', { name: 'f', label: 'F', type: 'select', options: [] }, 'missing_options'],
      ['a multiselect without options', { name: 'f', label: 'F', type: 'multiselect' }, 'missing_options'],
      ['duplicate options', { name: 'f', label: 'F', type: 'select', options: ['a', 'a'] }, 'invalid_options'],
      ['options on a text field', { name: 'f', label: 'F', type: 'text', options: ['a'] }, 'unexpected_options'],
      ['a lookup without reference', { name: 'f', label: 'F', type: 'lookup' }, 'missing_reference'],
      ['a reference on a text field', { name: 'f', label: 'F', type: 'text', reference: 'company' }, 'unexpected_reference'],
      ['a unique json field', { name: 'f', label: 'F', type: 'json', unique: true }, 'invalid_unique'],
      ['a field without label', { name: 'f', type: 'text' }, 'validation_failed'],
      ['a numeric label', { name: 'f', label: 5, type: 'text' }, 'validation_failed'],
      ['required as a string', { name: 'f', label: 'F', type: 'text', required: 'yes' }, 'validation_failed'],
      ['options as a string', { name: 'f', label: 'F', type: 'select', options: 'a,b' }, 'validation_failed'],
      ['an unknown property', { name: 'f', label: 'F', type: 'text', default: 'x' }, 'validation_failed'],
    ])('refuses %s with 400 %s', async (_case, field, code) => {
      const before = await definitionCounts();
      const created = await createObject({ name: 'invalid_holder', label: 'X', fields: [field] }).expect(400);
      expect(errorOf(created).code).toBe(code);
      const added = await t.http.post('/api/v1/objects/company/fields').set(asAdmin(t)).send(field).expect(400);
      expect(errorOf(added).code).toBe(code);
      expect(await tableExists('invalid_holder')).toBe(false);
      expect(await definitionCounts()).toEqual(before);
    });

    it('refuses a field defined twice in one object with 400 duplicate_field', async () => {
      const res = await createObject({
        name: 'twice',
        label: 'Twice',
        fields: [
          { name: 'a', label: 'A', type: 'text' },
          { name: 'a', label: 'A again', type: 'integer' },
        ],
      }).expect(400);
      expect(errorOf(res).code).toBe('duplicate_field');
      expect(await tableExists('twice')).toBe(false);
    });

    it.each([
      ['a numeric label', { name: 'wrong_types', label: 5 }],
      ['a numeric name', { name: 42, label: 'X' }],
      ['fields that are not an array', { name: 'wrong_types', label: 'X', fields: { name: 'a' } }],
      ['a missing label', { name: 'wrong_types' }],
      ['an unknown property', { name: 'wrong_types', label: 'X', table: 'pg_catalog.pg_class' }],
    ])('refuses an object body with %s with 400 validation_failed', async (_case, body) => {
      const res = await createObject(body).expect(400);
      expect(res.body).toMatchObject({ code: 'validation_failed', error: match.any(String) });
      expect(await tableExists('wrong_types')).toBe(false);
    });

    it('refuses a null label in an object patch with 400 and keeps the label', async () => {
      const res = await t.http.patch('/api/v1/objects/company').set(asAdmin(t)).send({ label: null }).expect(400);
      expect(errorOf(res)).toMatchObject({ code: 'validation_failed', error: 'label must be a string' });
      expect(bodyOf<ObjectResponse>(await t.http.get('/api/v1/objects/company').set(asAdmin(t)).expect(200)).label).toBe(
        'Company',
      );
    });

    it.each([
      ['a label', { name: 'nul_label', label: 'A\u0000B' }],
      ['a description', { name: 'nul_description', label: 'X', description: 'a\u0000' }],
      ['a field label', { name: 'nul_field', label: 'X', fields: [{ name: 'a', label: '\u0000', type: 'text' }] }],
      [
        'an option',
        { name: 'nul_option', label: 'X', fields: [{ name: 'a', label: 'A', type: 'select', options: ['ok', 'b\u0000ad'] }] },
      ],
    ])('refuses a NUL character in %s with 400 validation_failed', async (_case, body) => {
      const res = await createObject(body).expect(400);
      expect(errorOf(res).code).toBe('validation_failed');
      expect(await tableExists(body.name)).toBe(false);
    });

    it('refuses malformed JSON with 400 invalid_json', async () => {
      const res = await t.http
        .post('/api/v1/objects')
        .set(asAdmin(t))
        .set('content-type', 'application/json')
        .send('{"name": "broken", "label": ')
        .expect(400);
      expect(errorOf(res).code).toBe('invalid_json');
      expect(await tableExists('broken')).toBe(false);
    });

    it('refuses a body that is JSON but not an object with 400', async () => {
      const res = await t.http
        .post('/api/v1/objects')
        .set(asAdmin(t))
        .set('content-type', 'application/json')
        .send('"account"')
        .expect(400);
      expect(errorOf(res).code).toEqual(expect.any(String));
    });
  });

  describe('a failed DDL leaves no half-created object behind', () => {
    it('rolls back an object whose lookup targets a missing object: 400 unknown_reference, no definition, no table', async () => {
      const before = await definitionCounts();

      const res = await createObject({
        name: 'half_made',
        label: 'Half made',
        fields: [
          { name: 'title', label: 'Title', type: 'text', required: true, unique: true },
          { name: 'owner', label: 'Owner', type: 'lookup', reference: 'does_not_exist' },
        ],
      }).expect(400);

      expect(errorOf(res).code).toBe('unknown_reference');
      expect(errorOf(res).error).toContain('does_not_exist');
      expect(await tableExists('half_made')).toBe(false);
      expect(await definitionCounts()).toEqual(before);
      await t.http.get('/api/v1/objects/half_made').set(asAdmin(t)).expect(404);
      const indexes = await t.sql(`select 1 from pg_indexes where schemaname = 'data' and tablename = 'half_made'`);
      expect(indexes).toEqual([]);

      // The name is free: the same object without the broken lookup is created normally.
      await createObject({
        name: 'half_made',
        label: 'Half made',
        fields: [{ name: 'title', label: 'Title', type: 'text' }],
      }).expect(201);
      expect(Object.keys(await columns('half_made')).sort()).toEqual(['created_at', 'id', 'title', 'updated_at']);
    });

    it('rolls back a lookup field added to an existing object when its target is missing', async () => {
      const before = await definitionCounts();
      const res = await t.http
        .post('/api/v1/objects/company/fields')
        .set(asAdmin(t))
        .send({ name: 'parent', label: 'Parent', type: 'lookup', reference: 'ghost' })
        .expect(400);
      expect(errorOf(res).code).toBe('unknown_reference');
      expect(await definitionCounts()).toEqual(before);
      expect(await columns('company')).not.toHaveProperty('parent');
    });
  });

  describe('fields', () => {
    it('adds a field: 201, a new nullable column, listed on the object', async () => {
      await createObject({ name: 'gizmo', label: 'Gizmo', fields: [{ name: 'name', label: 'Name', type: 'text' }] }).expect(201);
      await t.http.post('/api/v1/objects/gizmo/records').set(asAdmin(t)).send({ name: 'first' }).expect(201);

      const res = await t.http
        .post('/api/v1/objects/gizmo/fields')
        .set(asAdmin(t))
        .send({ name: 'size', label: 'Size', type: 'select', options: ['s', 'm', 'l'], description: 'T-shirt size' })
        .expect(201);

      expect(res.body).toEqual({
        name: 'size',
        label: 'Size',
        type: 'select',
        required: false,
        unique: false,
        indexed: false,
        searchable: false,
        description: 'T-shirt size',
        options: ['s', 'm', 'l'],
      });
      const cols = await columns('gizmo');
      expect(cols.size).toMatchObject({ data_type: 'text', is_nullable: 'YES' });
      const object = await t.http.get('/api/v1/objects/gizmo').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(object).fields.map((f: { name: string }) => f.name)).toEqual(['name', 'size']);
    });

    it('answers 409 field_exists for a field name already taken', async () => {
      const res = await t.http
        .post('/api/v1/objects/company/fields')
        .set(asAdmin(t))
        .send({ name: 'name', label: 'Name', type: 'integer' })
        .expect(409);
      expect(errorOf(res).code).toBe('field_exists');
      expect((await columns('company')).name.data_type).toBe('text');
    });

    it('refuses with 400 object_not_empty to add a required field to an object that has records', async () => {
      await createObject({ name: 'filled', label: 'Filled', fields: [{ name: 'a', label: 'A', type: 'text' }] }).expect(201);
      await t.http.post('/api/v1/objects/filled/records').set(asAdmin(t)).send({ a: 'x' }).expect(201);

      const res = await t.http
        .post('/api/v1/objects/filled/fields')
        .set(asAdmin(t))
        .send({ name: 'b', label: 'B', type: 'text', required: true })
        .expect(400);

      expect(errorOf(res).code).toBe('object_not_empty');
      expect(await columns('filled')).not.toHaveProperty('b');
      // An optional field is fine.
      await t.http
        .post('/api/v1/objects/filled/fields')
        .set(asAdmin(t))
        .send({ name: 'b', label: 'B', type: 'text' })
        .expect(201);
    });

    it('adds a required field to an empty object as a NOT NULL column', async () => {
      await createObject({ name: 'empty_one', label: 'Empty', fields: [{ name: 'a', label: 'A', type: 'text' }] }).expect(201);
      await t.http
        .post('/api/v1/objects/empty_one/fields')
        .set(asAdmin(t))
        .send({ name: 'b', label: 'B', type: 'integer', required: true })
        .expect(201);
      expect((await columns('empty_one')).b).toMatchObject({ data_type: 'bigint', is_nullable: 'NO' });
    });

    it('patches label, description and options of a field', async () => {
      const res = await t.http
        .patch('/api/v1/objects/gizmo/fields/size')
        .set(asAdmin(t))
        .send({ label: 'Shirt size', options: ['s', 'm', 'l', 'xl'] })
        .expect(200);
      expect(res.body).toMatchObject({ name: 'size', label: 'Shirt size', options: ['s', 'm', 'l', 'xl'] });
      await t.http.post('/api/v1/objects/gizmo/records').set(asAdmin(t)).send({ name: 'big', size: 'xl' }).expect(201);
    });

    it('refuses options on a non-select field in a patch with 400 unexpected_options', async () => {
      const res = await t.http
        .patch('/api/v1/objects/gizmo/fields/name')
        .set(asAdmin(t))
        .send({ options: ['a'] })
        .expect(400);
      expect(errorOf(res).code).toBe('unexpected_options');
    });

    it('answers 404 field_not_found for an unknown field on patch and delete', async () => {
      const patch = await t.http.patch('/api/v1/objects/gizmo/fields/nope').set(asAdmin(t)).send({ label: 'x' }).expect(404);
      expect(errorOf(patch).code).toBe('field_not_found');
      const del = await t.http.delete('/api/v1/objects/gizmo/fields/nope').set(asAdmin(t)).expect(404);
      expect(errorOf(del).code).toBe('field_not_found');
      const system = await t.http.delete('/api/v1/objects/gizmo/fields/id').set(asAdmin(t)).expect(404);
      expect(errorOf(system).code).toBe('field_not_found');
      expect(await columns('gizmo')).toHaveProperty('id');
    });

    it('toggles unique and indexed, creating and dropping the indexes', async () => {
      await createObject({
        name: 'indexed_thing',
        label: 'Indexed',
        fields: [
          { name: 'code', label: 'Code', type: 'text' },
          { name: 'rank', label: 'Rank', type: 'integer' },
        ],
      }).expect(201);
      const onColumn = async (column: string) =>
        (await indexesOf('indexed_thing')).filter((def) => def.includes(`(${column})`) || def.includes(`(${column}, id)`));
      expect(await onColumn('code')).toEqual([]);

      await t.http.patch('/api/v1/objects/indexed_thing/fields/code').set(asAdmin(t)).send({ unique: true }).expect(200);
      // Unique on the field alone, and (field, id) over its empty rows, which an order by it reads in id order.
      expect((await onColumn('code')).sort()).toEqual([
        expect.stringMatching(/^CREATE INDEX nul_.* USING btree \(code, id\) WHERE \(code IS NULL\)$/),
        expect.stringMatching(/^CREATE UNIQUE INDEX .* USING btree \(code\)$/),
      ]);
      await t.http.post('/api/v1/objects/indexed_thing/records').set(asAdmin(t)).send({ code: 'A' }).expect(201);
      const dup = await t.http.post('/api/v1/objects/indexed_thing/records').set(asAdmin(t)).send({ code: 'A' }).expect(409);
      expect(errorOf(dup).code).toBe('unique_violation');

      await t.http.patch('/api/v1/objects/indexed_thing/fields/code').set(asAdmin(t)).send({ unique: false }).expect(200);
      expect(await onColumn('code')).toEqual([]);
      await t.http.post('/api/v1/objects/indexed_thing/records').set(asAdmin(t)).send({ code: 'A' }).expect(201);

      const res = await t.http
        .patch('/api/v1/objects/indexed_thing/fields/rank')
        .set(asAdmin(t))
        .send({ indexed: true })
        .expect(200);
      expect(res.body).toMatchObject({ indexed: true, unique: false });
      expect(await onColumn('rank')).toEqual([expect.stringMatching(/^CREATE INDEX .* USING btree \(rank, id\)$/)]);
      await t.http.patch('/api/v1/objects/indexed_thing/fields/rank').set(asAdmin(t)).send({ indexed: false }).expect(200);
      expect(await onColumn('rank')).toEqual([]);
    });

    it('creates indexes for fields declared unique or indexed at creation', async () => {
      await createObject({
        name: 'pre_indexed',
        label: 'Pre',
        fields: [
          { name: 'code', label: 'Code', type: 'text', unique: true },
          { name: 'rank', label: 'Rank', type: 'integer', indexed: true },
          { name: 'plain', label: 'Plain', type: 'text' },
        ],
      }).expect(201);
      const defs = await indexesOf('pre_indexed');
      expect(defs.filter((d) => d.includes('(code)'))).toEqual([expect.stringMatching(/^CREATE UNIQUE INDEX/)]);
      // Ordered by the field, ties by id: the records API's order, so a keyset page is one range of it.
      expect(defs.filter((d) => d.includes('(rank'))).toEqual([
        expect.stringMatching(/^CREATE INDEX .* USING btree \(rank, id\)$/),
      ]);
      expect(defs.filter((d) => d.includes('(plain'))).toEqual([]);
    });

    it('rebuilds the single-column indexes of an older database on (field, id) when it upgrades, leaving the others', async () => {
      await createObject({
        name: 'older',
        label: 'Older',
        fields: [
          { name: 'rank', label: 'Rank', type: 'integer', indexed: true },
          { name: 'firm', label: 'Firm', type: 'lookup', reference: 'company' },
          { name: 'tags', label: 'Tags', type: 'multiselect', options: ['a', 'b'], indexed: true },
          { name: 'code', label: 'Code', type: 'text', unique: true },
        ],
      }).expect(201);
      for (const rank of [2, 1, null]) {
        await t.http.post('/api/v1/objects/older/records').set(asAdmin(t)).send({ rank }).expect(201);
      }
      // What earlier versions made: each plain B-tree index on its column alone.
      const plain = await t.sql<{ indexname: string; column: string }>(
        `select indexname, substring(indexdef from '\\((\\w+), id\\)$') as column
           from pg_indexes where schemaname = 'data' and tablename = 'older' and indexdef like '%, id)'`,
      );
      expect(plain.map((p) => p.column).sort()).toEqual(['firm', 'rank']);
      for (const { indexname, column } of plain) {
        await t.sql(`drop index data."${indexname}"`);
        await t.sql(`create index "${indexname}" on data.older ("${column}")`);
      }
      const before = (await indexesOf('older')).sort();
      await t.sql(`delete from mikro_orm_migrations where name = '20261128000002_keyset_indexes'`);

      const upgraded = await startTestApp({ database: t.database });
      try {
        const after = (await indexesOf('older')).sort();
        expect(after).toEqual(before.map((def) => def.replace(/\((rank|firm)\)$/, '($1, id)')));
        expect(after.filter((def) => def.endsWith(', id)'))).toHaveLength(2);
        expect(after.join('\n')).toMatch(/USING gin \(tags\)/);
        expect(after.join('\n')).toMatch(/CREATE UNIQUE INDEX .* USING btree \(code\)/);
        const page = await upgraded.http
          .get('/api/v1/objects/older/records')
          .set(asAdmin(t))
          .query({ orderBy: '[{"field":"rank","order":"desc"}]', fields: 'rank' })
          .expect(200);
        expect(bodyOf<RecordPage>(page).records.map((r) => r.rank)).toEqual([2, 1, null]);
      } finally {
        await upgraded.close();
      }
    });

    it('adds the index over the empty rows of each unique field of an older database when it upgrades', async () => {
      await createObject({
        name: 'older_unique',
        label: 'Older unique',
        fields: [
          { name: 'code', label: 'Code', type: 'text', unique: true },
          { name: 'rank', label: 'Rank', type: 'integer', indexed: true },
        ],
      }).expect(201);
      for (const code of ['b', null, 'a', null]) {
        await t.http.post('/api/v1/objects/older_unique/records').set(asAdmin(t)).send({ code }).expect(201);
      }
      const isNul = (def: string) => def.includes(' WHERE ');
      const made = (await indexesOf('older_unique')).filter(isNul);
      expect(made).toEqual([
        expect.stringMatching(/^CREATE INDEX (nul_\w+) ON data\.older_unique USING btree \(code, id\) WHERE/),
      ]);
      // What earlier versions made: the unique index alone.
      await t.sql(`drop index data."${/^CREATE INDEX (\w+)/.exec(made[0])![1]}"`);
      await t.sql(`delete from mikro_orm_migrations where name = '20261129000007_unique_empty_indexes'`);

      const upgraded = await startTestApp({ database: t.database });
      try {
        expect((await indexesOf('older_unique')).filter(isNul)).toEqual(made);
        const page = await upgraded.http
          .get('/api/v1/objects/older_unique/records')
          .set(asAdmin(t))
          .query({ orderBy: '[{"field":"code","order":"desc"}]', fields: 'code' })
          .expect(200);
        expect(bodyOf<RecordPage>(page).records.map((r) => r.code)).toEqual(['b', 'a', null, null]);
      } finally {
        await upgraded.close();
      }
    });

    it('refuses with 409 unique_violation to make a field with duplicates unique, keeping its old indexes', async () => {
      await createObject({
        name: 'dupes',
        label: 'Dupes',
        fields: [{ name: 'code', label: 'Code', type: 'text', indexed: true }],
      }).expect(201);
      for (const code of ['x', 'x'])
        await t.http.post('/api/v1/objects/dupes/records').set(asAdmin(t)).send({ code }).expect(201);

      const res = await t.http.patch('/api/v1/objects/dupes/fields/code').set(asAdmin(t)).send({ unique: true }).expect(409);

      expect(errorOf(res).code).toBe('unique_violation');
      expect((await indexesOf('dupes')).filter((d) => d.includes('(code'))).toEqual([expect.stringMatching(/^CREATE INDEX/)]);
      const field = await t.http.get('/api/v1/objects/dupes').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(field).fields[0]).toMatchObject({ unique: false, indexed: true });
    });

    it('fails cleanly with 400 field_has_empty_values when making a field with nulls required', async () => {
      await createObject({
        name: 'sparse',
        label: 'Sparse',
        fields: [
          { name: 'a', label: 'A', type: 'text' },
          { name: 'b', label: 'B', type: 'text' },
        ],
      }).expect(201);
      const row = await t.http.post('/api/v1/objects/sparse/records').set(asAdmin(t)).send({ a: 'only a' }).expect(201);

      const res = await t.http
        .patch('/api/v1/objects/sparse/fields/b')
        .set(asAdmin(t))
        .send({ required: true, label: 'B!' })
        .expect(400);

      expect(errorOf(res).code).toBe('field_has_empty_values');
      expect((await columns('sparse')).b.is_nullable).toBe('YES');
      const object = await t.http.get('/api/v1/objects/sparse').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(object).fields[1]).toMatchObject({ name: 'b', label: 'B', required: false });

      // Filled in, the same change goes through and the column becomes NOT NULL.
      await t.http
        .patch(`/api/v1/objects/sparse/records/${idOf(row)}`)
        .set(asAdmin(t))
        .send({ b: 'now b' })
        .expect(200);
      await t.http.patch('/api/v1/objects/sparse/fields/b').set(asAdmin(t)).send({ required: true }).expect(200);
      expect((await columns('sparse')).b.is_nullable).toBe('NO');
      const missing = await t.http.post('/api/v1/objects/sparse/records').set(asAdmin(t)).send({ a: 'no b' }).expect(400);
      expect(missing.body).toMatchObject({ code: 'missing_required_field', details: { fields: ['b'] } });

      await t.http.patch('/api/v1/objects/sparse/fields/b').set(asAdmin(t)).send({ required: false }).expect(200);
      expect((await columns('sparse')).b.is_nullable).toBe('YES');
    });

    it('refuses null for label or required in a field patch with 400 and leaves column and definition as they were', async () => {
      await createObject({
        name: 'strict',
        label: 'Strict',
        fields: [{ name: 'code', label: 'Code', type: 'text', required: true }],
      }).expect(201);
      for (const body of [{ required: null }, { label: null }, { required: null, label: 'Renamed' }]) {
        const res = await t.http.patch('/api/v1/objects/strict/fields/code').set(asAdmin(t)).send(body).expect(400);
        expect(errorOf(res).code).toBe('validation_failed');
      }
      expect((await columns('strict')).code.is_nullable).toBe('NO');
      const object = await t.http.get('/api/v1/objects/strict').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(object).fields[0]).toMatchObject({ label: 'Code', required: true });
    });

    // Found by the fuzz test: `options: null` passed the DTO (IsOptional lets null through) and the
    // service read its length: a 500.
    it('refuses null options, unique or indexed in a field patch with 400 validation_failed and keeps the field', async () => {
      await createObject({
        name: 'choosy',
        label: 'Choosy',
        fields: [{ name: 'stage', label: 'Stage', type: 'select', options: ['new', 'won'], indexed: true }],
      }).expect(201);
      const answers = [];
      for (const body of [{ options: null }, { options: null, label: 'Renamed' }, { unique: null }, { indexed: null }]) {
        const res = await t.http.patch('/api/v1/objects/choosy/fields/stage').set(asAdmin(t)).send(body);
        answers.push([res.status, errorOf(res).code]);
      }
      expect(answers).toEqual(Array(4).fill([400, 'validation_failed']));
      const object = await t.http.get('/api/v1/objects/choosy').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(object).fields[0]).toMatchObject({ label: 'Stage', options: ['new', 'won'], indexed: true });
    });

    it('still clears a field description with null', async () => {
      await createObject({
        name: 'described',
        label: 'Described',
        fields: [{ name: 'note', label: 'Note', type: 'text', description: 'Something' }],
      }).expect(201);
      await t.http.patch('/api/v1/objects/described/fields/note').set(asAdmin(t)).send({ description: null }).expect(200);
      const object = await t.http.get('/api/v1/objects/described').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectResponse>(object).fields[0]).not.toHaveProperty('description');
    });

    it('deletes a field and its column, keeping the rows', async () => {
      await createObject({
        name: 'shrinking',
        label: 'Shrinking',
        fields: [
          { name: 'keep', label: 'Keep', type: 'text' },
          { name: 'drop_me', label: 'Drop', type: 'text' },
        ],
      }).expect(201);
      await t.http.post('/api/v1/objects/shrinking/records').set(asAdmin(t)).send({ keep: 'k', drop_me: 'd' }).expect(201);

      await t.http.delete('/api/v1/objects/shrinking/fields/drop_me').set(asAdmin(t)).expect(204);

      expect(await columns('shrinking')).not.toHaveProperty('drop_me');
      const records = await t.http.get('/api/v1/objects/shrinking/records').set(asAdmin(t)).expect(200);
      expect(bodyOf<RecordPage>(records).records).toEqual([expect.objectContaining({ keep: 'k' })]);
      expect(bodyOf<RecordPage>(records).records[0]).not.toHaveProperty('drop_me');
      const list = await t.http.get('/api/v1/objects').set(asAdmin(t)).expect(200);
      expect(bodyOf<ObjectListResponse>(list).objects.find((o: { name: string }) => o.name === 'shrinking')!.fieldCount).toBe(1);
    });

    it.each([
      ['a numeric label', { label: 5 }],
      ['required as a string', { required: 'true' }],
      ['a type change', { type: 'integer' }],
      ['a rename', { name: 'other' }],
    ])('refuses %s in a field patch with 400 validation_failed', async (_case, body) => {
      const res = await t.http.patch('/api/v1/objects/company/fields/name').set(asAdmin(t)).send(body).expect(400);
      expect(errorOf(res).code).toBe('validation_failed');
      expect((await columns('company')).name.data_type).toBe('text');
    });
  });

  describe('roles', () => {
    it('lets members read metadata but answers 403 forbidden to their writes', async () => {
      await t.http.get('/api/v1/objects').set(bearer(memberKey)).expect(200);
      await t.http.get('/api/v1/objects/company').set(bearer(memberKey)).expect(200);
      const writes = [
        await t.http.post('/api/v1/objects').set(bearer(memberKey)).send({ name: 'by_member', label: 'X' }),
        await t.http.patch('/api/v1/objects/company').set(bearer(memberKey)).send({ label: 'X' }),
        await t.http.delete('/api/v1/objects/company').set(bearer(memberKey)),
        await t.http.post('/api/v1/objects/company/fields').set(bearer(memberKey)).send({ name: 'x', label: 'X', type: 'text' }),
        await t.http.patch('/api/v1/objects/company/fields/name').set(bearer(memberKey)).send({ label: 'X' }),
        await t.http.delete('/api/v1/objects/company/fields/name').set(bearer(memberKey)),
      ];
      expect(writes.map((r) => [r.status, errorOf(r).code])).toEqual(Array(6).fill([403, 'forbidden']));
      expect(await tableExists('by_member')).toBe(false);
      expect(Object.keys(await columns('company')).sort()).toEqual(['created_at', 'id', 'name', 'updated_at']);
    });
  });
});
