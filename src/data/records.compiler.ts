import { isComputed } from '../metadata/computed-fields';
import { CompiledQuery } from 'kysely';
import { BEFORE_ALIAS, type ChangeCapture, ROW_ALIAS, SNAPSHOT_SELECT, withChangeOutbox } from './change-outbox';
import { objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { fieldTypeOf } from '../metadata/field-types';
import { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import { FindQuery, MAX_ENGINE_LIMIT } from './data.types';
import { bindCast } from './field-value.codec';
import { fieldSql, selectSql } from './formula.compiler';
import { keysetParts, leadingParts, sortKeyColumns, type KeysetPart } from './keyset';
import { compileProjection, orderBySql, orderTerms, sortDirection, type OrderTerm } from './order-by.compiler';
import {
  compileRowFilter,
  compileScopedWhere,
  containsPattern,
  LIKE_ESCAPE,
  requireField,
  rowFilterCondition,
} from './where.compiler';

/**
 * The statements of the records engine over one object's table (find, count, get, insert, update,
 * delete). Identifiers come from metadata through quoteIdent; every value is a bind parameter
 * carrying its column cast. Callers validate and encode values first (see DataService).
 */

type Row = Record<string, unknown>;

/**
 * Each record's version: the id of the transaction that wrote its current row (Postgres' `xmin`),
 * as text. Every UPDATE writes a new row, so the version changes with every write, with no column
 * to keep up to date; freezing keeps the value, and a field cannot be named like it. Reused only
 * after 2^32 transactions, which is far beyond the life of a copy a client holds. A record read by
 * id, inserted or updated carries it as `__version` (field names cannot hold `__`).
 */
export const VERSION_ALIAS = '__version';
const VERSION_COLUMN = `${quoteIdent('xmin')}::text`;
const VERSION_SELECT = `${VERSION_COLUMN} as "${VERSION_ALIAS}"`;

/** `and` the row's version is one of `versions` (none: no condition), for conditional writes. */
function versionCondition(versions: readonly string[] | undefined, params: SqlParams): string {
  return versions ? ` and ${VERSION_COLUMN} = any(${params.add(versions)}::text[])` : '';
}

/** How a page is cut: by offset, or by keyset after a cursor's position. */
export interface PageCut {
  /** The sort keys (orderTerms of the query's orderBy). */
  terms: OrderTerm[];
  /** Keyset: the rows after this position (a decoded cursor); no offset. */
  after?: (string | null)[];
  /** One row more than the limit, to tell whether a next page exists (and build its cursor from the last row). */
  keys?: boolean;
  /**
   * With an offset page: its total in the same statement, counted up to `countUpTo + 1` only when the page
   * came back full (one that ends the matches tells its total itself). Each row then carries it as
   * `__count`, with `__estimate` as compileBoundedCount's; see pageWithCount.
   */
  countUpTo?: number;
}

/** The columns a page with its count (PageCut.countUpTo) adds to each of its rows. */
export const PAGE_COUNT = { count: '__count', estimate: '__estimate' } as const;

/**
 * One page of records, in one statement an index can serve when the order has one: the disjoint parts
 * of what the page may hold (after a cursor, keysetParts; else leadingParts), each read in its index's
 * order up to the page's end, merged in the query's order. A sort key the caller did not select comes
 * as `__k<i>` (sortKeyColumns). The total comes with it when asked (PageCut.countUpTo), else in a
 * statement of its own (compileBoundedCount).
 *
 * At an offset, every row before the page is read and sorted too: only their ids and sort keys are
 * (narrow rows, which an index on (field, id) gives alone), and the page's own records are then read
 * by id, `limit` rows however deep the page.
 */
export function compileFind(
  object: ObjectMeta,
  query: FindQuery,
  cut: PageCut = { terms: orderTerms(object, query.orderBy) },
): CompiledQuery<Row> {
  const params = new SqlParams();
  const { projection, where } = selectParts(object, query, params);
  const limit = engineLimit(query.limit) + (cut.keys ? 1 : 0);
  const offset = cut.after ? 0 : Math.max(0, Math.floor(query.offset));
  const parts = cut.after ? keysetParts(cut.terms, cut.after, params) : leadingParts(cut.terms, params);
  const page = { object, where, terms: cut.terms, parts, limit, offset };
  const counted = (statement: string) =>
    cut.countUpTo === undefined || cut.after
      ? params.query(statement)
      : params.query(pageWithCount(statement, { ...page, fields: projection.fields, cap: cut.countUpTo }, params));
  if (!offset) return counted(pageRowsSql(page, projection, params));
  const idOnly = { sql: quoteIdent('id'), fields: [requireField(object, 'id')] };
  const keys = sortKeyColumns(cut.terms, idOnly.fields);
  const columns = [
    ...projection.fields.map((f) => selectSql(f, params, 't')),
    ...sortKeyColumns(cut.terms, projection.fields).aliases.map((alias) => `"__keys".${alias}`),
  ];
  const order = cut.terms.map((t, i) => `"__keys".${keys.refs[i]} ${sortDirection(t)}`).join(', ');
  return counted(
    `select ${columns.join(', ')} from (${pageRowsSql(page, idOnly, params)}) as "__keys" ` +
      `join ${objectTable(object.name)} as "t" on "t"."id" = "__keys"."id" order by ${order}`,
  );
}

/**
 * A page and its total in one statement (one round trip instead of two): the page is read first, as a
 * statement of its own would read it (a materialized CTE is planned apart), and only when it came back
 * full are the matches counted, up to `cap + 1` as compileBoundedCount counts them (a subquery in a CASE
 * branch runs only when the branch is taken). The rows come back in the page's order.
 */
function pageWithCount(
  statement: string,
  page: { object: ObjectMeta; where: string; terms: readonly OrderTerm[]; fields: FieldMeta[]; limit: number; cap: number },
  params: SqlParams,
): string {
  const table = objectTable(page.object.name);
  const full = `(select count(*) from "__found") >= ${params.add(page.limit)}`;
  const columns = [
    `case when ${full} then (select count(*) from ${boundedMatches(table, page.where, page.cap, params)}) end as "${PAGE_COUNT.count}"`,
  ];
  if (page.where === 'TRUE')
    columns.push(`case when ${full} then ${tableEstimate(table, params)} end as "${PAGE_COUNT.estimate}"`);
  const keys = sortKeyColumns(page.terms, page.fields);
  const order = page.terms.map((t, i) => `${keys.refs[i]} ${sortDirection(t)}`).join(', ');
  return `with "__found" as materialized (${statement}) select *, ${columns.join(', ')} from "__found" order by ${order}`;
}

/** Up to `cap + 1` of the rows matching `scoped`, as a derived table to count. */
function boundedMatches(table: string, scoped: string, cap: number, params: SqlParams): string {
  return `(select 1 from ${table} where ${scoped} limit ${params.add(cap + 1)}) as "__matches"`;
}

/** The table's rows as the planner would estimate them (its last counted rows per page times its pages now; null before its first analyze). */
function tableEstimate(table: string, params: SqlParams): string {
  return (
    `(select case when c.reltuples >= 0 and c.relpages > 0 then c.reltuples / c.relpages * ` +
    `(pg_relation_size(c.oid) / current_setting('block_size')::float8) end from pg_class c ` +
    `where c.oid = ${params.add(table)}::regclass)`
  );
}

/** What pageRowsSql reads: the rows after `offset` of the parts, `limit` of them. */
interface PageParts {
  object: ObjectMeta;
  where: string;
  terms: readonly OrderTerm[];
  parts: readonly KeysetPart[];
  limit: number;
  offset: number;
}

/**
 * The first `limit` rows after `offset` of the parts merged in the query's order, with the columns of
 * `projection` and the sort keys it lacks. One part (order by id, after a cursor; any order whose
 * first key an index serves in one scan) is the page itself. Parts are disjoint, so the merge holds
 * each row once, and it sorts a page (and the offset) per part.
 */
function pageRowsSql(
  { object, where, terms, parts, limit, offset }: PageParts,
  projection: { sql: string; fields: FieldMeta[] },
  params: SqlParams,
): string {
  const table = objectTable(object.name);
  const keys = sortKeyColumns(terms, projection.fields, params);
  const select = [projection.sql, ...keys.extra].join(', ');
  const page = `limit ${params.add(limit)}${offset ? ` offset ${params.add(offset)}` : ''}`;
  // leadingParts' one part has the condition `true`: the where alone.
  const scoped = (condition: string) => (condition === 'true' ? where : `(${where}) and ${condition}`);
  if (parts.length <= 1) {
    // A forged cursor of nulls only has nothing after it.
    const [part] = parts.length ? parts : [{ condition: 'false', orderBy: orderBySql(terms, undefined, params) }];
    return `select ${select} from ${table} where ${scoped(part.condition)} order by ${part.orderBy} ${page}`;
  }
  const each = params.add(limit + offset);
  const branches = parts.map(
    (part) => `(select ${select} from ${table} where ${scoped(part.condition)} order by ${part.orderBy} limit ${each})`,
  );
  const columns = [...projection.fields.map((f) => quoteIdent(f.name)), ...keys.aliases];
  const order = terms.map((t, i) => `${keys.refs[i]} ${sortDirection(t)}`).join(', ');
  return `select ${columns.join(', ')} from (${branches.join(' union all ')}) as "__page" order by ${order} ${page}`;
}

/** What compileStream reads: a find's filter, order and fields, with no paging. */
export type StreamQuery = Pick<FindQuery, 'where' | 'search' | 'orderBy' | 'fields'>;

/**
 * Every record matching the query, in its order (ties broken by id), with no limit: the statement a
 * server-side cursor reads a batch at a time (DataPool.cursor). The same projection, scoped where
 * and ORDER BY as compileFind; `fields` are the selected columns in order (id first).
 */
export function compileStream(object: ObjectMeta, query: StreamQuery): { query: CompiledQuery<unknown[]>; fields: FieldMeta[] } {
  const params = new SqlParams();
  const { projection, where } = selectParts(object, query, params);
  const orderBy = orderBySql(orderTerms(object, query.orderBy), undefined, params);
  return {
    query: params.query(`select ${projection.sql} from ${objectTable(object.name)} where ${where} order by ${orderBy}`),
    fields: projection.fields,
  };
}

/**
 * The columns and the caller's scoped where of a read: shared by compileFind and compileStream. (A formula's
 * SQL adds bind parameters, so only SQL a statement uses is compiled: an unused parameter has no type.)
 */
function selectParts(
  object: ObjectMeta,
  query: StreamQuery,
  params: SqlParams,
): { projection: { sql: string; fields: FieldMeta[] }; where: string } {
  const projection = compileProjection(object, query.fields, { params });
  const where = compileScopedWhere(object, query.where, params, query.search);
  return { projection, where };
}

/** The number of records matching `where` (and `search`), as `count`. */
export function compileCount(object: ObjectMeta, where: unknown, search?: string): CompiledQuery<{ count: string }> {
  const params = new SqlParams();
  return params.query(
    `select count(*) as "count" from ${objectTable(object.name)} where ${compileScopedWhere(object, where, params, search)}`,
  );
}

/**
 * The records matching `where` (and `search`) counted up to `cap + 1`, as `count`: reads `cap + 1`
 * rows at most, however many match. `cap + 1` says "more than cap". Without any condition (no where,
 * search or row filter), also `estimate`: the table's rows as the planner would estimate them (its
 * last counted rows per page times its pages now; null before its first analyze), which spares asking
 * the planner (compileCountEstimate).
 */
export function compileBoundedCount(
  object: ObjectMeta,
  where: unknown,
  search: string | undefined,
  cap: number,
): CompiledQuery<{ count: string; estimate?: number | null }> {
  const params = new SqlParams();
  const table = objectTable(object.name);
  const scoped = compileScopedWhere(object, where, params, search);
  const estimate = scoped === 'TRUE' ? `, ${tableEstimate(table, params)} as "estimate"` : '';
  return params.query(`select count(*) as "count"${estimate} from ${boundedMatches(table, scoped, cap, params)}`);
}

/** The plan PostgreSQL would run to read the records matching `where` (and `search`), as JSON: its top node's `Plan Rows` is its estimate of their number. */
export function compileCountEstimate(
  object: ObjectMeta,
  where: unknown,
  search?: string,
): CompiledQuery<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }> {
  const params = new SqlParams();
  const scoped = compileScopedWhere(object, where, params, search);
  return params.query(`explain (format json) select 1 from ${objectTable(object.name)} where ${scoped}`);
}

/** The record with this id, with the selected fields and its version; the caller runs it only for a well-formed uuid. */
export function compileFindOne(object: ObjectMeta, id: unknown, fields: unknown): CompiledQuery<Row> {
  const params = new SqlParams();
  const projection = compileProjection(object, fields, { params });
  const where = `"id" = ${params.add(id)}::uuid${rowFilterCondition(object, params)}`;
  return params.query(`select ${projection.sql}, ${VERSION_SELECT} from ${objectTable(object.name)} where ${where}`);
}

/**
 * Inserts every record in one statement; a column some records leave out takes its default in those.
 * With `capture`, the statement also appends each record's change to the feed (see withChangeOutbox).
 */
export function compileInsert(object: ObjectMeta, records: Map<string, unknown>[], capture?: ChangeCapture): CompiledQuery<Row> {
  const columns = [...new Set(records.flatMap((values) => [...values.keys()]))];
  const fields = columns.map((name) => requireField(object, name));
  const params = new SqlParams();
  const rowsSql = records.map(
    (values) =>
      `(${fields.map((f) => (values.has(f.name) ? `${params.add(values.get(f.name))}::${bindCast(f)}` : 'default')).join(', ')})`,
  );
  const target = `${objectTable(object.name)} as ${ROW_ALIAS}`;
  const returning = writeReturning(object, params, capture, ROW_ALIAS);
  const sql = columns.length
    ? `insert into ${target} (${fields.map((f) => quoteIdent(f.name)).join(', ')}) values ${rowsSql.join(', ')} returning ${returning}`
    : `insert into ${target} default values returning ${returning}`;
  if (!capture) return params.query(sql);
  // A create sets every field: a constant list, not one read from each row.
  const created = { ...capture, changedFields: storedFieldNames(object) };
  return params.query(withChangeOutbox(object.name, sql, writeColumns(object), params, created));
}

/** The fields with a column (computed fields have none). */
function storedFieldNames(object: ObjectMeta): string[] {
  return object.fields.filter((f) => !isComputed(f)).map((f) => f.name);
}

/**
 * Sets the given columns of one record and moves `updated_at` forward; with `versions`, only if
 * the record is at one of them. The check is in the statement's WHERE, so it holds against a
 * concurrent write: an UPDATE that waited for another one re-checks the row that one left.
 */
export function compileUpdate(
  object: ObjectMeta,
  id: string,
  values: Map<string, unknown>,
  versions?: readonly string[],
  capture?: ChangeCapture,
): CompiledQuery<Row> {
  const params = new SqlParams();
  const sets = [...values.entries()].map(([name, value]) => {
    const field = requireField(object, name);
    return `${quoteIdent(name)} = ${params.add(value)}::${bindCast(field)}`;
  });
  return updateStatement(object, id, [...values.keys()], sets, params, versions, capture);
}

/**
 * Sets columns of one record back to values as the change feed keeps them (`to_jsonb` of the row,
 * `raw`: column → value), read back by jsonb_populate_record so each takes its column's type exactly;
 * for restores and reverts, whose values come from history, not from a client.
 */
export function compileUpdateRaw(
  object: ObjectMeta,
  id: string,
  raw: Record<string, unknown>,
  capture: ChangeCapture,
): CompiledQuery<Row> {
  const params = new SqlParams();
  const names = Object.keys(raw).filter((name) => object.fields.some((f) => f.name === name && !isComputed(f)));
  // Bound only when used: a parameter no statement reads has no type Postgres could infer.
  const source = names.length
    ? `jsonb_populate_record(null::${objectTable(object.name)}, ${params.add(JSON.stringify(raw))}::jsonb)`
    : '';
  const sets = names.map((name) => `${quoteIdent(name)} = (${source}).${quoteIdent(name)}`);
  // Fields without a column the caller names (links a revert sets back) are changes of the record too.
  const changedFields = [...names, ...(capture.changedFields ?? []).filter((name) => !names.includes(name))];
  return updateStatement(object, id, names, sets, params, undefined, { ...capture, changedFields });
}

function updateStatement(
  object: ObjectMeta,
  id: string,
  names: readonly string[],
  sets: string[],
  params: SqlParams,
  versions?: readonly string[],
  capture?: ChangeCapture,
): CompiledQuery<Row> {
  sets.push(`"updated_at" = now()`);
  const where = `"id" = ${params.add(id)}::uuid${versionCondition(versions, params)}${rowFilterCondition(object, params)}`;
  if (!capture) {
    return params.query(
      `update ${objectTable(object.name)} set ${sets.join(', ')} where ${where} returning ${writeReturning(object, params)}`,
    );
  }
  const lock = `"id" = ${params.add(id)}::uuid`;
  const sql = updateKeepingBefore(
    object.name,
    names,
    sets.join(', '),
    lock,
    where,
    writeReturning(object, params, capture, ROW_ALIAS),
  );
  return params.query(withChangeOutbox(object.name, sql, writeColumns(object), params, capture));
}

/**
 * An UPDATE of `objectName` that also returns, as BEFORE_ALIAS, the values of `names` it replaces: they are
 * read under the row's lock (the rows `lock` picks, FOR UPDATE), so they are those of the latest committed
 * row, which the update then changes. `where` narrows further (a version, a row filter).
 */
function updateKeepingBefore(
  objectName: string,
  names: readonly string[],
  sets: string,
  lock: string,
  where: string | undefined,
  returning: string,
): string {
  const table = objectTable(objectName);
  const old = `(select "id" as "__old_id", ${jsonObjectOf(names)} as "${BEFORE_ALIAS}" from ${table} where ${lock} for update) as "__old"`;
  const condition = `${ROW_ALIAS}."id" = "__old"."__old_id"${where ? ` and ${where}` : ''}`;
  return `update ${table} as ${ROW_ALIAS} set ${sets} from ${old} where ${condition} returning ${returning}, "__old"."${BEFORE_ALIAS}"`;
}

/**
 * Inserts a record as the change feed kept it (`raw`, the whole row: a trashed record coming back),
 * every column from it but `updated_at`, which is now. Its change is a create of every field.
 */
export function compileInsertRaw(object: ObjectMeta, raw: Record<string, unknown>, capture: ChangeCapture): CompiledQuery<Row> {
  const params = new SqlParams();
  const row = `jsonb_populate_record(null::${objectTable(object.name)}, ${params.add(JSON.stringify(raw))}::jsonb || jsonb_build_object('updated_at', now()))`;
  const sql = `insert into ${objectTable(object.name)} as ${ROW_ALIAS} select * from ${row} returning ${writeReturning(object, params, capture, ROW_ALIAS)}`;
  const created = { ...capture, changedFields: storedFieldNames(object) };
  return params.query(withChangeOutbox(object.name, sql, writeColumns(object), params, created));
}

/**
 * A jsonb object of the named columns' values (as to_jsonb would write them), built in pieces:
 * jsonb_build_object takes at most 100 arguments.
 */
export function jsonObjectOf(columns: readonly string[], alias?: string): string {
  if (!columns.length) return `'{}'::jsonb`;
  const pieces: string[] = [];
  for (let at = 0; at < columns.length; at += 50) {
    const pairs = columns.slice(at, at + 50).map((c) => `'${c}', ${alias ? `${alias}.` : ''}${quoteIdent(c)}`);
    pieces.push(`jsonb_build_object(${pairs.join(', ')})`);
  }
  return pieces.join(' || ');
}

/** Deletes one record (with `versions`, only at one of them, as in compileUpdate); returns its id when it did. */
export function compileDelete(
  object: ObjectMeta,
  id: string,
  versions?: readonly string[],
  capture?: ChangeCapture,
): CompiledQuery<Row> {
  const params = new SqlParams();
  const where = `"id" = ${params.add(id)}::uuid${versionCondition(versions, params)}${rowFilterCondition(object, params)}`;
  if (!capture) return params.query(`delete from ${objectTable(object.name)} where ${where} returning "id"`);
  const sql = `delete from ${objectTable(object.name)} as ${ROW_ALIAS} where ${where} returning "id", ${SNAPSHOT_SELECT}`;
  return params.query(withChangeOutbox(object.name, sql, ['"id"'], params, capture));
}

/**
 * Clears `field` (a lookup of `referrer`) where it points to one of `ids`: a delete of those records
 * moves them to the trash, and what pointed to them reads null until they come back. Each cleared
 * record's change (before: the id) belongs to the delete's change set.
 */
export function compileClearReferences(
  referrer: ObjectMeta,
  field: FieldMeta,
  ids: readonly string[],
  capture: ChangeCapture,
): CompiledQuery<Row> {
  const params = new SqlParams();
  const lock = `${quoteIdent(field.name)} = any(${params.add(ids)}::uuid[])`;
  return lookupUpdate(referrer, field, 'null', lock, capture, params);
}

/**
 * Points `field` (a lookup of `referrer`) back to `id`, a record back from the trash, in the records its
 * delete (change set `deletedIn`) cleared and that still read null.
 */
export function compileRepointReferences(
  referrer: ObjectMeta,
  field: FieldMeta,
  id: string,
  deletedIn: string,
  capture: ChangeCapture,
): CompiledQuery<Row> {
  const params = new SqlParams();
  const target = `${params.add(id)}::uuid`;
  const cleared =
    `select c."record_id" from "record_changes" c where c."change_set_id" = ${params.add(deletedIn)}::uuid ` +
    `and c."object" = ${params.add(referrer.name)} and c."op" = 'update' and c."before" ->> ${params.add(field.name)} = ${target}::text`;
  const lock = `${quoteIdent(field.name)} is null and "id" in (${cleared})`;
  return lookupUpdate(referrer, field, target, lock, capture, params);
}

/** Sets one lookup of the rows `lock` picks to `value`, each row's change appended to the feed (clear and repoint). */
function lookupUpdate(
  referrer: ObjectMeta,
  field: FieldMeta,
  value: string,
  lock: string,
  capture: ChangeCapture,
  params: SqlParams,
): CompiledQuery<Row> {
  const sets = `${quoteIdent(field.name)} = ${value}, "updated_at" = now()`;
  const sql = updateKeepingBefore(referrer.name, [field.name], sets, lock, undefined, `${ROW_ALIAS}."id", ${SNAPSHOT_SELECT}`);
  const changed = { ...capture, op: 'update' as const, changedFields: [field.name] };
  return params.query(withChangeOutbox(referrer.name, sql, ['"id"'], params, changed));
}

/** One lookup field of a write whose values must point to records the caller may read (see compileReadableReferences). */
export interface ReferenceCheck {
  field: FieldMeta;
  /** The caller's view of the target object (its row filter); absent when the caller may not read it at all. */
  target?: ObjectMeta;
  /** The values the write sets (lower-case UUIDs). */
  ids: string[];
}

/**
 * Of each check's ids (`k` = the check's index), those the caller may point to: the ids of target
 * records inside its row filter on the target, and the values its updated records (`updatedIds`,
 * under the caller's row filter on `object`) already hold in that field, which it reads there anyway.
 * Undefined when no id can pass (every target unreadable, no update): nothing to ask.
 */
export function compileReadableReferences(
  object: ObjectMeta,
  checks: readonly ReferenceCheck[],
  updatedIds: readonly string[],
): CompiledQuery<{ k: number; id: string }> | undefined {
  const params = new SqlParams();
  const parts: string[] = [];
  checks.forEach((check, k) => {
    if (!check.target && !updatedIds.length) return;
    const ids = `${params.add(check.ids)}::uuid[]`;
    if (check.target) {
      const filter = compileRowFilter(check.target, params, { tableAlias: 't' }) ?? 'TRUE';
      parts.push(
        `select ${k} as "k", "t"."id"::text as "id" from ${objectTable(check.target.name)} as "t" ` +
          `where "t"."id" = any(${ids}) and (${filter})`,
      );
    }
    if (updatedIds.length) {
      const column = `"o".${quoteIdent(check.field.name)}`;
      const filter = compileRowFilter(object, params, { tableAlias: 'o' }) ?? 'TRUE';
      parts.push(
        `select ${k} as "k", ${column}::text as "id" from ${objectTable(object.name)} as "o" ` +
          `where "o"."id" = any(${params.add(updatedIds)}::uuid[]) and ${column} = any(${ids}) and (${filter})`,
      );
    }
  });
  return parts.length ? params.query(parts.join(' union all ')) : undefined;
}

/** Rows one engine call may return: the caller's limit, at least 1 and at most MAX_ENGINE_LIMIT. */
export function engineLimit(limit: number): number {
  return Math.min(Math.max(1, Math.floor(limit)), MAX_ENGINE_LIMIT);
}

/**
 * Whether a written row is still one the caller may write (its row filter over the new values), as
 * `__in_scope`: DataService refuses the write, in its transaction, when it is not.
 */
export const IN_SCOPE_ALIAS = '__in_scope';

/**
 * What a write returns: every field of the caller's view of the object (never `*`, which would
 * include hidden fields), its version, and with a row filter whether the new row is inside it.
 */
function writeReturning(object: ObjectMeta, params: SqlParams, capture?: ChangeCapture, rowAlias?: string): string {
  // Computed fields read the written row by its alias (a rollup's subquery has an "id" of its own); stored ones by name.
  const projection = compileProjection(object, undefined, { params }).fields.map((f) =>
    isComputed(f) ? selectSql(f, params, rowAlias) : quoteIdent(f.name),
  );
  let columns = `${projection.join(', ')}, ${VERSION_SELECT}`;
  // The feed keeps the whole row, hidden fields included: each reader's own view is cut from it.
  if (capture) columns += `, ${SNAPSHOT_SELECT}`;
  const scope = compileRowFilter(object, params, { asValue: true });
  return scope === undefined ? columns : `${columns}, ${scope} as "${IN_SCOPE_ALIAS}"`;
}

/** The columns of writeReturning as the statement wrapping the write selects them (the snapshot stays inside). */
function writeColumns(object: ObjectMeta): string[] {
  const columns = [...object.fields.map((f) => quoteIdent(f.name)), `"${VERSION_ALIAS}"`];
  if (object.rowFilter) columns.push(`"${IN_SCOPE_ALIAS}"`);
  return columns;
}

/** What compileFieldValues counts. */
export interface FieldValuesQuery {
  where?: unknown;
  /** Only values containing this text, ignoring case. */
  contains?: string;
  limit: number;
}

/**
 * Distinct values of one field with how many records hold each (`value`, `count`), most frequent
 * first, then by value; a multiselect counts each option. Over the caller's scoped where.
 */
export function compileFieldValues(object: ObjectMeta, field: FieldMeta, query: FieldValuesQuery): CompiledQuery<Row> {
  const params = new SqlParams();
  const column = fieldSql(field, params);
  const set = fieldTypeOf(field.type).shape === 'set';
  const from = set
    ? `${objectTable(object.name)} cross join lateral unnest(${column}) as "__v"("__value")`
    : objectTable(object.name);
  // Field names cannot hold "__", so the element column cannot shadow a field the where names.
  const value = set ? '"__v"."__value"' : column;
  let where = compileScopedWhere(object, query.where, params);
  if (query.contains !== undefined && query.contains !== '') {
    where = `${where} and ${value}::text ILIKE ${params.add(containsPattern(query.contains))} ${LIKE_ESCAPE}`;
  }
  return params.query(
    `select ${value} as "value", count(*) as "count" from ${from} where ${where} ` +
      `group by 1 order by 2 desc, 1 asc nulls last limit ${params.add(engineLimit(query.limit))}`,
  );
}
