import { SqlParams } from '../database/sql-params';
import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { dropKeyColumns, keysetParts, leadingParts, rowKeys } from './keyset';
import { orderTerms } from './order-by.compiler';
import { compileFind } from './records.compiler';
import { field } from '../../test/support/metadata-fixtures';

const item: ObjectMeta = {
  name: 'item',
  label: 'Item',
  fields: [
    field('score', 'number'),
    field('code', 'text', { required: true }),
    field('due', 'date'),
    field('notes', 'text'),
    ...SYSTEM_FIELDS,
  ],
};

const ID = '0b8f6a5e-7c33-4f7b-8c3e-6f0a3d9a2c11';

function parts(orderBy: unknown, keys: (string | null)[]) {
  const params = new SqlParams();
  return { parts: keysetParts(orderTerms(item, orderBy), keys, params), values: params.values };
}

describe('keysetParts', () => {
  it('after an id: one range of the primary key', () => {
    expect(parts(undefined, [ID])).toEqual({
      parts: [{ condition: '"id" > $1::uuid', orderBy: '"id" ASC' }],
      values: [ID],
    });
  });

  it('after a value of a field that may be empty: its ties after the id, the values beyond it, then its nulls', () => {
    expect(parts([{ field: 'score' }], ['2.5', ID]).parts).toEqual([
      { condition: '"score" = $1::double precision and "id" > $2::uuid', orderBy: '"score" ASC, "id" ASC' },
      { condition: '"score" > $1::double precision', orderBy: '"score" ASC, "id" ASC' },
      { condition: '"score" is null', orderBy: '"score" ASC, "id" ASC' },
    ]);
  });

  it('descending: the values below in plain DESC (no null among them), so an index scanned backward serves them', () => {
    expect(parts([{ field: 'score', order: 'desc' }], ['2.5', ID]).parts).toEqual([
      { condition: '"score" = $1::double precision and "id" > $2::uuid', orderBy: '"score" ASC, "id" ASC' },
      { condition: '"score" < $1::double precision', orderBy: '"score" DESC, "id" ASC' },
      { condition: '"score" is null', orderBy: '"score" ASC, "id" ASC' },
    ]);
  });

  it('after a null: only the other nulls, by the next keys', () => {
    expect(parts([{ field: 'score', order: 'desc' }], [null, ID]).parts).toEqual([
      { condition: '"score" is null and "id" > $1::uuid', orderBy: '"score" ASC, "id" ASC' },
    ]);
  });

  it('a required field has no part for nulls', () => {
    expect(parts([{ field: 'code', order: 'desc' }], ['m', ID]).parts).toEqual([
      { condition: '"code" = $1::text and "id" > $2::uuid', orderBy: '"code" ASC, "id" ASC' },
      { condition: '"code" < $1::text', orderBy: '"code" DESC, "id" ASC' },
    ]);
  });

  it('several keys: the longest equal prefix first, the later keys in their own order', () => {
    const { parts: got, values } = parts([{ field: 'due' }, { field: 'notes', order: 'desc' }], ['2026-01-02', null, ID]);
    expect(got).toEqual([
      {
        condition: '"due" = $1::date and "notes" is null and "id" > $2::uuid',
        orderBy: '"due" ASC, "notes" ASC, "id" ASC',
      },
      { condition: '"due" > $1::date', orderBy: '"due" ASC, "notes" DESC NULLS LAST, "id" ASC' },
      { condition: '"due" is null', orderBy: '"due" ASC, "notes" DESC NULLS LAST, "id" ASC' },
    ]);
    expect(values).toEqual(['2026-01-02', ID]);
  });
});

describe('compileFind after a cursor', () => {
  const page = (orderBy: unknown, after: (string | null)[]) =>
    compileFind(item, { orderBy, fields: 'code', limit: 2, offset: 0 }, { terms: orderTerms(item, orderBy), after, keys: true });

  it('by id alone: the part is the page, and no sort key is added (id is selected)', () => {
    const query = page(undefined, [ID]);
    expect(query.sql).toBe('select "id", "code" from "data"."item" where (TRUE) and "id" > $1::uuid order by "id" ASC limit $2');
    expect(query.parameters).toEqual([ID, 3]);
  });

  it('merges the first rows of each part in the query order, a sort key not selected as is (no text of every row)', () => {
    const query = page([{ field: 'score', order: 'desc' }], ['2.5', ID]);
    const part = (condition: string, order: string) =>
      `(select "id", "code", "score" as "__k0" from "data"."item" where (TRUE) and ${condition} order by ${order} limit $4)`;
    expect(query.sql).toBe(
      `select "id", "code", "__k0" from (` +
        [
          part('"score" = $1::double precision and "id" > $2::uuid', '"score" ASC, "id" ASC'),
          part('"score" < $1::double precision', '"score" DESC, "id" ASC'),
          part('"score" is null', '"score" ASC, "id" ASC'),
        ].join(' union all ') +
        `) as "__page" order by "__k0" DESC NULLS LAST, "id" ASC limit $3`,
    );
    expect(query.parameters).toEqual(['2.5', ID, 3, 3]);
  });

  it('has nothing after a cursor of nulls only', () => {
    const query = page([{ field: 'score' }, { field: 'id' }], [null, null]);
    expect(query.sql).toContain('where (TRUE) and false order by');
  });
});

describe('leadingParts', () => {
  const indexed: ObjectMeta = {
    ...item,
    fields: item.fields.map((f) =>
      f.name === 'score' || f.name === 'code' ? { ...f, indexed: true } : f.name === 'notes' ? { ...f, unique: true } : f,
    ),
  };
  const first = (orderBy: unknown) => leadingParts(orderTerms(indexed, orderBy));

  it('one part in the query order when one index scan gives it (ascending, or never empty), or no index serves it', () => {
    expect(first([{ field: 'score' }])).toEqual([{ condition: 'true', orderBy: '"score" ASC, "id" ASC' }]);
    expect(first([{ field: 'code', order: 'desc' }])).toEqual([{ condition: 'true', orderBy: '"code" DESC, "id" ASC' }]);
    expect(first([{ field: 'due', order: 'desc' }])).toEqual([{ condition: 'true', orderBy: '"due" DESC NULLS LAST, "id" ASC' }]);
    expect(first(undefined)).toEqual([{ condition: 'true', orderBy: '"id" ASC' }]);
  });

  it('descending on an indexed field that may be empty: its values in plain DESC, then its nulls, the later keys after', () => {
    expect(first([{ field: 'score', order: 'desc' }, { field: 'due' }])).toEqual([
      { condition: '"score" is not null', orderBy: '"score" DESC, "due" ASC, "id" ASC' },
      { condition: '"score" is null', orderBy: '"score" ASC, "due" ASC, "id" ASC' },
    ]);
  });

  it('a unique field that may be empty, ascending too: its nulls are read from their own index in id order', () => {
    expect(first([{ field: 'notes' }])).toEqual([
      { condition: '"notes" is not null', orderBy: '"notes" ASC, "id" ASC' },
      { condition: '"notes" is null', orderBy: '"notes" ASC, "id" ASC' },
    ]);
  });
});

describe('cursor keys from a page row', () => {
  const terms = orderTerms(item, [{ field: 'score', order: 'desc' }, { field: 'due' }]);

  it("reads each key from the selected field or its __k column, as PostgreSQL's text", () => {
    expect(rowKeys({ id: ID, score: 2.5, __k1: '2026-01-02' }, terms)).toEqual(['2.5', '2026-01-02', ID]);
    expect(rowKeys({ id: ID, score: null, __k1: null }, terms)).toEqual([null, null, ID]);
    expect(rowKeys({ id: ID, __k0: 1e21, __k1: '2026-01-02' }, terms)).toEqual(['1e+21', '2026-01-02', ID]);
  });

  it('removes the __k columns from every row', () => {
    const rows: Record<string, unknown>[] = [
      { id: ID, __k0: 1, __k1: 'a' },
      { id: ID, __k0: 2 },
    ];
    dropKeyColumns(rows, terms);
    expect(rows).toEqual([{ id: ID }, { id: ID }]);
  });
});
