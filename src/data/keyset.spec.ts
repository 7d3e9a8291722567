import { SqlParams } from '../database/sql-params';
import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { keysetParts } from './keyset';
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

  it('by id alone: the part is the page', () => {
    const query = page(undefined, [ID]);
    expect(query.sql).toBe(
      'select "id", "code", "id"::text as "__k0" from "data"."item" where (TRUE) and "id" > $2::uuid order by "id" ASC limit $1',
    );
    expect(query.parameters).toEqual([3, ID]);
  });

  it('merges the first rows of each part in the query order, without the sort keys it added', () => {
    const query = page([{ field: 'score', order: 'desc' }], ['2.5', ID]);
    const part = (condition: string, order: string) =>
      `(select "id", "code", "score" as "__s0", "id" as "__s1", "score"::text as "__k0", "id"::text as "__k1" ` +
      `from "data"."item" where (TRUE) and ${condition} order by ${order} limit $1)`;
    expect(query.sql).toBe(
      `select "id", "code", "__k0", "__k1" from (` +
        [
          part('"score" = $2::double precision and "id" > $3::uuid', '"score" ASC, "id" ASC'),
          part('"score" < $2::double precision', '"score" DESC, "id" ASC'),
          part('"score" is null', '"score" ASC, "id" ASC'),
        ].join(' union all ') +
        `) as "__after" order by "__s0" DESC NULLS LAST, "__s1" ASC limit $1`,
    );
    expect(query.parameters).toEqual([3, '2.5', ID]);
  });

  it('has nothing after a cursor of nulls only', () => {
    const query = page([{ field: 'score' }, { field: 'id' }], [null, null]);
    expect(query.sql).toContain('where (TRUE) and false order by');
  });
});
