import { isComputed } from '../metadata/computed-fields';
import { isLinks } from '../metadata/links-fields';
import { CompiledQuery } from 'kysely';
import { objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import type { TrashedLinks } from '../data/change-outbox';
import type { LoggedLinkChange } from '../data/links.write';
import { compileRowFilter } from '../data/where.compiler';
import { fieldSql, selectSql } from '../data/formula.compiler';
import type { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';

/**
 * The statements of record history, the trash and change sets, over the change feed's outbox
 * (`record_changes`): each change keeps the row as the write left it (`record`, cut to the fields an
 * update set once `compacted`) and, for an update, the values it replaced (`before`). A reader's view
 * is applied as the feed applies it: the kept row read back as a row of the object's table
 * (jsonb_populate_record), only the reader's fields selected, its row filter over that row.
 */

/**
 * A timestamp as ISO 8601 text in UTC: milliseconds for what people read, microseconds for a list position that
 * a cursor resumes from (timestamptz keeps microseconds, so a coarser one would skip or repeat rows).
 */
const AT = (column: string, precision: 'MS' | 'US' = 'MS') =>
  `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.${precision}"Z"')`;

/** The fields a change writes (a formula is computed, never written): what a version's changes are of. */
export function storedFields(object: ObjectMeta): FieldMeta[] {
  return object.fields.filter((f) => !isComputed(f));
}

/** The column alias of the reader's i-th field after (`a`) and before (`b`) a change. */
export function afterAlias(index: number): string {
  return `__a${index}`;
}
export function beforeAlias(index: number): string {
  return `__b${index}`;
}

/** The kept row `source` (jsonb) as a row of the object's table, aliased `alias`. */
function populated(object: ObjectMeta, source: string, alias: string): string {
  return `jsonb_populate_record(null::${objectTable(object.name)}, ${source}) as ${quoteIdent(alias)}`;
}

function projected(fields: readonly FieldMeta[], alias: string, name: (i: number) => string): string[] {
  return fields.map((f, i) => `${quoteIdent(alias)}.${quoteIdent(f.name)} as "${name(i)}"`);
}

/**
 * Of `ids`, those the reader may read now: live records inside its row filter, and trashed ones whose
 * row as deleted is. History, change sets and their reverts show a record to a reader only then.
 */
export function compileVisibleIds(object: ObjectMeta, ids: readonly string[]): CompiledQuery<{ id: string }> {
  const params = new SqlParams();
  const list = `${params.add(ids)}::uuid[]`;
  const live = compileRowFilter(object, params, { tableAlias: 't' }) ?? 'TRUE';
  const trashed = compileRowFilter(object, params, { tableAlias: 'r' }) ?? 'TRUE';
  return params.query(
    `select "t"."id"::text as "id" from ${objectTable(object.name)} as "t" where "t"."id" = any(${list}) and (${live}) ` +
      `union all select tr."record_id"::text as "id" from "record_trash" tr ` +
      `join "record_changes" c on c."id" = tr."change_id" cross join lateral ${populated(object, 'c."record"', 'r')} ` +
      `where tr."object" = ${params.add(object.name)} and tr."record_id" = any(${list}) and (${trashed})`,
  );
}

/** The ids of live records of `object` that its row filter (the caller's) hides: none without one. */
export function compileHiddenIds(object: ObjectMeta, ids: readonly string[]): CompiledQuery<{ id: string }> | undefined {
  const params = new SqlParams();
  const filter = compileRowFilter(object, params, { tableAlias: 't' });
  if (!filter) return undefined;
  return params.query(
    `select "t"."id"::text as "id" from ${objectTable(object.name)} as "t" ` +
      `where "t"."id" = any(${params.add(ids)}::uuid[]) and not coalesce((${filter}), false)`,
  );
}

/** The pairs a change set made or removed, in the order logged (links.write.ts). */
export function compileLinkChanges(changeSetId: string, limit: number): CompiledQuery<LoggedLinkChange> {
  return CompiledQuery.raw(
    `select "link_table", "source_id"::text as "source_id", "target_id"::text as "target_id", "added" ` +
      `from "link_changes" where "change_set_id" = $1::uuid order by "id" limit $2`,
    [changeSetId, limit],
  );
}

export interface VersionRow {
  version: string;
  op: 'create' | 'update' | 'delete';
  at: string;
  key_id: string | null;
  change_set_id: string | null;
  via: string | null;
  changed_fields: string[];
  [alias: string]: unknown;
}

/**
 * A record's versions, newest first, before `before` (a version) when given, at most `limit`; with
 * `field`, only the versions that set it (creates and deletes set every field); updates of none of the
 * `visible` fields left out. Each carries the
 * reader's stored fields (storedFields) after (afterAlias) and, for an update, before it (beforeAlias).
 */
export function compileVersions(
  object: ObjectMeta,
  id: string,
  page: { before?: string; limit: number; field?: string; visible: readonly string[] },
): CompiledQuery<VersionRow> {
  const params = new SqlParams();
  const conditions = [`c."object" = ${params.add(object.name)}`, `c."record_id" = ${params.add(id)}::uuid`];
  // An update of fields hidden from the reader only is not one of its versions.
  conditions.push(`(c."op" <> 'update' or c."changed_fields" && ${params.add(page.visible)}::text[])`);
  if (page.before !== undefined) conditions.push(`c."id" < ${params.add(page.before)}::bigint`);
  if (page.field !== undefined) conditions.push(`(c."op" <> 'update' or ${params.add(page.field)} = any(c."changed_fields"))`);
  const columns = [
    `c."id"::text as "version"`,
    `c."op"`,
    `${AT('c."at"')} as "at"`,
    `c."key_id"`,
    `c."change_set_id"::text as "change_set_id"`,
    `cs."via"`,
    `c."changed_fields"`,
    ...projected(storedFields(object), 'a', afterAlias),
    ...projected(storedFields(object), 'b', beforeAlias),
  ];
  return params.query(
    `select ${columns.join(', ')} from "record_changes" c left join "change_sets" cs on cs."id" = c."change_set_id" ` +
      `cross join lateral ${populated(object, 'c."record"', 'a')} ` +
      `cross join lateral ${populated(object, `coalesce(c."before", '{}'::jsonb)`, 'b')} ` +
      `where ${conditions.join(' and ')} order by c."id" desc limit ${params.add(page.limit)}`,
  );
}

export interface KeptChange {
  id: string;
  op: 'create' | 'update' | 'delete';
  record_id: string;
  changed_fields: string[];
  record: Record<string, unknown>;
  before: Record<string, unknown> | null;
  compacted: boolean;
}

const KEPT_COLUMNS = `c."id"::text as "id", c."op", c."record_id"::text as "record_id", c."changed_fields", c."record", c."before", c."compacted"`;

/** A record's changes from `version` on (it included), newest first: what rebuilding it at `version` reads. */
export function compileChangesSince(object: ObjectMeta, id: string, version: string): CompiledQuery<KeptChange> {
  const params = new SqlParams();
  return params.query(
    `select ${KEPT_COLUMNS} from "record_changes" c where c."object" = ${params.add(object.name)} ` +
      `and c."record_id" = ${params.add(id)}::uuid and c."id" >= ${params.add(version)}::bigint order by c."id" desc`,
  );
}

/**
 * The changes of a change set to records of its own object, in the order they were made, at most `limit`
 * (a delete's clearing of the lookups that pointed to its record is undone with the record, not by itself).
 */
export function compileChangeSetChanges(changeSetId: string, limit: number): CompiledQuery<KeptChange> {
  return CompiledQuery.raw(
    `select ${KEPT_COLUMNS} from "record_changes" c where c."change_set_id" = $1::uuid ` +
      `and c."object" = (select cs."object" from "change_sets" cs where cs."id" = $1::uuid) order by c."id" limit $2`,
    [changeSetId, limit],
  );
}

/** The whole current rows (`to_jsonb`) of the records of `ids` that are live, locked for update when `lock`. */
export function compileLiveRows(
  object: ObjectMeta,
  ids: readonly string[],
  lock = false,
): CompiledQuery<{ id: string; row: Record<string, unknown>; version: string }> {
  return CompiledQuery.raw(
    `select "t"."id"::text as "id", to_jsonb("t") as "row", "t"."xmin"::text as "version" from ${objectTable(object.name)} as "t" ` +
      `where "t"."id" = any($1::uuid[])${lock ? ' order by "t"."id" for update' : ''}`,
    [ids],
  );
}

/** Changes of the records made after each one's given change (`after[i]` for `ids[i]`): what a revert conflicts with. */
export function compileLaterChanges(
  objectName: string,
  ids: readonly string[],
  after: readonly string[],
): CompiledQuery<{ record_id: string; op: string; changed_fields: string[]; before: Record<string, unknown> | null }> {
  return CompiledQuery.raw(
    `select c."record_id"::text as "record_id", c."op", c."changed_fields", c."before" from "record_changes" c ` +
      `join unnest($2::uuid[], $3::bigint[]) as s("rid", "after") on c."record_id" = s."rid" and c."id" > s."after" ` +
      `where c."object" = $1 order by c."id"`,
    [objectName, ids, after],
  );
}

/** Kept rows read back as rows of the object with the reader's fields (in `raws` order): to decode them. */
export function compileReadBack(
  object: ObjectMeta,
  raws: readonly Record<string, unknown>[],
): CompiledQuery<Record<string, unknown>> {
  const params = new SqlParams();
  const columns = object.fields.map((f) => selectSql(f, params, 'r'));
  return params.query(
    `select ${columns.join(', ')} from jsonb_array_elements(${params.add(JSON.stringify(raws))}::jsonb) with ordinality as e("v", "n") ` +
      `cross join lateral ${populated(object, 'e."v"', 'r')} order by e."n"`,
  );
}

export interface TrashRow {
  id: string;
  deleted_at: string;
  key_id: string | null;
  change_set_id: string | null;
  [field: string]: unknown;
}

/** A page of the object's trash the reader may see, newest first, after a (deleted_at, id) position. */
export function compileTrashPage(object: ObjectMeta, page: { after?: [string, string]; limit: number }): CompiledQuery<TrashRow> {
  const params = new SqlParams();
  const filter = compileRowFilter(object, params, { tableAlias: 'r' }) ?? 'TRUE';
  const conditions = [`tr."object" = ${params.add(object.name)}`, `(${filter})`];
  if (page.after) {
    conditions.push(
      `(tr."deleted_at", tr."record_id") < (${params.add(page.after[0])}::timestamptz, ${params.add(page.after[1])}::uuid)`,
    );
  }
  const columns = object.fields.map(
    (f, i) => `${isLinks(f) ? trashedLinksSql(f, params) : fieldSql(f, params, 'r')} as "${afterAlias(i)}"`,
  );
  return params.query(
    `select tr."record_id"::text as "id", ${AT('tr."deleted_at"', 'US')} as "deleted_at", ` +
      `tr."key_id", tr."change_set_id"::text as "change_set_id", ${columns.join(', ')} ` +
      `from "record_trash" tr join "record_changes" c on c."id" = tr."change_id" ` +
      `cross join lateral ${populated(object, 'c."record"', 'r')} ` +
      `where ${conditions.join(' and ')} order by tr."deleted_at" desc, tr."record_id" desc limit ${params.add(page.limit)}`,
  );
}

/**
 * A links field of a trashed record (`tr`): the links its trash entry keeps, those a restore would make again (to
 * records still there), as the reader's view of the target reads them, in their order.
 */
function trashedLinksSql(field: FieldMeta, params: SqlParams): string {
  const meta = field.related!;
  const scope = meta.scope;
  // Set by access on every links field of a reader's view; without it, nothing is shown.
  if (!scope) return `'{}'::text[]`;
  const filter = compileRowFilter(scope, params, { tableAlias: 'x' });
  return (
    `(select coalesce(array_agg(x."id"::text order by e."n"), '{}'::text[]) ` +
    `from jsonb_array_elements(coalesce(tr."links", '[]'::jsonb)) as le ` +
    `cross join lateral jsonb_array_elements_text(le -> 'ids') with ordinality as e("id", "n") ` +
    `join ${objectTable(scope.name)} as x on x."id" = e."id"::uuid ` +
    `where le ->> 'table' = ${params.add(meta.link!.table)} and le ->> 'self' = ${params.add(meta.link!.selfColumn)}` +
    `${filter ? ` and (${filter})` : ''})`
  );
}

/** A trashed record's row as deleted, locked; `visible` = the reader's row filter over it. */
export function compileTrashed(
  object: ObjectMeta,
  id: string,
): CompiledQuery<{
  change_id: string;
  change_set_id: string | null;
  record: Record<string, unknown>;
  links: TrashedLinks[] | null;
  visible: boolean;
}> {
  const params = new SqlParams();
  const filter = compileRowFilter(object, params, { tableAlias: 'r', asValue: true }) ?? 'TRUE';
  return params.query(
    `select tr."change_id"::text as "change_id", tr."change_set_id"::text as "change_set_id", c."record", tr."links", ` +
      `${filter} as "visible" ` +
      `from "record_trash" tr ` +
      `join "record_changes" c on c."id" = tr."change_id" cross join lateral ${populated(object, 'c."record"', 'r')} ` +
      `where tr."object" = ${params.add(object.name)} and tr."record_id" = ${params.add(id)}::uuid for update of tr`,
  );
}

/** Takes records out of the trash (restored or purged). */
export function compileUntrash(objectName: string, ids: readonly string[]): CompiledQuery<{ record_id: string }> {
  return CompiledQuery.raw(
    `delete from "record_trash" where "object" = $1 and "record_id" = any($2::uuid[]) returning "record_id"::text as "record_id"`,
    [objectName, ids],
  );
}

export interface ChangeSetRow {
  id: string;
  at: string;
  key_id: string | null;
  object: string;
  via: string;
  chat_id: string | null;
  tool_call_id: string | null;
  approver_key_id: string | null;
  reverts: string | null;
  reverted_by: string | null;
  records: string;
}

const CHANGE_SET_COLUMNS =
  `cs."id"::text as "id", ${AT('cs."at"', 'US')} as "at", cs."key_id", cs."object", cs."via", cs."chat_id", ` +
  `cs."tool_call_id", cs."approver_key_id", cs."reverts"::text as "reverts", cs."reverted_by"::text as "reverted_by", ` +
  `(select count(distinct c."record_id") from "record_changes" c where c."change_set_id" = cs."id" and c."object" = cs."object")::text as "records"`;

/** One change set, locked for a revert when `lock`. */
export function compileChangeSet(id: string, lock = false): CompiledQuery<ChangeSetRow> {
  return CompiledQuery.raw(
    `select ${CHANGE_SET_COLUMNS} from "change_sets" cs where cs."id" = $1::uuid${lock ? ' for update of cs' : ''}`,
    [id],
  );
}

/** A page of change sets of the given objects (and key), newest first, after an (at, id) position. */
export function compileChangeSetPage(filter: {
  objects: readonly string[];
  keyId?: string;
  after?: [string, string];
  limit: number;
}): CompiledQuery<ChangeSetRow> {
  const params = new SqlParams();
  const conditions = [`cs."object" = any(${params.add(filter.objects)}::text[])`];
  if (filter.keyId !== undefined) {
    const key = params.add(filter.keyId);
    conditions.push(`(cs."key_id" = ${key} or cs."approver_key_id" = ${key})`);
  }
  if (filter.after) {
    conditions.push(`(cs."at", cs."id") < (${params.add(filter.after[0])}::timestamptz, ${params.add(filter.after[1])}::uuid)`);
  }
  return params.query(
    `select ${CHANGE_SET_COLUMNS} from "change_sets" cs where ${conditions.join(' and ')} ` +
      `order by cs."at" desc, cs."id" desc limit ${params.add(filter.limit)}`,
  );
}

/** Marks a change set reverted by another. */
export function compileMarkReverted(id: string, by: string): CompiledQuery<never> {
  return CompiledQuery.raw(`update "change_sets" set "reverted_by" = $2::uuid where "id" = $1::uuid`, [id, by]);
}

/** Purges up to `limit` records trashed before `before`; how many. */
export function compilePurgeTrash(before: string, limit: number): CompiledQuery<{ n: string }> {
  return CompiledQuery.raw(
    `with d as (delete from "record_trash" where ctid in (select ctid from "record_trash" where "deleted_at" < $1::timestamptz limit $2) returning 1) ` +
      `select count(*)::text as "n" from d`,
    [before, limit],
  );
}
