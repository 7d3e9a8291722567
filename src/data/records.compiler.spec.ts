import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { compileFind, compileStream } from './records.compiler';
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
