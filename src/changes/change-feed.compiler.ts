import { CompiledQuery } from 'kysely';
import { ADVISORY_LOCK } from '../database/advisory-locks';
import { objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { compileRowFilter, compileWhere } from '../data/where.compiler';
import { fieldSql } from '../data/formula.compiler';
import { ObjectMeta } from '../metadata/object-metadata.types';

/** The snapshot as a row of the object's table, for the reader's projection and row filter. */
const SNAPSHOT_ROW = 'r';
export const VISIBLE_ALIAS = '__visible';

/** The column alias of the reader's i-th field (aliases stay short; field names may be 63 characters). */
export function fieldAlias(index: number): string {
  return `__f${index}`;
}

export interface ChangeRow {
  cursor: string;
  op: 'create' | 'update' | 'delete';
  id: string;
  changed_fields: string[];
  at: string;
  key_id: string | null;
  change_set_id: string | null;
  __visible: boolean;
  [alias: string]: unknown;
}

/**
 * The changes of one object after `after`, in cursor order, at most `limit`, the object's committed
 * changes numbered first (record_changes_page, see compileSequence), each with the reader's
 * view of its record: the snapshot read back as a row of the object's table (jsonb_populate_record,
 * so a field added since is null and one dropped since is gone), only the reader's fields selected,
 * and `__visible` = the reader's row filter over it. Changes the reader may not see still come back
 * (not visible): they advance its cursor, so a page of them is not read again. A `where` (a webhook's,
 * compiled by the where compiler against the reader's view) narrows what is visible further.
 */
export function compileChangePage(object: ObjectMeta, after: string, limit: number, where?: unknown): CompiledQuery<ChangeRow> {
  const params = new SqlParams();
  const rowFilter = compileRowFilter(object, params, { tableAlias: SNAPSHOT_ROW, asValue: true });
  const own =
    where === undefined || where === null ? undefined : compileWhere(object, where, params, { tableAlias: SNAPSHOT_ROW });
  const filter = own ? `(${rowFilter ?? 'TRUE'} AND COALESCE(${own}, FALSE))` : (rowFilter ?? 'TRUE');
  const projection = object.fields.map((f, i) => `${fieldSql(f, params, SNAPSHOT_ROW)} as "${fieldAlias(i)}"`);
  const view =
    `select ${[...projection, `${filter} as "${VISIBLE_ALIAS}"`].join(', ')} ` +
    `from jsonb_populate_record(null::${objectTable(object.name)}, c."record") as ${quoteIdent(SNAPSHOT_ROW)}`;
  return params.query(
    `select c."cursor"::text as "cursor", c."op", c."record_id"::text as "id", c."changed_fields", ` +
      `to_char(c."at" at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as "at", c."key_id", ` +
      `c."change_set_id"::text as "change_set_id", v.* ` +
      `from "record_changes_page"(${params.add(object.name)}, ${params.add(after)}::bigint, ${params.add(limit)}::integer, ` +
      `${params.add(SEQUENCE_BATCH)}::integer, ${params.add(ADVISORY_LOCK.changeFeed)}::integer) c ` +
      `cross join lateral (${view}) v order by c."cursor"`,
  );
}

/** Most outbox rows one call of record_changes_sequence numbers (a page reads at most MAX_CHANGES_LIMIT). */
export const SEQUENCE_BATCH = 5000;

/**
 * Numbers the object's committed changes that have no cursor yet: a reader runs it before it reads
 * (compileChangePage does, in its statement).
 *
 * Why cursors are drawn here and not by the writes: a cursor drawn when a row is inserted follows the
 * order of inserts, not of commits, and a reader that passed cursor N would never see a row < N that
 * commits later. Writers used to hold a lock of the object from their insert to their commit to
 * prevent that; every write of an object queued behind the one before, commit included.
 *
 * Now writers insert rows without a cursor, lock-free, and a reader first numbers, under the object's
 * advisory lock and in its own short transaction, the rows that have committed since the last
 * numbering, in insert order (`id`). A cursor is thus drawn only for a committed row, and after every
 * cursor of the object already visible: cursors are monotonic in the order changes become readable,
 * and once a reader passed N no change can appear at or below N. Changes of transactions still open
 * stay invisible, hold nobody up and are numbered after they commit. Insert order within a numbering
 * keeps each record's changes in their real order: a write of a record that another transaction
 * wrote first waited for that one to commit, so it is inserted, and numbered, after it.
 */
export function compileSequence(objectName: string): CompiledQuery<{ numbered: number }> {
  return CompiledQuery.raw(`select "record_changes_sequence"($1, $2, $3) as "numbered"`, [
    objectName,
    SEQUENCE_BATCH,
    ADVISORY_LOCK.changeFeed,
  ]);
}

/** The last cursor the retention cleanup removed for the object (none: nothing removed yet). */
export function compileHorizon(objectName: string): CompiledQuery<{ pruned_through: string }> {
  return CompiledQuery.raw(
    `select "pruned_through"::text as "pruned_through" from "record_change_horizons" where "object" = $1`,
    [objectName],
  );
}

/** The object's latest cursor (0 when it has none): where a stream without a cursor starts. */
export function compileLatest(objectName: string): CompiledQuery<{ latest: string }> {
  return CompiledQuery.raw(`select coalesce(max("cursor"), 0)::text as "latest" from "record_changes" where "object" = $1`, [
    objectName,
  ]);
}

/** Objects with changes written before `before` that no reader has numbered yet. */
export function compileUnsequencedObjects(before: Date): CompiledQuery<{ object: string }> {
  return CompiledQuery.raw(`select distinct "object" from "record_changes" where "cursor" is null and "at" < $1`, [
    before.toISOString(),
  ]);
}

/**
 * Moves each object's horizon past the changes written before `before` (the feed's retention): a reader
 * behind it is told its cursor expired. The changes stay, as record history; only those of the last
 * `window` are looked at (the cleanup runs hourly, so older ones were passed before).
 */
export function compileMoveHorizons(before: Date, windowMs: number): CompiledQuery<{ moved: string }> {
  return CompiledQuery.raw(
    `with m as (select "object", max("cursor") as "cursor" from "record_changes" ` +
      `where "at" < $1 and "at" >= $2 and "cursor" is not null group by "object"), ` +
      `h as (insert into "record_change_horizons" ("object", "pruned_through") select "object", "cursor" from m ` +
      `on conflict ("object") do update set "pruned_through" = greatest("record_change_horizons"."pruned_through", excluded."pruned_through") returning 1) ` +
      `select count(*)::text as "moved" from h`,
    [before.toISOString(), new Date(before.getTime() - windowMs).toISOString()],
  );
}

/**
 * Cuts up to `limit` updates written before `before` (out of the feed) to the fields they set: history
 * needs only those, with `before`. Updates without `before` (kept before history was) stay whole.
 */
export function compileCompact(before: Date, limit: number): CompiledQuery<{ n: string }> {
  return CompiledQuery.raw(
    `with d as (update "record_changes" c set "compacted" = true, "record" = ` +
      `(select coalesce(jsonb_object_agg(k, c."record" -> k), '{}'::jsonb) from unnest(c."changed_fields") k where c."record" ? k) ` +
      `where c."id" in (select "id" from "record_changes" where "op" = 'update' and not "compacted" and "at" < $1 ` +
      `and "before" is not null and "cursor" is not null limit $2) returning 1) select count(*)::text as "n" from d`,
    [before.toISOString(), limit],
  );
}

/**
 * Deletes up to `limit` changes written before `before` (past history's retention), except the deletes
 * that hold a record still in the trash; change sets left without changes go with them.
 */
export function compileExpire(before: Date, limit: number): CompiledQuery<{ n: string }> {
  return CompiledQuery.raw(
    `with d as (delete from "record_changes" c where c."id" in (select r."id" from "record_changes" r where r."at" < $1 ` +
      `and r."cursor" is not null and not exists (select from "record_trash" t where t."change_id" = r."id") limit $2) returning 1), ` +
      `s as (delete from "change_sets" cs where cs."id" in (select "id" from "change_sets" where "at" < $1 limit $2) ` +
      `and not exists (select from "record_changes" r where r."change_set_id" = cs."id" and r."at" >= $1)) ` +
      `select count(*)::text as "n" from d`,
    [before.toISOString(), limit],
  );
}
