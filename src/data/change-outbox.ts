import { randomUUID } from 'node:crypto';
import { quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { linkTableSql } from '../metadata/links-fields';
import type { LinkSide } from '../metadata/object-metadata.types';

/** The kinds of record write the feed reports. */
export type ChangeOp = 'create' | 'update' | 'delete';

/** How a change set came to be (`via` of history and change sets). */
export type ChangeVia = 'api' | 'batch' | 'import' | 'approval' | 'revert' | 'restore';

/**
 * The change set a write belongs to: made by the first statement that writes a record of it, shared by
 * every statement of a batch, an import or a revert (see withChangeOutbox).
 */
export interface ChangeSetStamp {
  id: string;
  via: ChangeVia;
  /** An approved agent write: its chat, its tool call and the key that approved it. */
  chatId?: string;
  toolCallId?: string;
  approverKeyId?: string;
  /** A revert: the change set it reverts. */
  reverts?: string;
  /** The object the set is of, when a statement of it writes another (a delete clearing lookups that point to its record). */
  object?: string;
}

/** What a write tells the feed about itself: the outbox row its statement appends per record. */
export interface ChangeCapture {
  op: ChangeOp;
  /** The API key that writes. */
  keyId: string;
  /** Fields the write sets: those of the update, every field of the object on create (a delete: none). */
  changedFields?: readonly string[];
  changeSet: ChangeSetStamp;
  /** A delete: the join tables its records are on; their trash entries keep each record's pairs for a restore. */
  links?: readonly LinkSide[];
}

/** A new change set's stamp. */
export function newChangeSet(via: ChangeVia, extra: Omit<ChangeSetStamp, 'id' | 'via'> = {}): ChangeSetStamp {
  return { id: randomUUID(), via, ...extra };
}

/** The write's CTE, its target table's alias and the column of each row's snapshot (`to_jsonb` of the whole row). */
const WRITE = '"__write"';
export const ROW_ALIAS = '"__row"';
export const SNAPSHOT_ALIAS = '__snapshot';
export const SNAPSHOT_SELECT = `to_jsonb(${ROW_ALIAS}) as "${SNAPSHOT_ALIAS}"`;
/** An update's column of the values it replaces (see compileUpdate): the outbox row's `before`. */
export const BEFORE_ALIAS = '__before';

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
  const set = capture.changeSet;
  const setId = `${params.add(set.id)}::uuid`;
  const object = params.add(objectName);
  const before = capture.op === 'update' ? `w."${BEFORE_ALIAS}"` : 'null';
  const append =
    `insert into "record_changes" ("object", "op", "record_id", "changed_fields", "record", "key_id", "change_set_id", "before") ` +
    `select ${object}, ${params.add(capture.op)}, w."id", ${changed}, ` +
    `w."${SNAPSHOT_ALIAS}", ${params.add(capture.keyId)}, ${setId}, ${before} from ${WRITE} w`;
  // The set's row comes with its first statement that writes a record (a write that missed makes none).
  const stamp =
    `insert into "change_sets" ("id", "key_id", "object", "via", "chat_id", "tool_call_id", "approver_key_id", "reverts") ` +
    `select ${setId}, ${params.add(capture.keyId)}, ${set.object === undefined ? object : params.add(set.object)}, ${params.add(set.via)}, ${params.add(set.chatId ?? null)}, ` +
    `${params.add(set.toolCallId ?? null)}, ${params.add(set.approverKeyId ?? null)}, ${params.add(set.reverts ?? null)}::uuid ` +
    `where exists (select from ${WRITE}) on conflict ("id") do nothing`;
  // A delete moves the record to the trash: the entry points to the change that holds the row as deleted, and
  // keeps its links (read in the statement's snapshot, before the delete's cascade removes them).
  const links = capture.links?.length ? trashedLinks(capture.links, params) : 'null';
  const trash =
    capture.op === 'delete'
      ? `, "__trash" as (insert into "record_trash" ("object", "record_id", "change_id", "change_set_id", "key_id", "links") ` +
        `select ${object}, c."record_id", c."id", ${setId}, ${params.add(capture.keyId)}, ${links} from "__change" c ` +
        `on conflict ("object", "record_id") do update set "change_id" = excluded."change_id", ` +
        `"change_set_id" = excluded."change_set_id", "deleted_at" = now(), "key_id" = excluded."key_id", "links" = excluded."links")`
      : '';
  return (
    `with ${WRITE} as (${write}), "__change" as (${append} returning "id", "record_id"), "__set" as (${stamp})${trash} ` +
    `select ${columns.join(', ')} from ${WRITE}`
  );
}

/** A trash entry's links, as restoreLinks reads them back. */
export interface TrashedLinks {
  table: string;
  self: string;
  ids: string[];
}

/** The `links` of the record `c."record_id"`: per join table (as LinkSide), the records on the other side in link order. */
function trashedLinks(sides: readonly LinkSide[], params: SqlParams): string {
  const entries = sides.map((side) => {
    const self = quoteIdent(side.selfColumn);
    const ids =
      `(select coalesce(jsonb_agg(l.${quoteIdent(side.targetColumn)} order by l."seq"), '[]'::jsonb) ` +
      `from ${linkTableSql(side.table)} l where l.${self} = c."record_id")`;
    return `jsonb_build_object('table', ${params.add(side.table)}::text, 'self', ${params.add(side.selfColumn)}::text, 'ids', ${ids})`;
  });
  return `jsonb_build_array(${entries.join(', ')})`;
}
