import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { compileFind, compileReadableReferences, compileStream } from './records.compiler';
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
    const find = compileFind(owned, query);
    expect(find.sql.startsWith(`${stream.query.sql.replace(' from ', ', count(*) over () as "__total" from ')} limit $3`)).toBe(
      true,
    );
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
