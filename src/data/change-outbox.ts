import { CompiledQuery } from 'kysely';
import { ADVISORY_LOCK } from '../database/advisory-locks';
import { SqlParams } from '../database/sql-params';

/** The kinds of record write the feed reports. */
export type ChangeOp = 'create' | 'update' | 'delete';

/** What a write tells the feed about itself: the outbox row its statement appends per record. */
export interface ChangeCapture {
  op: ChangeOp;
  /** The API key that writes. */
  keyId: string;
  /** Fields the write sets: those of the update, every field of the object on create (a delete: none). */
  changedFields?: readonly string[];
}

/** The write's CTE, its target table's alias and the column of each row's snapshot (`to_jsonb` of the whole row). */
const WRITE = '"__write"';
const LOCK = '"__feed_lock"';
export const ROW_ALIAS = '"__row"';
export const SNAPSHOT_ALIAS = '__snapshot';
export const SNAPSHOT_SELECT = `to_jsonb(${ROW_ALIAS}) as "${SNAPSHOT_ALIAS}"`;

/**
 * Wraps one insert/update/delete (aliased ROW_ALIAS, returning SNAPSHOT_SELECT and `id`) into the
 * statement that also appends one outbox row per written record, so a write and its change events
 * commit or roll back together, at the price of one statement.
 *
 * Commit order: a sequence hands numbers out when rows are inserted, not when they commit, so a
 * reader paging `after = N` could pass over a change that commits later with a smaller number. The
 * statement therefore takes a transaction-scoped advisory lock of the object (one key per object)
 * before it draws cursors, and holds it until its transaction ends: while a writer holds cursors not
 * yet committed, no other writer of that object can draw any, so an object's cursors become visible
 * in increasing order. The lock is held from the write to the commit only (for a single REST write,
 * the statement itself); writes of other objects never wait for it.
 *
 * Lock order: the statement's own SELECT is gated on the lock (an uncorrelated EXISTS is a one-time
 * filter, run before the write's CTE is first read), so the feed lock comes before anything the
 * write locks: the rows an update or delete locks, and the unique index entries of the rows an
 * insert adds, which a concurrent insert or update of the same value must wait for. Taken the other
 * way round, a write holding such a lock while it waits for the feed lock deadlocks with a writer
 * that holds the feed lock and wants that row or value (a batch, or an update setting the value).
 */
export function withChangeOutbox(
  objectName: string,
  write: string,
  columns: readonly string[],
  params: SqlParams,
  capture: ChangeCapture,
): string {
  const object = params.add(objectName);
  const lock = `select pg_advisory_xact_lock(${params.add(ADVISORY_LOCK.changeFeed)}, hashtext(${object}))`;
  const changed = `${params.add(capture.op === 'delete' ? [] : [...(capture.changedFields ?? [])])}::text[]`;
  const append =
    `insert into "record_changes" ("cursor", "object", "op", "record_id", "changed_fields", "record", "key_id") ` +
    `select nextval('record_changes_cursor_seq'), ${object}, ${params.add(capture.op)}, w."id", ${changed}, ` +
    `w."${SNAPSHOT_ALIAS}", ${params.add(capture.keyId)} from ${WRITE} w cross join ${LOCK}`;
  return (
    `with ${LOCK} as materialized (${lock}), ${WRITE} as (${write}), "__change" as (${append}) ` +
    `select ${columns.join(', ')} from ${WRITE} where exists (select from ${LOCK})`
  );
}

/** Takes the object's feed lock in the current transaction (a batch does, before its first write). */
export function lockChangeFeed(objectName: string): CompiledQuery<Record<string, unknown>> {
  return CompiledQuery.raw('select pg_advisory_xact_lock($1, hashtext($2))', [ADVISORY_LOCK.changeFeed, objectName]);
}
