import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import type { DataSession } from '../database/data-pool';
import { objectTable, quoteIdent } from '../database/sql-identifier';
import { inSavepoint } from '../database/savepoint';
import { SqlParams } from '../database/sql-params';
import { isLinks, linkTableSql } from '../metadata/links-fields';
import { LINK_SETTINGS } from '../metadata/links-changes';
import { linkStoredInputColumns } from '../metadata/links-stored';
import type { FieldMeta, LinkSide, ObjectMeta } from '../metadata/object-metadata.types';
import type { ChangeCapture, TrashedLinks } from './change-outbox';
import { linkIds } from './links.values';
import { compileRowFilter } from './where.compiler';

/**
 * Writes of links fields (metadata/links-fields.ts): an array replaces the set, `{ "$add": [..], "$remove":
 * [..] }` (updates) changes it. They run in the record write's transaction, after its statement: the record's
 * row lock orders concurrent writers of one record, and each pair is a row of its own (`on conflict do
 * nothing`), so concurrent `$add`s never lose a link.
 *
 * Access: the field is in the caller's view only when it may read the target; its `scope` is the caller's view
 * of the target. An id the caller may not read there is refused exactly like a missing one
 * (`invalid_reference`); a set or a `$remove` touches only the links the caller can see (the others are kept).
 */

/** One links field's write. */
export interface LinkWrite {
  field: FieldMeta;
  /** The whole set (as the caller sees it). */
  set?: string[];
  add?: string[];
  remove?: string[];
}

/**
 * The links fields' values taken out of a write body: `rest` is what encodeWrite checks (a links field left in
 * it is refused there as read-only, e.g. in a batch or an import, which do not write links).
 */
export function takeLinkWrites(
  object: ObjectMeta,
  input: unknown,
  mode: 'insert' | 'update',
): { rest: unknown; links: LinkWrite[] } {
  if (!isPlainObject(input)) return { rest: input, links: [] };
  const rest: Record<string, unknown> = {};
  const links: LinkWrite[] = [];
  for (const [name, value] of Object.entries(input)) {
    const field = object.fields.find((f) => f.name === name);
    if (!field || !isLinks(field) || value === undefined) {
      rest[name] = value;
      continue;
    }
    links.push(linkWrite(field, value, mode));
  }
  return { rest, links };
}

function linkWrite(field: FieldMeta, value: unknown, mode: 'insert' | 'update'): LinkWrite {
  if (value === null) return { field, set: [] };
  if (Array.isArray(value)) return { field, set: linkIds(field, value) };
  if (mode === 'update' && isPlainObject(value)) {
    const keys = Object.keys(value);
    if (keys.length && keys.every((key) => key === '$add' || key === '$remove')) {
      const add = value.$add === undefined ? [] : linkIds(field, value.$add, '$add');
      const remove = value.$remove === undefined ? [] : linkIds(field, value.$remove, '$remove');
      return { field, add, remove: remove.filter((id) => !add.includes(id)) };
    }
  }
  throw new DomainError(
    'invalid_value',
    `Links field "${field.name}" expects an array of record ids${mode === 'update' ? ' or {"$add": [ids], "$remove": [ids]}' : ''}`,
    { field: field.name, type: 'links' },
  );
}

/** A links value naming no record the caller may read (missing or outside its row filter): one error for both. */
function invalidLink(field: FieldMeta, ids: string[]): DomainError {
  return new DomainError(
    'invalid_reference',
    `Links field "${field.name}" names ${ids.length > 1 ? 'ids that are' : 'an id that is'} not a "${field.related!.target}" record: ${ids.slice(0, 5).join(', ')}`,
    { field: field.name },
  );
}

/**
 * Checks every id a write adds (invalid_reference), before anything is written: the caller's view of the
 * target (`related.scope`, its row filter included) must hold each.
 */
export async function checkLinkTargets(session: DataSession, writes: readonly LinkWrite[]): Promise<void> {
  for (const write of writes) {
    const ids = [...(write.set ?? []), ...(write.add ?? [])];
    if (!ids.length) continue;
    const scope = targetView(write.field);
    const params = new SqlParams();
    const filter = compileRowFilter(scope, params, { tableAlias: 't' });
    const rows = await session.query<{ id: string }>(
      params.query(
        `select "t"."id"::text as "id" from ${objectTable(scope.name)} as "t" where "t"."id" = any(${params.add(ids)}::uuid[])` +
          (filter ? ` and (${filter})` : ''),
      ),
    );
    const found = new Set(rows.map((row) => row.id));
    const missing = ids.filter((id) => !found.has(id));
    if (missing.length) throw invalidLink(write.field, missing);
  }
}

/**
 * Applies the writes to the record `id` (already written in this transaction, its change appended). The join
 * table's triggers append the `update` change of each record on the other side whose inverse field changed
 * (metadata/links-changes.ts). Returns nothing: the caller reads the record again.
 */
export async function applyLinkWrites(
  session: DataSession,
  id: string,
  writes: readonly LinkWrite[],
  capture: Pick<ChangeCapture, 'keyId' | 'changeSet'>,
): Promise<void> {
  if (!writes.length) return;
  await setLinkSettings(session, id, capture);
  for (const write of writes) {
    const meta = write.field.related!;
    const link = meta.link!;
    const table = linkTableSql(link.table);
    const self = quoteIdent(link.selfColumn);
    const target = quoteIdent(link.targetColumn);
    const scope = targetView(write.field);
    const removing = write.set ?? write.remove ?? [];
    if (write.set || removing.length) {
      const params = new SqlParams();
      const kept = write.set
        ? `not (${target} = any(${params.add(write.set)}::uuid[]))`
        : `${target} = any(${params.add(removing)}::uuid[])`;
      const filter = compileRowFilter(scope, params, { tableAlias: 't' });
      // Only links the caller can see: one to a record outside its row filter stays.
      const visible = filter ? ` and ${target} in (select "t"."id" from ${objectTable(scope.name)} as "t" where ${filter})` : '';
      const sql = `delete from ${table} where ${self} = ${params.add(id)}::uuid and ${kept}${visible}`;
      await session.query(params.query(loggedPairs(sql, params, link.table, capture.changeSet.id, false)));
    }
    const adding = write.set ?? write.add ?? [];
    if (adding.length) {
      const params = new SqlParams();
      // In the order given: `seq` numbers the rows as they are inserted.
      const sql =
        `insert into ${table} (${self}, ${target}) select ${params.add(id)}::uuid, u."id" ` +
        `from unnest(${params.add(adding)}::uuid[]) with ordinality as u("id", "n") order by u."n" ` +
        `on conflict do nothing`;
      await session.query(params.query(loggedPairs(sql, params, link.table, capture.changeSet.id, true)));
    }
  }
}

/**
 * `statement` (an insert into or a delete from the join table `table`) with each pair it made (`added`) or
 * removed logged in `link_changes` under the change set, in the same statement: what a revert of the set undoes.
 */
function loggedPairs(statement: string, params: SqlParams, table: string, changeSetId: string, added: boolean): string {
  return (
    `with "pairs" as (${statement} returning "source_id", "target_id") ` +
    `insert into "link_changes" ("change_set_id", "link_table", "source_id", "target_id", "added") ` +
    `select ${params.add(changeSetId)}::uuid, ${params.add(table)}, p."source_id", p."target_id", ${added ? 'true' : 'false'} ` +
    `from "pairs" p`
  );
}

/** A pair a change set made (`added`) or removed, as link_changes logged it. */
export interface LoggedLinkChange {
  link_table: string;
  source_id: string;
  target_id: string;
  added: boolean;
}

/**
 * Undoes the pairs a change set made or removed (`changes`, in the order logged), in the revert's change set:
 * a pair it made is removed, a pair it removed is made again if both records still exist (a record deleted
 * since took its links with it). Logged like any links write, so the revert can be reverted too. The join
 * tables' triggers append the `update` of each record whose links changed, on both sides.
 */
export async function revertLinkChanges(
  session: DataSession,
  changes: readonly LoggedLinkChange[],
  tables: ReadonlyMap<string, { source: string; target: string }>,
  capture: Pick<ChangeCapture, 'keyId' | 'changeSet'>,
): Promise<void> {
  // Per pair, the state before the set: absent if its first change made it, present if it removed it.
  const before = new Map<string, LoggedLinkChange & { present: boolean }>();
  for (const change of changes) {
    const key = `${change.link_table} ${change.source_id} ${change.target_id}`;
    if (!before.has(key)) before.set(key, { ...change, present: !change.added });
  }
  if (!before.size) return;
  await setLinkSettings(session, '', capture);
  for (const [table, objects] of tables) {
    const pairs = [...before.values()].filter((p) => p.link_table === table);
    for (const present of [false, true]) {
      const chosen = pairs.filter((p) => p.present === present);
      if (!chosen.length) continue;
      const params = new SqlParams();
      const sources = params.add(chosen.map((p) => p.source_id));
      const targets = params.add(chosen.map((p) => p.target_id));
      const join = linkTableSql(table);
      const sql = present
        ? `insert into ${join} ("source_id", "target_id") select u."s", u."t" ` +
          `from unnest(${sources}::uuid[], ${targets}::uuid[]) with ordinality as u("s", "t", "n") ` +
          `where exists (select from ${objectTable(objects.source)} x where x."id" = u."s") ` +
          `and exists (select from ${objectTable(objects.target)} y where y."id" = u."t") order by u."n" on conflict do nothing`
        : `delete from ${join} j using unnest(${sources}::uuid[], ${targets}::uuid[]) as u("s", "t") ` +
          `where j."source_id" = u."s" and j."target_id" = u."t"`;
      await session.query(params.query(loggedPairs(sql, params, table, capture.changeSet.id, present)));
    }
  }
}

/**
 * The join tables' triggers (their changes, stored rollups) log under this write's set and key for the rest of
 * the transaction, the record `id` aside (its own change is the write's; '' for none).
 */
async function setLinkSettings(
  session: DataSession,
  id: string,
  capture: Pick<ChangeCapture, 'keyId' | 'changeSet'>,
): Promise<void> {
  const settings = new SqlParams();
  const set = (name: string, value: string) => `set_config(${settings.add(name)}, ${settings.add(value)}, true)`;
  await session.query(
    settings.query(
      `select ${set(LINK_SETTINGS.changeSet, capture.changeSet.id)}, ${set(LINK_SETTINGS.key, capture.keyId)}, ` +
        set(LINK_SETTINGS.record, id),
    ),
  );
}

/**
 * Makes again the links of a record back from the trash (`saved`, as its delete kept them), on the join tables
 * it is still on (`sides`: a links field deleted meanwhile took its table), with the records on the other side
 * that still exist, in their former order. As it was: links the restoring caller may not read come back too
 * (invisible to it, as they were), as a delete's cascade removed them without asking. Whether any were to make.
 */
export async function restoreLinks(
  session: DataSession,
  id: string,
  saved: readonly TrashedLinks[],
  sides: readonly LinkSide[],
  capture: Pick<ChangeCapture, 'keyId' | 'changeSet'>,
): Promise<boolean> {
  const restorable = saved.flatMap((entry) => {
    const side = sides.find((s) => s.table === entry.table && s.selfColumn === entry.self);
    return side && entry.ids.length ? [{ side, ids: entry.ids }] : [];
  });
  if (!restorable.length) return false;
  await setLinkSettings(session, id, capture);
  for (const { side, ids } of restorable) {
    const params = new SqlParams();
    await session.query(
      params.query(
        `insert into ${linkTableSql(side.table)} (${quoteIdent(side.selfColumn)}, ${quoteIdent(side.targetColumn)}) ` +
          `select ${params.add(id)}::uuid, o."id" from unnest(${params.add(ids)}::uuid[]) with ordinality as u("id", "n") ` +
          `join ${objectTable(side.other)} o on o."id" = u."id" order by u."n" on conflict do nothing`,
      ),
    );
  }
  return true;
}

/** The caller's view of the target (set by its access for every links field of its view; never absent there). */
function targetView(field: FieldMeta): ObjectMeta {
  const scope = field.related?.scope;
  if (!scope) throw new Error(`links field "${field.name}" written without the caller's view of its target`);
  return scope;
}

/**
 * The links fields of `object` (its full definition) a write of one of its records follows in lockLinkedRecords:
 * those with an inverse (a links field on each side) that a stored rollup or count, on either side, is over. An
 * update that writes no links follows only those where it changes an input (rolled-up or filtered field) of the
 * other side's stored fields, the only ones whose triggers lock the other side then; `changed` undefined (a
 * delete, whose links go with it): all.
 */
export function lockedLinks(
  object: ObjectMeta,
  targetOf: (field: FieldMeta) => ObjectMeta,
  write: { links: readonly LinkWrite[]; changed?: readonly string[] },
): FieldMeta[] {
  const storedOver = (on: ObjectMeta, via: string, target: string) =>
    on.fields.filter((f) => f.related?.stored && f.related.via === via && f.related.target === target);
  return object.fields.filter((field) => {
    const meta = field.related;
    if (!isLinks(field) || !meta?.inverse || !meta.link) return false;
    const far = storedOver(targetOf(field), meta.inverse, object.name);
    if (!far.length && !storedOver(object, field.name, meta.target).length) return false;
    if (!write.changed || write.links.some((w) => w.field.name === field.name)) return true;
    return linkStoredInputColumns(far).some((name) => write.changed!.includes(name));
  });
}

/**
 * Locks, before the first statement of a write of the record `id` (an update, its links' writes, a delete; a
 * create's links, after its insert), that record and the records on the other side of `fields` (lockedLinks)
 * the write can reach: those linked now and those its links writes name. All in one global order, by id across
 * both objects.
 *
 * Why: the stored rollups through links (metadata/links-stored.ts) lock, in their triggers, the records on the
 * other side after the write's own statement locked its record. Two writers of one pair from opposite sides, or a
 * links write and an update (or delete) of a linked record, then lock the two records in opposite orders and
 * deadlock (40P01); taken here first in id order, the triggers' locks are already held. It also makes a links
 * write wait for an update of a record it links (whose trigger read the links before this write's): the stored
 * values then count both. The record itself is locked `for update`, as its own statement would: a create
 * linking it (whose foreign key check shares it before its trigger locks it) then waits rather than deadlocks.
 *
 * The links are read before the locks: when they changed meanwhile (a writer that held the record committed
 * some), the locks are given back (a savepoint) and taken again, in order, with the new ones.
 */
export async function lockLinkedRecords(
  session: DataSession,
  object: ObjectMeta,
  id: string,
  fields: readonly FieldMeta[],
  writes: readonly LinkWrite[],
): Promise<void> {
  if (!fields.length) return;
  const self = id.toLowerCase();
  const owners = new Map<string, string>([[self, object.name]]);
  const linked = async (): Promise<string[]> => {
    const found: string[] = [];
    const note = (other: string, owner: string) => {
      const key = other.toLowerCase();
      if (owners.has(key)) return;
      owners.set(key, owner);
      found.push(key);
    };
    for (const field of fields) {
      const { table, selfColumn, targetColumn } = field.related!.link!;
      const params = new SqlParams();
      const rows = await session.query<{ id: string }>(
        params.query(
          `select ${quoteIdent(targetColumn)}::text as "id" from ${linkTableSql(table)} where ${quoteIdent(selfColumn)} = ${params.add(id)}::uuid`,
        ),
      );
      for (const row of rows) note(row.id, field.related!.target);
      const write = writes.find((w) => w.field.name === field.name);
      for (const other of [...(write?.set ?? []), ...(write?.add ?? []), ...(write?.remove ?? [])])
        note(other, field.related!.target);
    }
    return found;
  };
  await linked();
  for (;;) {
    try {
      await inSavepoint(
        session,
        'link_locks',
        async () => {
          await lockInIdOrder(session, owners, [...owners.keys()], self);
          if ((await linked()).length) throw new LinksMoved();
        },
        (error) => error instanceof LinksMoved,
      );
      return;
    } catch (error) {
      if (!(error instanceof LinksMoved)) throw error;
    }
  }
}

/** Links of the record made while its locks were taken: all are taken again, in order, with those records. */
class LinksMoved extends Error {}

/** Locks `ids` (lowercase, each a record of `owners.get(id)`) in order of id: one statement per run of one object's ids. */
async function lockInIdOrder(session: DataSession, owners: Map<string, string>, ids: string[], id: string): Promise<void> {
  // The text of a uuid sorts as Postgres orders uuids (bytes, as lowercase hex), the order the triggers lock in.
  const sorted = [...ids].sort();
  // The record written `for update`, as its own update or delete statement locks it.
  const strength = (x: string) => (x === id ? 'update' : 'no key update');
  for (let start = 0; start < sorted.length;) {
    const owner = owners.get(sorted[start])!;
    let end = start + 1;
    while (end < sorted.length && owners.get(sorted[end]) === owner && strength(sorted[end]) === strength(sorted[start])) end++;
    const params = new SqlParams();
    await session.query(
      params.query(
        `select 1 from ${objectTable(owner)} where "id" = any(${params.add(sorted.slice(start, end))}::uuid[]) ` +
          `order by "id" for ${strength(sorted[start])}`,
      ),
    );
    start = end;
  }
}
