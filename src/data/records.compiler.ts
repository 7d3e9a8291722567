import { CompiledQuery } from 'kysely';
import { objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { ObjectMeta } from '../metadata/object-metadata.types';
import { FindQuery, MAX_ENGINE_LIMIT } from './data.types';
import { bindCast } from './field-value.codec';
import { compileOrderBy, compileProjection } from './order-by.compiler';
import { compileWhere, requireField } from './where.compiler';

/**
 * The statements of the records engine over one object's table (find, count, get, insert, update,
 * delete). Identifiers come from metadata through quoteIdent; every value is a bind parameter
 * carrying its column cast. Callers validate and encode values first (see DataService).
 */

type Row = Record<string, unknown>;

/** One page of records; each row also carries `__total`, the count of the whole filter (a window count, no second scan). */
export function compileFind(object: ObjectMeta, query: FindQuery): CompiledQuery<Row> {
  const params = new SqlParams();
  const projection = compileProjection(object, query.fields);
  const where = compileWhere(object, query.where, params);
  const orderBy = compileOrderBy(object, query.orderBy);
  const limit = params.add(engineLimit(query.limit));
  const offset = params.add(Math.max(0, Math.floor(query.offset)));
  return params.query(
    `select ${projection.sql}, count(*) over () as "__total" from ${objectTable(object.name)}
          where ${where} order by ${orderBy} limit ${limit} offset ${offset}`,
  );
}

/** The number of records matching `where`, as `count`. */
export function compileCount(object: ObjectMeta, where: unknown): CompiledQuery<{ count: string }> {
  const params = new SqlParams();
  return params.query(`select count(*) as "count" from ${objectTable(object.name)} where ${compileWhere(object, where, params)}`);
}

/** The record with this id, with the selected fields; the caller runs it only for a well-formed uuid. */
export function compileFindOne(object: ObjectMeta, id: unknown, fields: unknown): CompiledQuery<Row> {
  const projection = compileProjection(object, fields);
  return CompiledQuery.raw(`select ${projection.sql} from ${objectTable(object.name)} where "id" = $1::uuid`, [id]);
}

/** Inserts every record in one statement; a column some records leave out takes its default in those. */
export function compileInsert(object: ObjectMeta, records: Map<string, unknown>[]): CompiledQuery<Row> {
  const columns = [...new Set(records.flatMap((values) => [...values.keys()]))];
  const fields = columns.map((name) => requireField(object, name));
  const params = new SqlParams();
  const rowsSql = records.map(
    (values) =>
      `(${fields.map((f) => (values.has(f.name) ? `${params.add(values.get(f.name))}::${bindCast(f)}` : 'default')).join(', ')})`,
  );
  return params.query(
    columns.length
      ? `insert into ${objectTable(object.name)} (${fields.map((f) => quoteIdent(f.name)).join(', ')}) values ${rowsSql.join(', ')} returning *`
      : `insert into ${objectTable(object.name)} default values returning *`,
  );
}

/** Sets the given columns of one record and moves `updated_at` forward. */
export function compileUpdate(object: ObjectMeta, id: string, values: Map<string, unknown>): CompiledQuery<Row> {
  const params = new SqlParams();
  const sets = [...values.entries()].map(([name, value]) => {
    const field = requireField(object, name);
    return `${quoteIdent(name)} = ${params.add(value)}::${bindCast(field)}`;
  });
  sets.push(`"updated_at" = now()`);
  return params.query(
    `update ${objectTable(object.name)} set ${sets.join(', ')} where "id" = ${params.add(id)}::uuid returning *`,
  );
}

/** Deletes one record; returns its id when it existed. */
export function compileDelete(object: ObjectMeta, id: string): CompiledQuery<Row> {
  return CompiledQuery.raw(`delete from ${objectTable(object.name)} where "id" = $1::uuid returning "id"`, [id]);
}

/** Rows one engine call may return: the caller's limit, at least 1 and at most MAX_ENGINE_LIMIT. */
export function engineLimit(limit: number): number {
  return Math.min(Math.max(1, Math.floor(limit)), MAX_ENGINE_LIMIT);
}
