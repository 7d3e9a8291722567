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
export const ROW_ALIAS = '"__row"';
export const SNAPSHOT_ALIAS = '__snapshot';
export const SNAPSHOT_SELECT = `to_jsonb(${ROW_ALIAS}) as "${SNAPSHOT_ALIAS}"`;

/**
 * Wraps one insert/update/delete (aliased ROW_ALIAS, returning SNAPSHOT_SELECT and `id`) into the
 * statement that also appends one outbox row per written record, so a write and its change events
 * commit or roll back together, at the price of one statement.
 *
 * The rows carry no cursor and the write takes no lock for the feed: writers of one object run side
 * by side, as writers of different objects do. A reader numbers committed rows before it reads them
 * (record_changes_sequence, see compileSequence), so cursors follow commits, not inserts.
 *
 * The whole row is kept (hidden fields too): a change's `record` is the record as the write left it,
 * and each reader's row filter and visible fields are applied to it when it reads.
 */
export function withChangeOutbox(
  objectName: string,
  write: string,
  columns: readonly string[],
  params: SqlParams,
  capture: ChangeCapture,
): string {
  const changed = `${params.add(capture.op === 'delete' ? [] : [...(capture.changedFields ?? [])])}::text[]`;
  const append =
    `insert into "record_changes" ("object", "op", "record_id", "changed_fields", "record", "key_id") ` +
    `select ${params.add(objectName)}, ${params.add(capture.op)}, w."id", ${changed}, ` +
    `w."${SNAPSHOT_ALIAS}", ${params.add(capture.keyId)} from ${WRITE} w`;
  return `with ${WRITE} as (${write}), "__change" as (${append}) select ${columns.join(', ')} from ${WRITE}`;
}
