import { Inject, Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataPool, type DataSession } from '../database/data-pool';
import { drainBatches } from '../database/drain-batches';
import { actorOf } from '../data/change-actor';
import { type ChangeSetStamp, newChangeSet } from '../data/change-outbox';
import type { VersionedRecord } from '../data/data.types';
import { decodeRow } from '../data/field-value.codec';
import { restoreLinks } from '../data/links.write';
import { decodeVersioned, notFound, readWritten, scopedRows } from '../data/record-write';
import { compileInsertRaw, compileRepointReferences } from '../data/records.compiler';
import { AccessService } from '../governance/access.service';
import { MetadataService } from '../metadata/metadata.service';
import type { ObjectMeta, ObjectReferrers } from '../metadata/object-metadata.types';
import { afterAlias, compilePurgeTrash, compileTrashed, compileTrashPage, compileUntrash } from './history.compiler';
import type { TrashedRecordResponse, TrashResponse } from './history.dto';
import { decodePosition, encodePosition } from './position-cursor';

export const DEFAULT_TRASH_LIMIT = 50;
export const MAX_TRASH_LIMIT = 200;

/**
 * The trash: a deleted record leaves its table (so every read, count, aggregate, search, export and data
 * tool stops seeing it, and a live record may take its unique values) and is kept as the change feed
 * kept it when deleted. Restored as it was (a new version, `op: restore`), purged by admins or after
 * TRASH_RETENTION_DAYS.
 */
@Injectable()
export class TrashService {
  constructor(
    private readonly pool: DataPool,
    private readonly access: AccessService,
    private readonly metadata: MetadataService,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'trashRetentionDays'>,
  ) {}

  async list(
    caller: Caller,
    objectName: string,
    query: { cursor?: string; limit?: number },
    signal?: AbortSignal,
  ): Promise<TrashResponse> {
    const view = await this.access.view(caller, objectName, 'read');
    const limit = Math.min(Math.max(1, Math.floor(query.limit ?? DEFAULT_TRASH_LIMIT)), MAX_TRASH_LIMIT);
    const after = query.cursor === undefined ? undefined : decodePosition(query.cursor);
    const session = this.pool.session({ signal, key: caller.keyId });
    const rows = await session.query(compileTrashPage(view, { after, limit: limit + 1 }));
    const more = rows.length > limit;
    const page = more ? rows.slice(0, limit) : rows;
    const records = page.map((row): TrashedRecordResponse => {
      const values = Object.fromEntries(view.fields.map((f, i) => [f.name, row[afterAlias(i)]]));
      const entry: TrashedRecordResponse = {
        id: row.id,
        deletedAt: row.deleted_at,
        actor: actorOf(caller, row.key_id),
        changeSetId: row.change_set_id,
        record: decodeRow(view, values),
      };
      if (caller.role === 'admin') entry.keyId = row.key_id;
      return entry;
    });
    const last = page[page.length - 1];
    return { records, nextCursor: more ? encodePosition([last.deleted_at, last.id]) : null };
  }

  /**
   * Brings a trashed record back as it was deleted (its id, values and created_at), in a change set of
   * its own, or of `changeSet` (a revert's). 409 unique_violation when a live record took one of its
   * unique values meanwhile; the caller needs to create records and to read this one.
   */
  async restore(caller: Caller, objectName: string, id: string, signal?: AbortSignal): Promise<VersionedRecord> {
    const view = await this.access.view(caller, objectName, 'create');
    await this.access.view(caller, objectName, 'read');
    if (!isUuid(id)) throw notFound(view.name, id);
    const changeSet = newChangeSet('restore');
    const referrers = await this.metadata.referrers(view.name);
    const record = await this.pool.transaction((session) => restoreFromTrash(session, caller, view, id, changeSet, referrers), {
      signal,
      key: caller.keyId,
    });
    await this.pool.wrote(caller.keyId);
    return { ...record, changeSetId: changeSet.id };
  }

  /** Admins: deletes a trashed record for good (its history stays until HISTORY_RETENTION_DAYS). */
  async purge(caller: Caller, objectName: string, id: string): Promise<void> {
    const view = await this.access.view(caller, objectName, 'read');
    if (!isUuid(id)) throw notFound(view.name, id);
    const rows = await this.pool.session({ key: caller.keyId }).query(compileUntrash(view.name, [id]));
    if (!rows.length) throw notFound(view.name, id);
  }

  /** Purges what has been in the trash longer than TRASH_RETENTION_DAYS; how many records. */
  async purgeExpired(now = Date.now()): Promise<number> {
    const before = new Date(now - this.config.trashRetentionDays * 86_400_000).toISOString();
    return drainBatches(this.pool.session(), (limit) => compilePurgeTrash(before, limit));
  }
}

/**
 * Puts a trashed record back in its table inside `session` (a restore's or a revert's transaction):
 * the row as deleted, `over` values over it when given (a revert's values before its change set), the
 * lookups its delete cleared (of `referrers`) set back to it, and its links made again.
 */
export async function restoreFromTrash(
  session: DataSession,
  caller: Caller,
  view: ObjectMeta,
  id: string,
  changeSet: ChangeSetStamp,
  referrers: ObjectReferrers,
  over: Record<string, unknown> = {},
): Promise<VersionedRecord> {
  const [trashed] = await session.query(compileTrashed(view, id));
  if (!trashed || !trashed.visible) throw notFound(view.name, id);
  const [row] = await scopedRows(
    session,
    view,
    compileInsertRaw(view, { ...trashed.record, ...over }, { op: 'create', keyId: caller.keyId, changeSet }),
  );
  await session.query(compileUntrash(view.name, [id]));
  // What its delete cleared points to it again, where nothing was set meanwhile.
  if (trashed.change_set_id) {
    const capture = { op: 'update' as const, keyId: caller.keyId, changeSet: { ...changeSet, object: view.name } };
    for (const { object, field } of referrers.lookups) {
      await session.query(compileRepointReferences(object, field, id, trashed.change_set_id, capture));
    }
  }
  // The row came back before its links: with links made again, it is read again (their values, and what they roll up).
  if (await restoreLinks(session, id, trashed.links ?? [], referrers.links, { keyId: caller.keyId, changeSet })) {
    return readWritten(session, view, id);
  }
  return decodeVersioned(view, row);
}
