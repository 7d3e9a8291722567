import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { orderTerms } from './order-by.compiler';
import {
  compileBoundedCount,
  compileCountEstimate,
  compileFind,
  compileReadableReferences,
  compileStream,
  compileUpdateRaw,
} from './records.compiler';
import { domainError, field } from '../../test/support/metadata-fixtures';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    field('name', 'text'),
    field('stage', 'select', { options: ['lead', 'won'] }),
    field('owner', 'text'),
    ...SYSTEM_FIELDS,
  ],
};
/** A member's view: its rows are those it owns, and `owner` is hidden from it. */
const owned: ObjectMeta = {
  ...deal,
  fields: deal.fields.filter((f) => f.name !== 'owner'),
  rowFilter: { object: deal, filters: [{ owner: '$subject' }], subject: 'ann', attributes: {} },
};

describe('compileStream', () => {
  it("selects, filters and orders as compileFind does, the caller's row filter first, without paging", () => {
    const query = { where: { stage: 'won' }, orderBy: [{ field: 'name', order: 'desc' }], fields: 'name', limit: 10, offset: 0 };
    const stream = compileStream(owned, query);
    expect(stream.query.sql).toBe(
      'select "id", "name" from "data"."deal" where ("owner" = $1::text AND "stage" = $2::text) ' +
        'order by "name" DESC NULLS LAST, "id" ASC',
    );
    expect(stream.query.parameters).toEqual(['ann', 'won']);
    expect(stream.fields.map((f) => f.name)).toEqual(['id', 'name']);
    // "name" has no index: one statement, the stream's with a limit.
    expect(compileFind(owned, query).sql).toBe(`${stream.query.sql} limit $3`);
  });

  it("selects every field of the caller's view by default, and refuses a hidden one", () => {
    expect(compileStream(owned, {}).fields.map((f) => f.name)).toEqual(['name', 'stage', 'id', 'created_at', 'updated_at']);
    expect(domainError(() => compileStream(owned, { fields: ['owner'] })).code).toBe('unknown_field');
  });
});

describe('compileReadableReferences', () => {
  const account: ObjectMeta = { name: 'account', label: 'Account', fields: [field('region', 'text'), ...SYSTEM_FIELDS] };
  const emea: ObjectMeta = {
    ...account,
    rowFilter: { object: account, filters: [{ region: '$attr.region' }], subject: 'ann', attributes: { region: 'emea' } },
  };
  const lookup = field('account', 'lookup', { reference: 'account' });
  const ids = ['a0000000-0000-4000-8000-000000000001'];

  it("reads the ids inside the caller's row filter on the target, and the values its updated records hold", () => {
    const query = compileReadableReferences(
      owned,
      [{ field: lookup, target: emea, ids }],
      ['b0000000-0000-4000-8000-000000000002'],
    )!;
    expect(query.sql).toBe(
      'select 0 as "k", "t"."id"::text as "id" from "data"."account" as "t" where "t"."id" = any($1::uuid[]) and ' +
        '("t"."region" = $2::text) union all ' +
        'select 0 as "k", "o"."account"::text as "id" from "data"."deal" as "o" where "o"."id" = any($4::uuid[]) and ' +
        '"o"."account" = any($1::uuid[]) and ("o"."owner" = $3::text)',
    );
    expect(query.parameters).toEqual([ids, 'emea', 'ann', ['b0000000-0000-4000-8000-000000000002']]);
  });

  it('asks nothing when no id can pass: a target the caller may not read, and no update', () => {
    expect(compileReadableReferences(owned, [{ field: lookup, ids }], [])).toBeUndefined();
    const onlyHeld = compileReadableReferences(owned, [{ field: lookup, ids }], ['b0000000-0000-4000-8000-000000000002'])!;
    expect(onlyHeld.sql).not.toContain('"t"');
    expect(onlyHeld.parameters).toHaveLength(3);
  });
});

describe('compileFind by offset (a first page, or one at an offset)', () => {
  const item: ObjectMeta = {
    name: 'item',
    label: 'Item',
    fields: [
      field('amount', 'currency', { indexed: true }),
      field('rank', 'integer', { indexed: true, required: true }),
      field('email', 'email', { unique: true }),
      field('notes', 'text'),
      ...SYSTEM_FIELDS,
    ],
  };
  const page = (orderBy: unknown, offset = 0, fields = 'notes', where?: unknown) =>
    compileFind(item, { orderBy, where, fields, limit: 50, offset }, { terms: orderTerms(item, orderBy), keys: true });
  const part = (select: string, condition: string, order: string, limit: string) =>
    `(select ${select} from "data"."item" where (TRUE) and ${condition} order by ${order} limit ${limit})`;

  it('has no window count and no text keys: one statement in the order of the index on (field, id) when one scan serves it', () => {
    const query = page([{ field: 'amount' }], 0, 'amount');
    expect(query.sql).toBe('select "id", "amount" from "data"."item" where TRUE order by "amount" ASC, "id" ASC limit $1');
    expect(query.parameters).toEqual([51]);
    // Never empty: plain DESC, the index scanned backward.
    expect(page([{ field: 'rank', order: 'desc' }], 0, 'rank').sql).toBe(
      'select "id", "rank" from "data"."item" where TRUE order by "rank" DESC, "id" ASC limit $1',
    );
  });

  it('descending on an indexed field that may be empty: its values in plain DESC, then its empty rows, merged', () => {
    const query = page([{ field: 'amount', order: 'desc' }], 0, 'notes,amount');
    const select = '"id", "notes", "amount"';
    expect(query.sql).toBe(
      `select "id", "notes", "amount" from (` +
        part(select, '"amount" is not null', '"amount" DESC, "id" ASC', '$2') +
        ' union all ' +
        part(select, '"amount" is null', '"amount" ASC, "id" ASC', '$2') +
        `) as "__page" order by "amount" DESC NULLS LAST, "id" ASC limit $1`,
    );
    expect(query.parameters).toEqual([51, 51]);
  });

  it('at an offset, reads and sorts the ids and sort keys up to the end of the page only, then the records of its rows by id', () => {
    const query = page([{ field: 'amount', order: 'desc' }], 100);
    const select = '"id", "amount" as "__k0"';
    expect(query.sql).toBe(
      `select "t"."id", "t"."notes", "__keys"."__k0" from (select "id", "__k0" from (` +
        part(select, '"amount" is not null', '"amount" DESC, "id" ASC', '$3') +
        ' union all ' +
        part(select, '"amount" is null', '"amount" ASC, "id" ASC', '$3') +
        `) as "__page" order by "__k0" DESC NULLS LAST, "id" ASC limit $1 offset $2) as "__keys" ` +
        `join "data"."item" as "t" on "t"."id" = "__keys"."id" order by "__keys"."__k0" DESC NULLS LAST, "__keys"."id" ASC`,
    );
    expect(query.parameters).toEqual([51, 100, 151]);
    // A sort key the caller selected comes from the record.
    expect(page([{ field: 'amount' }], 100, 'amount').sql).toBe(
      'select "t"."id", "t"."amount" from (select "id", "amount" as "__k0" from "data"."item" where TRUE ' +
        'order by "amount" ASC, "id" ASC limit $1 offset $2) as "__keys" join "data"."item" as "t" on "t"."id" = "__keys"."id" ' +
        'order by "__keys"."__k0" ASC, "__keys"."id" ASC',
    );
  });

  it('a unique field that may be empty, in either direction: its values, then its empty rows in id order', () => {
    const select = '"id", "notes", "email" as "__k0"';
    expect(page([{ field: 'email' }]).sql).toBe(
      `select "id", "notes", "__k0" from (` +
        part(select, '"email" is not null', '"email" ASC, "id" ASC', '$2') +
        ' union all ' +
        part(select, '"email" is null', '"email" ASC, "id" ASC', '$2') +
        `) as "__page" order by "__k0" ASC, "id" ASC limit $1`,
    );
    expect(page([{ field: 'email', order: 'desc' }]).sql).toContain(
      '"email" is not null order by "email" DESC, "id" ASC limit $2) union all',
    );
  });

  it('without an index, or after a first key one scan serves: one statement (later keys sort within its ties)', () => {
    expect(page([{ field: 'notes', order: 'desc' }]).sql).toBe(
      'select "id", "notes" from "data"."item" where TRUE order by "notes" DESC NULLS LAST, "id" ASC limit $1',
    );
    expect(page([{ field: 'rank' }, { field: 'amount', order: 'desc' }], 0, 'rank,amount').sql).toBe(
      'select "id", "rank", "amount" from "data"."item" where TRUE ' +
        'order by "rank" ASC, "amount" DESC NULLS LAST, "id" ASC limit $1',
    );
  });

  it('ANDs the where into each part, its values bound once', () => {
    const query = page([{ field: 'amount', order: 'desc' }], 0, 'amount', { notes: 'x' });
    expect(query.sql).toContain('where ("notes" = $1::text) and "amount" is not null');
    expect(query.sql).toContain('where ("notes" = $1::text) and "amount" is null');
    expect(query.parameters).toEqual(['x', 51, 51]);
  });
});

describe('the total of an offset page', () => {
  it("counts the caller's matches (its row filter first) up to the cap and one more, reading no further", () => {
    const query = compileBoundedCount(owned, { stage: 'won' }, undefined, 10_000);
    expect(query.sql).toBe(
      'select count(*) as "count" from (select 1 from "data"."deal" where ("owner" = $1::text AND "stage" = $2::text) ' +
        'limit $3) as "__matches"',
    );
    expect(query.parameters).toEqual(['ann', 'won', 10_001]);
  });

  it("without any condition, also gives the table's estimate (rows per page as last counted, times its pages now)", () => {
    const query = compileBoundedCount(deal, undefined, undefined, 10_000);
    expect(query.sql).toBe(
      'select count(*) as "count", (select case when c.reltuples >= 0 and c.relpages > 0 then c.reltuples / c.relpages * ' +
        "(pg_relation_size(c.oid) / current_setting('block_size')::float8) end from pg_class c " +
        'where c.oid = $1::regclass) as "estimate" from (select 1 from "data"."deal" where TRUE limit $2) as "__matches"',
    );
    expect(query.parameters).toEqual(['"data"."deal"', 10_001]);
    // A caller under a row filter has a condition: its count says nothing of the table's size.
    expect(compileBoundedCount(owned, undefined, undefined, 10_000).sql).not.toContain('estimate');
  });

  it('counts in the page’s own statement when asked, only once the page came back full, and keeps the page’s order', () => {
    const orderBy = [{ field: 'name', order: 'desc' }];
    const query = compileFind(
      owned,
      { where: { stage: 'won' }, orderBy, fields: 'name', limit: 5, offset: 0 },
      { terms: orderTerms(owned, orderBy), keys: true, countUpTo: 10_000 },
    );
    const where = '("owner" = $1::text AND "stage" = $2::text)';
    expect(query.sql).toBe(
      `with "__found" as materialized (select "id", "name" from "data"."deal" where ${where} order by "name" DESC NULLS LAST, "id" ASC limit $3) ` +
        'select *, case when (select count(*) from "__found") >= $4 then (select count(*) from ' +
        `(select 1 from "data"."deal" where ${where} limit $5) as "__matches") end as "__count" ` +
        'from "__found" order by "name" DESC NULLS LAST, "id" ASC',
    );
    expect(query.parameters).toEqual(['ann', 'won', 6, 6, 10_001]);
    // Without any condition, the table's estimate comes along, as with compileBoundedCount.
    const all = compileFind(deal, { limit: 5, offset: 0 }, { terms: orderTerms(deal, undefined), countUpTo: 10_000 });
    expect(all.sql).toContain(
      'end as "__count", case when (select count(*) from "__found") >= $2 then (select case when c.reltuples',
    );
    expect(all.sql).toMatch(/end as "__estimate" from "__found" order by "id" ASC$/);
  });

  it('beyond the cap, asks the planner for the plan of the same select (its rows are the estimate)', () => {
    const query = compileCountEstimate(owned, { stage: 'won' });
    expect(query.sql).toBe('explain (format json) select 1 from "data"."deal" where ("owner" = $1::text AND "stage" = $2::text)');
    expect(query.parameters).toEqual(['ann', 'won']);
    expect(compileCountEstimate(deal, undefined).sql).toBe('explain (format json) select 1 from "data"."deal" where TRUE');
  });
});

describe('compileUpdateRaw', () => {
  const capture = {
    op: 'update' as const,
    keyId: 'k1',
    changeSet: { id: '00000000-0000-4000-8000-000000000001', via: 'revert' as const },
  };
  const id = '00000000-0000-4000-8000-00000000000a';

  it('sets the columns it is given and names fields without a column the caller adds as changed too', () => {
    const update = compileUpdateRaw(deal, id, { name: 'Acme', stage: 'won' }, { ...capture, changedFields: ['members'] });
    expect(update.sql).toContain('"name" = (jsonb_populate_record(null::"data"."deal", $1::jsonb))."name"');
    expect(update.parameters[0]).toBe(JSON.stringify({ name: 'Acme', stage: 'won' }));
    expect(update.parameters).toContainEqual(['name', 'stage', 'members']);
  });

  it('binds no values to read when no column changes: every parameter is one the statement reads', () => {
    const update = compileUpdateRaw(deal, id, {}, { ...capture, changedFields: ['members'] });
    expect(update.sql).not.toContain('jsonb_populate_record');
    const used = new Set([...update.sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    expect([...used].sort((a, b) => a - b)).toEqual(update.parameters.map((_, i) => i + 1));
    expect(update.parameters).toContainEqual(['members']);
  });
});
