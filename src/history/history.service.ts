import { Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { DataPool, type DataSession } from '../database/data-pool';
import { actorOf } from '../data/change-actor';
import { newChangeSet } from '../data/change-outbox';
import { DataService } from '../data/data.service';
import type { VersionedRecord } from '../data/data.types';
import { decodeRow, fieldDecoder } from '../data/field-value.codec';
import { notFound } from '../data/record-write';
import { requireField } from '../data/where.compiler';
import { AccessService } from '../governance/access.service';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import {
  afterAlias,
  beforeAlias,
  compileChangesSince,
  compileLiveRows,
  compileReadBack,
  compileVersions,
  compileVisibleIds,
  storedFields,
  type VersionRow,
} from './history.compiler';
import type { FieldChange, HistoryResponse, VersionResponse } from './history.dto';
import { rebuildAt, type RawRow } from './record-deltas';

export const DEFAULT_HISTORY_LIMIT = 20;
export const MAX_HISTORY_LIMIT = 100;
/** A version as clients send it: the change's number in the outbox (bigint). */
export const VERSION_PATTERN = /^\d{1,18}$/;

/** What a history read is bounded by: the caller's signal. */
interface Scope {
  signal?: AbortSignal;
  session?: DataSession;
}

/**
 * A record's history as the caller may read it: its versions (who, when, how, which change set, each
 * visible field before → after), the record as it was at a version, and a restore of that version as a
 * new one. A record outside the caller's row filter (now, or as it was deleted) is not found; fields it
 * may not see are left out, and a version that changed only those is not shown.
 */
@Injectable()
export class HistoryService {
  constructor(
    private readonly pool: DataPool,
    private readonly access: AccessService,
    private readonly data: DataService,
  ) {}

  async versions(
    caller: Caller,
    objectName: string,
    id: string,
    query: { cursor?: string; limit?: number; field?: string },
    scope: Scope = {},
  ): Promise<HistoryResponse> {
    const view = await this.access.view(caller, objectName, 'read');
    const session = scope.session ?? this.pool.session({ signal: scope.signal, key: caller.keyId });
    await this.assertVisible(view, id, session);
    if (query.cursor !== undefined && !VERSION_PATTERN.test(query.cursor)) {
      throw new DomainError('invalid_cursor', 'cursor must be a nextCursor of this history (an integer)');
    }
    if (query.field !== undefined) requireField(view, query.field);
    const limit = Math.min(Math.max(1, Math.floor(query.limit ?? DEFAULT_HISTORY_LIMIT)), MAX_HISTORY_LIMIT);
    const shown = view.fields.filter((f) => !f.system).map((f) => f.name);
    const rows = await session.query(
      compileVersions(view, id, { before: query.cursor, limit: limit + 1, field: query.field, visible: shown }),
    );
    const more = rows.length > limit;
    const page = more ? rows.slice(0, limit) : rows;
    return {
      versions: page.map((row) => toVersion(caller, view, row)),
      nextCursor: more ? page[page.length - 1].version : null,
    };
  }

  /** The record as it was at `version` (after that change; a delete: as it was deleted), with the caller's fields. */
  async versionAt(caller: Caller, objectName: string, id: string, version: string, scope: Scope = {}): Promise<RawAndRecord> {
    const view = await this.access.view(caller, objectName, 'read');
    const session = scope.session ?? this.pool.session({ signal: scope.signal, key: caller.keyId });
    await this.assertVisible(view, id, session);
    const missing = new DomainError(
      'version_not_found',
      `The history of "${id}" holds no version "${String(version).slice(0, 40)}"`,
    );
    if (!VERSION_PATTERN.test(version)) throw missing;
    const changes = await session.query(compileChangesSince(view, id, version));
    if (!changes.length || changes[changes.length - 1].id !== version) throw missing;
    const [live] = await session.query(compileLiveRows(view, [id]));
    const raw = rebuildAt(changes, live?.row);
    if (!raw) throw missing;
    const [record] = await readBack(view, [raw], session);
    return { raw, record };
  }

  /**
   * Writes the record back to a version: every field the caller may write that differs from now takes
   * that version's value, as one new version (`via: restore`), under If-Match when given. A version
   * equal to now writes nothing and answers the record as it is.
   */
  async restore(
    caller: Caller,
    objectName: string,
    id: string,
    version: unknown,
    versions: readonly string[] | undefined,
    scope: Scope = {},
  ): Promise<VersionedRecord> {
    if (typeof version !== 'string' && typeof version !== 'number') {
      throw new DomainError('validation_failed', 'version must be a version of the record\'s history (e.g. "1042")', {
        field: 'version',
      });
    }
    const writable = await this.access.view(caller, objectName, 'update');
    const { raw } = await this.versionAt(caller, objectName, id, String(version), scope);
    const current = await this.data.findOneVersioned(caller, objectName, id, undefined, { signal: scope.signal, fresh: true });
    const session = this.pool.session({ signal: scope.signal, key: caller.keyId });
    const [then] = await readBack(writable, [raw], session);
    const values: Record<string, unknown> = {};
    for (const field of writable.fields) {
      if (field.system || !(field.name in raw)) continue;
      const value = then[field.name] ?? null;
      if (value === null && field.required) continue;
      if (JSON.stringify(value) !== JSON.stringify(current.record[field.name] ?? null)) values[field.name] = value;
    }
    if (!Object.keys(values).length) {
      if (versions && !versions.includes(current.version)) {
        throw new DomainError('precondition_failed', `The "${objectName}" record "${id}" is not at a version If-Match names`);
      }
      return current;
    }
    return this.data.update(caller, objectName, id, values, versions, {
      signal: scope.signal,
      changeSet: newChangeSet('restore'),
    });
  }

  /** 404 unless the caller may read the record now (live, or in the trash as it was deleted). */
  private async assertVisible(view: ObjectMeta, id: string, session: DataSession): Promise<void> {
    if (!isUuid(id)) throw notFound(view.name, id);
    const rows = await session.query(compileVisibleIds(view, [id]));
    if (!rows.length) throw notFound(view.name, id);
  }
}

/** A version as kept (raw row) and as the caller reads it. */
export interface RawAndRecord {
  raw: RawRow;
  record: Record<string, unknown>;
}

/** Kept rows decoded as the caller's view of the object reads them, in order. */
export async function readBack(
  view: ObjectMeta,
  raws: readonly RawRow[],
  session: DataSession,
): Promise<Record<string, unknown>[]> {
  if (!raws.length) return [];
  const rows = await session.query(compileReadBack(view, raws));
  return rows.map((row) => decodeRow(view, row));
}

function toVersion(caller: Caller, view: ObjectMeta, row: VersionRow): VersionResponse {
  const changes: Record<string, FieldChange> = {};
  const changed = new Set(row.changed_fields);
  storedFields(view).forEach((field, i) => {
    if (field.system) return;
    const decode = fieldDecoder(field);
    const after = decode(row[afterAlias(i)]) ?? null;
    const before = decode(row[beforeAlias(i)]) ?? null;
    if (row.op === 'create' && after !== null) changes[field.name] = { before: null, after };
    else if (row.op === 'delete' && after !== null) changes[field.name] = { before: after, after: null };
    else if (row.op === 'update' && changed.has(field.name)) changes[field.name] = { before, after };
  });
  const version: VersionResponse = {
    version: row.version,
    at: row.at,
    op: row.op === 'create' && row.via === 'restore' ? 'restore' : row.op,
    actor: actorOf(caller, row.key_id),
    changeSetId: row.change_set_id,
    via: (row.via ?? 'api') as VersionResponse['via'],
    changes,
  };
  if (caller.role === 'admin') version.keyId = row.key_id;
  return version;
}
