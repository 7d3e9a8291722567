import { Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { DataPool, type DataSession } from '../database/data-pool';
import { actorOf } from '../data/change-actor';
import { type ChangeCapture, type ChangeSetStamp, newChangeSet } from '../data/change-outbox';
import { type LoggedLinkChange, revertLinkChanges } from '../data/links.write';
import { deleteRecord, scopedRows } from '../data/record-write';
import { compileUpdateRaw } from '../data/records.compiler';
import { etagOf } from '../data/record-version';
import { AccessService } from '../governance/access.service';
import { isLinks } from '../metadata/links-fields';
import { MetadataService } from '../metadata/metadata.service';
import type { AccessAction } from '../governance/access-policy.types';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import {
  type ChangeSetRow,
  compileChangeSet,
  compileChangeSetChanges,
  compileChangeSetPage,
  compileHiddenIds,
  compileLaterChanges,
  compileLinkChanges,
  compileLiveRows,
  compileMarkReverted,
  compileTrashed,
  compileVisibleIds,
} from './history.compiler';
import type { ChangeSetRecordResponse, ChangeSetResponse, ChangeSetsResponse, FieldChange } from './history.dto';
import { readBack } from './history.service';
import { decodePosition, encodePosition } from './position-cursor';
import { type RawRow, type RecordDelta, recordDeltas } from './record-deltas';
import { restoreFromTrash } from './trash.service';

/** Records one revert writes at most (its whole change set is read, locked and written in one transaction). */
export const REVERT_MAX_RECORDS = 20_000;
/** Records GET /change-sets/:id lists. */
const SHOWN_RECORDS = 1000;

type WriteOperation = 'create' | 'update' | 'delete';

/** One record's change in a revert preview: its version now (null: in the trash) and the fields before → after. */
export interface PreviewChange {
  id: string;
  etag: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

/** What a revert would write (revert_change_set's proposal): the operations it makes and each record's change. */
export interface RevertPreview {
  objectName: string;
  operations: WriteOperation[];
  changes: PreviewChange[];
}

/** One field of one record that changed since the change set a revert would undo. */
export interface RevertConflict {
  id: string;
  /** null: the record itself (deleted since, or purged from the trash). */
  field: string | null;
  expected: unknown;
  current: unknown;
}

/**
 * Change sets: every record write belongs to one (a write, a batch, an import, an approved agent write,
 * a restore, a revert). Listed and read as the caller may read their records; reverted as one, all or
 * nothing: a record changed since the set makes the revert a 409 revert_conflict naming each field,
 * and writes nothing. A revert is a change set of its own, so reverting it redoes.
 */
@Injectable()
export class ChangeSetService {
  constructor(
    private readonly pool: DataPool,
    private readonly access: AccessService,
    private readonly metadata: MetadataService,
  ) {}

  async list(
    caller: Caller,
    query: { object?: string; actor?: 'self' | 'any'; cursor?: string; limit?: number },
    signal?: AbortSignal,
  ): Promise<ChangeSetsResponse> {
    const objects = query.object
      ? [(await this.access.view(caller, query.object, 'read')).name]
      : (await this.access.visibleObjects(caller)).map((o) => o.name);
    const limit = Math.min(Math.max(1, Math.floor(query.limit ?? 20)), 100);
    const after = query.cursor === undefined ? undefined : decodePosition(query.cursor);
    const session = this.pool.session({ signal, key: caller.keyId });
    const rows = await session.query(
      compileChangeSetPage({ objects, keyId: query.actor === 'self' ? caller.keyId : undefined, after, limit: limit + 1 }),
    );
    const more = rows.length > limit;
    const page = more ? rows.slice(0, limit) : rows;
    const changeSets: ChangeSetResponse[] = [];
    // One view per object of the page (a page holds many sets of few objects).
    const views = new Map<string, Promise<ObjectMeta>>();
    for (const row of page) {
      if (!views.has(row.object)) views.set(row.object, this.access.view(caller, row.object, 'read'));
      const view = await views.get(row.object)!;
      const records = view.rowFilter ? (await this.visibleDeltas(view, row.id, session)).length : Number(row.records);
      changeSets.push(toChangeSet(caller, row, records));
    }
    const last = page[page.length - 1];
    return { changeSets, nextCursor: more ? encodePosition([last.at, last.id]) : null };
  }

  /** One change set with each record it changed that the caller may read (the fields it may see). */
  async get(caller: Caller, id: string, signal?: AbortSignal): Promise<ChangeSetResponse> {
    const session = this.pool.session({ signal, key: caller.keyId });
    const { row, view } = await this.find(caller, id, session);
    const deltas = (await this.visibleDeltas(view, id, session)).slice(0, SHOWN_RECORDS);
    const decoded = await readBack(
      view,
      deltas.flatMap((d) => [d.before, d.after]),
      session,
    );
    const shown = view.fields.filter((f) => !f.system);
    const changes = deltas.map((delta, i): ChangeSetRecordResponse => {
      const before = decoded[2 * i];
      const after = decoded[2 * i + 1];
      const fields: Record<string, FieldChange> = {};
      for (const field of shown) {
        if (!delta.fields.has(field.name)) continue;
        const was = delta.created ? null : (before[field.name] ?? null);
        const now = delta.deleted ? null : (after[field.name] ?? null);
        if (was !== null || now !== null || delta.last.op === 'update') fields[field.name] = { before: was, after: now };
      }
      return { id: delta.id, op: opOf(delta), changes: fields };
    });
    return { ...toChangeSet(caller, row, deltas.length), changes };
  }

  /**
   * What a revert would do now, record by record, as the caller reads it (an agent's revert_change_set
   * proposal shows it): the same checks as the revert (who may, what changed since), nothing written.
   */
  async preview(caller: Caller, id: string, signal?: AbortSignal): Promise<RevertPreview> {
    return this.pool.transaction(
      async (session) => {
        const { view, deltas, live } = await this.checked(session, caller, id, false);
        const operations = new Set<WriteOperation>();
        const current = await readBack(
          view,
          deltas.map((d) => live.get(d.id)?.row ?? {}),
          session,
        );
        const target = await readBack(
          view,
          deltas.map((d) => (d.deleted ? { ...d.after, ...d.before } : d.before)),
          session,
        );
        const shown = new Set(view.fields.filter((f) => !f.system).map((f) => f.name));
        const pick = (values: Record<string, unknown>, fields: Iterable<string>) =>
          Object.fromEntries([...fields].filter((f) => shown.has(f)).map((f) => [f, values[f] ?? null]));
        const changes = deltas.flatMap((delta, i): PreviewChange[] => {
          const now = live.get(delta.id);
          if (delta.created && delta.deleted) return [];
          if (delta.created) {
            operations.add('delete');
            return [{ id: delta.id, etag: etagOf(now!.version), before: pick(current[i], shown), after: null }];
          }
          if (delta.deleted) {
            operations.add('create');
            return [{ id: delta.id, etag: null, before: null, after: pick(target[i], shown) }];
          }
          operations.add('update');
          const fields = Object.keys(delta.before);
          return [{ id: delta.id, etag: etagOf(now!.version), before: pick(current[i], fields), after: pick(target[i], fields) }];
        });
        return { objectName: view.name, operations: [...operations], changes };
      },
      { signal, key: caller.keyId },
    );
  }

  /**
   * Undoes a change set as the caller, in one transaction: each record it created goes to the trash,
   * each it deleted comes back, each field it updated takes its value from before. Members revert their
   * own change sets and those their approvals made; admins any.
   */
  async revert(caller: Caller, id: string, signal?: AbortSignal): Promise<{ changeSetId: string }> {
    const stamp = await this.pool.transaction((session) => this.revertIn(session, caller, id), { signal, key: caller.keyId });
    await this.pool.wrote(caller.keyId);
    return { changeSetId: stamp.id };
  }

  /** revert inside the caller's transaction (an approved revert_change_set runs it with its own audit). */
  async revertIn(session: DataSession, caller: Caller, id: string, extra: Partial<ChangeSetStamp> = {}): Promise<ChangeSetStamp> {
    const { view, deltas, links } = await this.checked(session, caller, id, true);
    const stamp = newChangeSet('revert', { ...extra, reverts: id });
    const referrers = await this.metadata.referrers(view.name);
    const views = new Map<AccessAction, ObjectMeta>();
    const viewFor = async (action: AccessAction) => {
      if (!views.has(action)) views.set(action, await this.access.view(caller, view.name, action));
      return views.get(action)!;
    };
    // Last changed first: a unique value the set moved from one record to another is freed before it is given back.
    for (const delta of [...deltas].sort((x, y) => Number(BigInt(y.last.id) - BigInt(x.last.id)))) {
      if (delta.created && delta.deleted) continue; // made and trashed by the set: nothing to undo but the trash entry
      const capture = (op: ChangeCapture['op']): ChangeCapture => ({ op, keyId: caller.keyId, changeSet: stamp });
      if (delta.created) {
        const rows = await deleteRecord(session, await viewFor('delete'), delta.id, undefined, capture('delete'), referrers);
        if (!rows.length) throw outsideAccess();
      } else if (delta.deleted) {
        await restoreFromTrash(session, caller, await viewFor('create'), delta.id, stamp, referrers, delta.before);
      } else {
        // Links fields have no column: named as changed, set back below with the set's pairs.
        const changedFields = [...delta.fields].filter((f) => links.fields.has(f));
        const rows = await scopedRows(
          session,
          view,
          compileUpdateRaw(await viewFor('update'), delta.id, delta.before, { ...capture('update'), changedFields }),
        );
        if (!rows.length) throw outsideAccess();
      }
    }
    await revertLinkChanges(session, links.changes, links.tables, { keyId: caller.keyId, changeSet: stamp });
    await session.query(compileMarkReverted(id, stamp.id));
    return stamp;
  }

  /**
   * The change set, checked for a revert by the caller: it may revert it (its own, or its approvals';
   * admins any), it may read every record of it, and none changed since (else revert_conflict). With
   * `lock`, the set and its live records are locked first, so nothing can change between the check
   * and the revert.
   */
  private async checked(
    session: DataSession,
    caller: Caller,
    id: string,
    lock: boolean,
  ): Promise<{
    view: ObjectMeta;
    deltas: RecordDelta[];
    live: Map<string, { row: RawRow; version: string }>;
    links: SetLinkChanges;
  }> {
    const { row, view } = await this.find(caller, id, session, lock);
    if (caller.role !== 'admin' && row.key_id !== caller.keyId && row.approver_key_id !== caller.keyId) {
      throw new DomainError('forbidden', 'Members revert only their own change sets and those their approvals made', {
        changeSetId: id,
      });
    }
    const changes = await session.query(compileChangeSetChanges(id, REVERT_MAX_RECORDS + 1));
    if (changes.length > REVERT_MAX_RECORDS) throw tooLarge();
    const deltas = recordDeltas(changes);
    const links = await this.linkChanges(session, view, id);
    const ids = deltas.map((d) => d.id);
    const visible = new Set((await session.query(compileVisibleIds(view, ids))).map((r) => r.id));
    if (ids.some((recordId) => !visible.has(recordId))) {
      throw new DomainError('forbidden', 'This change set changed records this API key may not read; an admin can revert it');
    }
    const live = new Map((await session.query(compileLiveRows(view, ids, lock))).map((r) => [r.id, r]));
    const conflicts = await this.conflicts(session, view, deltas, live);
    if (conflicts.length) {
      throw new DomainError(
        'revert_conflict',
        `${new Set(conflicts.map((c) => c.id)).size} record(s) of this change set changed since; nothing was reverted`,
        { records: conflicts },
      );
    }
    return { view, deltas, live, links };
  }

  /**
   * The pairs the set made or removed (its links writes), checked for a revert by the caller: it sees the links
   * field and may read every record still there on either side of them (else forbidden, as for the set's own
   * records). A later change of a pair changed its record too, which `conflicts` finds. Pairs of a links field
   * deleted since are left: its table went with it.
   */
  private async linkChanges(session: DataSession, view: ObjectMeta, id: string): Promise<SetLinkChanges> {
    const full = await this.metadata.getObject(view.name);
    const found: SetLinkChanges = { changes: [], tables: new Map(), fields: new Set() };
    const linksFields = full.fields.filter(isLinks);
    if (!linksFields.length) return found;
    for (const field of linksFields) found.fields.add(field.name);
    const logged = await session.query(compileLinkChanges(id, REVERT_MAX_RECORDS + 1));
    if (logged.length > REVERT_MAX_RECORDS) throw tooLarge();
    for (const table of new Set(logged.map((c) => c.link_table))) {
      const field = linksFields.find((f) => f.related?.link?.table === table);
      if (!field) continue;
      const scope = view.fields.find((f) => f.name === field.name)?.related?.scope;
      if (!scope) throw linksOutsideAccess();
      const pairs = logged.filter((c) => c.link_table === table);
      const selfIsSource = field.related!.link!.selfColumn === 'source_id';
      const sides: Array<[ObjectMeta, string[]]> = [
        [selfIsSource ? view : scope, pairs.map((p) => p.source_id)],
        [selfIsSource ? scope : view, pairs.map((p) => p.target_id)],
      ];
      for (const [side, sideIds] of sides) {
        const hidden = compileHiddenIds(side, [...new Set(sideIds)]);
        if (hidden && (await session.query(hidden)).length) throw linksOutsideAccess();
      }
      found.tables.set(table, { source: sides[0][0].name, target: sides[1][0].name });
      found.changes.push(...pairs);
    }
    return found;
  }

  /** The change set and the caller's view of its object; a set of an object it may not read is not found. */
  private async find(
    caller: Caller,
    id: string,
    session: DataSession,
    lock = false,
  ): Promise<{ row: ChangeSetRow; view: ObjectMeta }> {
    const missing = new DomainError('change_set_not_found', `No change set "${String(id).slice(0, 40)}"`);
    if (!isUuid(id)) throw missing;
    const [row] = await session.query(compileChangeSet(id, lock));
    if (!row) throw missing;
    const view = await this.access.view(caller, row.object, 'read').catch((error: unknown) => {
      if (error instanceof DomainError && error.code === 'object_not_found') throw missing;
      throw error;
    });
    return { row, view };
  }

  /** The set's records the caller may read, folded per record. */
  private async visibleDeltas(view: ObjectMeta, id: string, session: DataSession): Promise<RecordDelta[]> {
    const deltas = recordDeltas(await session.query(compileChangeSetChanges(id, REVERT_MAX_RECORDS)));
    if (!view.rowFilter) return deltas;
    const visible = new Set(
      (
        await session.query(
          compileVisibleIds(
            view,
            deltas.map((d) => d.id),
          ),
        )
      ).map((r) => r.id),
    );
    return deltas.filter((d) => visible.has(d.id));
  }

  /**
   * Each record of the set changed since (a later change of it, or gone from where the set left it):
   * the fields changed since, with the value the set left (`expected`) and the value now (`current`),
   * as the caller reads them.
   */
  private async conflicts(
    session: DataSession,
    view: ObjectMeta,
    deltas: readonly RecordDelta[],
    live: Map<string, { row: RawRow }>,
  ): Promise<RevertConflict[]> {
    const later = await session.query(
      compileLaterChanges(
        view.name,
        deltas.map((d) => d.id),
        deltas.map((d) => d.last.id),
      ),
    );
    // Per record: the fields changed since, and the value each had when the set was done (what the first later
    // change of it replaced).
    const touched = new Map<string, { fields: Set<string>; left: RawRow; gone: boolean }>();
    for (const change of later) {
      const entry = touched.get(change.record_id) ?? { fields: new Set<string>(), left: {}, gone: false };
      if (change.op === 'update') {
        for (const field of change.changed_fields) {
          if (!entry.fields.has(field) && change.before && field in change.before) entry.left[field] = change.before[field];
          entry.fields.add(field);
        }
      } else entry.gone = change.op === 'delete';
      touched.set(change.record_id, entry);
    }
    const conflicts: RevertConflict[] = [];
    const shown = new Set(view.fields.filter((f) => !f.system).map((f) => f.name));
    const pending: Array<{ id: string; fields: string[]; expected: RawRow; current: RawRow }> = [];
    for (const delta of deltas) {
      const since = touched.get(delta.id);
      if (delta.deleted && !since) {
        // Left in the trash by the set: it must still be there.
        const [trashed] = await session.query(compileTrashed(view, delta.id));
        if (!trashed || trashed.change_id !== delta.last.id)
          conflicts.push({ id: delta.id, field: null, expected: 'trashed', current: 'purged' });
        continue;
      }
      if (!since) continue;
      const now = live.get(delta.id);
      if (!now) {
        conflicts.push({ id: delta.id, field: null, expected: 'present', current: 'deleted' });
        continue;
      }
      const fields = [...since.fields].filter((f) => shown.has(f));
      if (!fields.length) {
        // Changed since in fields the caller may not see: say so without naming them.
        conflicts.push({ id: delta.id, field: null, expected: 'unchanged', current: 'changed' });
        continue;
      }
      pending.push({ id: delta.id, fields, expected: { ...delta.after, ...since.left }, current: now.row });
    }
    const decoded = await readBack(
      view,
      pending.flatMap((p) => [p.expected, p.current]),
      session,
    );
    // Versions keep no link sets: a links field changed since is named, without values history does not have.
    const links = new Set(view.fields.filter(isLinks).map((f) => f.name));
    pending.forEach((p, i) => {
      const found = p.fields
        .map((field) =>
          links.has(field)
            ? { id: p.id, field, expected: 'unchanged', current: 'changed' }
            : { id: p.id, field, expected: decoded[2 * i][field] ?? null, current: decoded[2 * i + 1][field] ?? null },
        )
        // A later write that set a field to the value it had changed the record, not that field.
        .filter((c) => JSON.stringify(c.expected) !== JSON.stringify(c.current));
      conflicts.push(...(found.length ? found : [{ id: p.id, field: null, expected: 'unchanged', current: 'changed' }]));
    });
    return conflicts;
  }
}

function tooLarge(): DomainError {
  return new DomainError('change_set_too_large', `A revert undoes at most ${REVERT_MAX_RECORDS} changes`, {
    max: REVERT_MAX_RECORDS,
  });
}

function linksOutsideAccess(): DomainError {
  return new DomainError(
    'forbidden',
    'This change set changed links to records this API key may not read; an admin can revert it',
  );
}

/** What a change set did to links (ChangeSetsService.linkChanges). */
interface SetLinkChanges {
  changes: LoggedLinkChange[];
  /** The join tables of those changes still there, with the objects on their source and target sides. */
  tables: Map<string, { source: string; target: string }>;
  /** The names of the object's links fields. */
  fields: Set<string>;
}

function outsideAccess(): DomainError {
  return new DomainError('forbidden', 'A record of this change set is outside what this API key may write; nothing was reverted');
}

function opOf(delta: RecordDelta): 'create' | 'update' | 'delete' {
  if (delta.created) return delta.deleted ? 'delete' : 'create';
  return delta.deleted ? 'delete' : 'update';
}

function toChangeSet(caller: Caller, row: ChangeSetRow, records: number): ChangeSetResponse {
  const set: ChangeSetResponse = {
    id: row.id,
    at: row.at,
    actor: actorOf(caller, row.key_id),
    via: row.via as ChangeSetResponse['via'],
    object: row.object,
    records,
  };
  if (caller.role === 'admin') set.keyId = row.key_id;
  if (row.tool_call_id) set.toolCallId = row.tool_call_id;
  if (row.chat_id) set.chatId = row.chat_id;
  if (row.reverted_by) set.revertedBy = row.reverted_by;
  if (row.reverts) set.reverts = row.reverts;
  return set;
}
