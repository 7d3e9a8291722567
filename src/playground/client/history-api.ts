import { apiGet, apiPath, apiSend } from './api';
import { versioned, type GridRecord, type Versioned } from './grid-api';

export type Actor = 'self' | 'other' | 'system';

/** One version of a record: who wrote it, when, how, in which change set, and each field before → after. */
export interface RecordVersion {
  version: string;
  at: string;
  op: 'create' | 'update' | 'delete' | 'restore';
  actor: Actor;
  changeSetId: string;
  via: string;
  changes: Record<string, { before: unknown; after: unknown }>;
}

export interface HistoryPage {
  versions: RecordVersion[];
  nextCursor: string | null;
}

export interface TrashedRecord {
  id: string;
  deletedAt: string;
  actor: Actor;
  changeSetId: string;
  record: Record<string, unknown>;
}

export interface TrashPage {
  records: TrashedRecord[];
  nextCursor: string | null;
}

export interface ChangeSetSummary {
  id: string;
  at: string;
  actor: Actor;
  via: string;
  object: string;
  records: number;
  toolCallId?: string;
  chatId?: string;
  revertedBy?: string;
  reverts?: string;
}

/** One field a revert would overwrite although it changed since the change set (`field` null: the record itself). */
export interface RevertConflict {
  id: string;
  field: string | null;
  expected: unknown;
  current: unknown;
}

const PAGE = 20;

function query(cursor: string | undefined, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams({ limit: String(PAGE), ...extra });
  if (cursor) params.set('cursor', cursor);
  return params.toString();
}

/** A record's versions, newest first. */
export function recordHistory(key: string, object: string, id: string, cursor?: string): Promise<HistoryPage> {
  return apiGet<HistoryPage>(key, `${apiPath('objects', object, 'records', id, 'history')}?${query(cursor)}`);
}

/** Writes the record back to a version, as a new version: the record now, with the change set of the restore. */
export async function restoreVersion(key: string, object: string, id: string, version: string): Promise<Versioned> {
  return versioned(
    await apiSend<GridRecord>(key, apiPath('objects', object, 'records', id, 'restore'), {
      method: 'POST',
      body: { version },
    }),
  );
}

export function listTrash(key: string, object: string, cursor?: string): Promise<TrashPage> {
  return apiGet<TrashPage>(key, `${apiPath('objects', object, 'trash')}?${query(cursor)}`);
}

/** Brings a record back from the trash; 409 unique_violation when a live record took one of its unique values. */
export async function restoreTrashed(key: string, object: string, id: string): Promise<Versioned> {
  return versioned(
    await apiSend<GridRecord>(key, apiPath('objects', object, 'trash', id, 'restore'), { method: 'POST', body: {} }),
  );
}

/** The key's own change sets of an object, newest first. */
export async function ownChangeSets(key: string, object: string, limit: number): Promise<ChangeSetSummary[]> {
  const params = new URLSearchParams({ object, actor: 'self', limit: String(limit) });
  return (await apiGet<{ changeSets: ChangeSetSummary[] }>(key, `${apiPath('change-sets')}?${params}`)).changeSets;
}

/** Undoes a change set as one, all or nothing: the change set of the revert; 409 revert_conflict writes nothing. */
export async function revertChangeSet(key: string, id: string): Promise<string> {
  return (await apiSend<{ changeSetId: string }>(key, apiPath('change-sets', id, 'revert'), { method: 'POST', body: {} })).body
    .changeSetId;
}

/** The conflicts of a 409 revert_conflict's details, or none. */
export function revertConflicts(details: unknown): RevertConflict[] {
  const records = (details as { records?: unknown } | undefined)?.records;
  if (!Array.isArray(records)) return [];
  return records.filter(
    (entry): entry is RevertConflict =>
      typeof entry === 'object' && entry !== null && typeof (entry as RevertConflict).id === 'string',
  );
}
