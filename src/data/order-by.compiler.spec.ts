import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { DEFAULT_MAX_ORDER_BY_FIELDS, compileOrderBy, compileProjection } from './order-by.compiler';
import { domainError, field } from '../../test/support/metadata-fixtures';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    field('name', 'text'),
    field('stage', 'select', { options: ['lead', 'won'] }),
    field('amount', 'currency'),
    field('quantity', 'integer'),
    field('is_closed', 'boolean'),
    field('close_date', 'date'),
    field('closed_at', 'datetime'),
    field('account_id', 'lookup', { reference: 'account' }),
    field('tags', 'multiselect', { options: ['vip'] }),
    field('meta', 'json'),
    ...SYSTEM_FIELDS,
  ],
};
const fieldNames = deal.fields.map((f) => f.name);

describe('compileOrderBy', () => {
  it.each([undefined, null, []])('orders by id alone for %p', (orderBy) => {
    expect(compileOrderBy(deal, orderBy)).toBe('"id" ASC');
  });

  it('puts nulls last, defaults to asc and appends the id tiebreaker', () => {
    expect(compileOrderBy(deal, [{ field: 'amount', order: 'desc' }, { field: 'name' }])).toBe(
      '"amount" DESC NULLS LAST, "name" ASC, "id" ASC',
    );
  });

  it('sorts a field that is never empty plain DESC, the order a backward scan of its index gives', () => {
    const withRequired: ObjectMeta = { ...deal, fields: [...deal.fields, field('code', 'text', { required: true })] };
    expect(
      compileOrderBy(withRequired, [
        { field: 'code', order: 'desc' },
        { field: 'created_at', order: 'desc' },
      ]),
    ).toBe('"code" DESC, "created_at" DESC, "id" ASC');
  });

  it('accepts a single object and case-insensitive order', () => {
    expect(compileOrderBy(deal, { field: 'close_date', order: 'DESC' })).toBe('"close_date" DESC NULLS LAST, "id" ASC');
    expect(compileOrderBy(deal, { field: 'close_date', order: 'Asc' })).toBe('"close_date" ASC, "id" ASC');
  });

  it('does not append id when id is already ordered', () => {
    expect(compileOrderBy(deal, [{ field: 'id', order: 'desc' }])).toBe('"id" DESC');
    expect(compileOrderBy(deal, [{ field: 'created_at' }, { field: 'id' }])).toBe('"created_at" ASC, "id" ASC');
  });

  it('prefixes the table alias everywhere', () => {
    expect(compileOrderBy(deal, [{ field: 'amount' }], { tableAlias: 'd' })).toBe('"d"."amount" ASC, "d"."id" ASC');
  });

  it('refuses unknown fields with the list of fields', () => {
    const error = domainError(() => compileOrderBy(deal, [{ field: 'amount"; DROP TABLE deal; --' }]));
    expect(error.code).toBe('unknown_field');
    expect(error.details).toEqual({ field: 'amount"; DROP TABLE deal; --', object: 'deal', availableFields: fieldNames });
  });

  it.each([
    ['a string', 'amount'],
    ['a number', 3],
    ['an item without field', [{ order: 'asc' }]],
    ['a non-string field', [{ field: 5 }]],
    ['an unknown key', [{ field: 'amount', direction: 'desc' }]],
    ['a bad order', [{ field: 'amount', order: 'descending' }]],
    ['an order injection', [{ field: 'amount', order: 'desc; DROP TABLE deal' }]],
    ['a non-string order', [{ field: 'amount', order: -1 }]],
    ['a duplicate field', [{ field: 'amount' }, { field: 'amount', order: 'desc' }]],
    ['a json field', [{ field: 'meta' }]],
    ['a multiselect field', [{ field: 'tags' }]],
  ])('refuses %s with invalid_order_by', (_label, orderBy) => {
    expect(domainError(() => compileOrderBy(deal, orderBy)).code).toBe('invalid_order_by');
  });

  it('names the sortable fields when a field cannot be sorted', () => {
    const error = domainError(() => compileOrderBy(deal, { field: 'meta' }));
    expect(error.details).toMatchObject({ field: 'meta', type: 'json' });
    const { sortableFields } = error.details as { sortableFields: string[] };
    expect(sortableFields).toContain('amount');
    expect(sortableFields).not.toContain('meta');
    expect(sortableFields).not.toContain('tags');
  });

  it(`accepts ${DEFAULT_MAX_ORDER_BY_FIELDS} fields by default and a configurable cap`, () => {
    const five = ['name', 'stage', 'amount', 'quantity', 'close_date'].map((name) => ({ field: name }));
    expect(compileOrderBy(deal, five).split(', ')).toHaveLength(6);
    const tooMany = domainError(() => compileOrderBy(deal, [...five, { field: 'closed_at' }]));
    expect(tooMany.code).toBe('invalid_order_by');
    expect(tooMany.details).toMatchObject({ maxFields: 5 });
    expect(domainError(() => compileOrderBy(deal, five.slice(0, 3), { maxFields: 2 })).code).toBe('invalid_order_by');
    expect(compileOrderBy(deal, [...five, { field: 'closed_at' }], { maxFields: 6 })).toMatch(/"closed_at" ASC, "id" ASC$/);
  });
});

describe('compileProjection', () => {
  it('selects every field in metadata order when nothing is asked', () => {
    for (const fields of [undefined, null, [], '', ' , ']) {
      const projection = compileProjection(deal, fields);
      expect(projection.fields).toEqual(deal.fields);
      expect(projection.sql).toBe(fieldNames.map((name) => `"${name}"`).join(', '));
    }
  });

  it('puts id first, keeps the requested order and drops duplicates', () => {
    const projection = compileProjection(deal, ['amount', 'name', 'amount', 'id']);
    expect(projection.sql).toBe('"id", "amount", "name"');
    expect(projection.fields.map((f) => f.name)).toEqual(['id', 'amount', 'name']);
  });

  it('accepts a comma-separated string with spaces and an alias', () => {
    expect(compileProjection(deal, ' name, stage ,,created_at', { tableAlias: 'd' }).sql).toBe(
      '"d"."id", "d"."name", "d"."stage", "d"."created_at"',
    );
  });

  it('refuses unknown fields with the list of fields', () => {
    const error = domainError(() => compileProjection(deal, 'name,amount"; DROP TABLE deal; --'));
    expect(error.code).toBe('unknown_field');
    expect(error.details).toEqual({ field: 'amount"; DROP TABLE deal; --', object: 'deal', availableFields: fieldNames });
  });

  it.each([
    ['a number', 42],
    ['an object', { name: true }],
    ['a non-string item', ['name', 3]],
    ['more than 500 names', Array.from({ length: 501 }, () => 'name')],
  ])('refuses %s with invalid_fields', (_label, fields) => {
    expect(domainError(() => compileProjection(deal, fields)).code).toBe('invalid_fields');
  });
});
