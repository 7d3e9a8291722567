import { apiGet, apiPath, apiSend } from './api';

/** One field of an object, as the key may see it (hidden fields are absent). */
export interface FieldSummary {
  name: string;
  label: string;
  type: string;
  /** The allowed values of a select field. */
  options?: string[];
  /** The object a lookup field points at. */
  reference?: string;
  /** Computed fields (formula, rollup, count, lookup_value): the type their value reads as. */
  resultType?: string;
  /** A formula's expression, its fields written `{name}`. */
  expression?: string;
  /** A rollup's or count's relation: `<object>.<its lookup pointing here>`. */
  relation?: string;
  /** A rollup's function (sum, avg, count, ...). */
  function?: string;
  /** The field a rollup reads of the related records, or the field of the target a lookup_value shows. */
  field?: string;
  /** A rollup's or count's condition on the related records (a `where`). */
  filter?: unknown;
  /** The lookup field a lookup_value reads through. */
  through?: string;
}

export interface ObjectDescription {
  name: string;
  label: string;
  fields: FieldSummary[];
}

export interface OrderBy {
  field: string;
  order: 'asc' | 'desc';
}

/** A saved view the key may use (its own, or shared). */
export interface ViewSummary {
  name: string;
  label: string;
  description?: string;
  fields?: string[];
  orderBy?: OrderBy[];
  shared: boolean;
}

export type GridRecord = Record<string, unknown> & { id: string };

export interface RecordPage {
  records: GridRecord[];
  /** Absent on pages after a cursor. */
  total?: number;
  /** false when total is the database's estimate (beyond RECORDS_COUNT_CAP). */
  totalExact?: boolean;
  /** null on the last page. */
  nextCursor: string | null;
}

/** What a grid asks for; the pages after the first repeat it with the previous page's cursor. */
export interface GridQuery {
  view?: string;
  q?: string;
  /** The `where` as the person typed it: the server is the judge of it, and its error names the problem. */
  where?: string;
  orderBy?: OrderBy[];
  limit: number;
}

/**
 * Some fields of the records with these ids, those of them the key may read (at most one page): what a grid
 * reads again when the values it shows were computed from records that changed since.
 */
export async function readRecordFields(
  key: string,
  object: string,
  ids: string[],
  fields: string[],
  signal?: AbortSignal,
): Promise<GridRecord[]> {
  const params = new URLSearchParams({
    where: JSON.stringify({ id: { $in: ids } }),
    fields: ['id', ...fields.filter((name) => name !== 'id')].join(','),
    limit: String(ids.length),
  });
  return (await apiGet<RecordPage>(key, `${records(object)}?${params}`, signal)).records;
}

/** A record with its version, as sent in ETag and sent back in If-Match. */
export interface Versioned {
  record: GridRecord;
  etag: string;
  /** The change set of the write that answered with the record (none for a read). */
  changeSetId?: string;
}

export type BatchOperation =
  | { op: 'create'; record: Record<string, unknown> }
  | { op: 'update'; id: string; record: Record<string, unknown>; ifMatch?: string };

export interface BatchResult {
  index: number;
  id: string;
  status: number;
  etag?: string;
}

/** One event of the change feed: a write of a record, with the fields the key may see. */
export interface Change {
  cursor: string;
  op: 'create' | 'update' | 'delete';
  id: string;
  changedFields: string[];
  record?: GridRecord;
  actor: 'self' | 'other' | 'system';
}

const records = (object: string, ...rest: string[]) => apiPath('objects', object, 'records', ...rest);

export function describeObject(key: string, object: string): Promise<ObjectDescription> {
  return apiGet<ObjectDescription>(key, apiPath('objects', object));
}

export async function listViews(key: string, object: string): Promise<ViewSummary[]> {
  return (await apiGet<{ views: ViewSummary[] }>(key, apiPath('objects', object, 'views'))).views;
}

/** One page of records: the first (with its total) without `cursor`, the following ones after the previous `nextCursor`. */
export function listRecords(
  key: string,
  object: string,
  query: GridQuery,
  cursor: string | undefined,
  signal: AbortSignal,
): Promise<RecordPage> {
  const params = new URLSearchParams({ limit: String(query.limit) });
  if (query.view) params.set('view', query.view);
  if (query.q) params.set('q', query.q);
  if (query.where) params.set('where', query.where);
  if (query.orderBy) params.set('orderBy', JSON.stringify(query.orderBy));
  if (cursor) params.set('cursor', cursor);
  return apiGet<RecordPage>(key, `${records(object)}?${params}`, signal);
}

/** A written record, its version, and the change set of the write (which the record's JSON carries, not a field). */
export function versioned(response: { body: GridRecord; headers: Headers }): Versioned {
  const { changeSetId, ...record } = response.body;
  const fromHeader = response.headers.get('change-set-id') ?? undefined;
  return {
    record,
    etag: response.headers.get('etag') ?? '',
    changeSetId: typeof changeSetId === 'string' ? changeSetId : fromHeader,
  };
}

/**
 * The record as it is now. `fresh` (the version the caller already has) makes the server read it on the primary,
 * so that after a 412 the version read is at least the one that refused the write, never a replica's older one.
 */
export async function getRecord(key: string, object: string, id: string, fresh?: string): Promise<Versioned> {
  const headers: Record<string, string> = fresh ? { 'If-None-Match': fresh } : {};
  return versioned(await apiSend<GridRecord>(key, records(object, id), { headers }));
}

/** Changes some fields of the record at version `etag` only: 412 precondition_failed if it moved on. */
export async function patchRecord(
  key: string,
  object: string,
  id: string,
  values: Record<string, unknown>,
  etag: string,
): Promise<Versioned> {
  return versioned(
    await apiSend<GridRecord>(key, records(object, id), { method: 'PATCH', body: values, headers: { 'If-Match': etag } }),
  );
}

/** All or nothing: one request, one transaction, one change set (which an undo reverts as one). */
export async function batchRecords(
  key: string,
  object: string,
  operations: BatchOperation[],
): Promise<{ results: BatchResult[]; changeSetId?: string }> {
  const response = await apiSend<{ results: BatchResult[]; changeSetId?: string }>(key, records(object, 'batch'), {
    method: 'POST',
    body: { operations, atomic: true },
  });
  return response.body;
}

/** Moves a record to the trash; resolves with the change set of the delete. */
export async function deleteRecord(key: string, object: string, id: string): Promise<string | undefined> {
  const response = await apiSend<undefined>(key, records(object, id), { method: 'DELETE' });
  return response.headers.get('change-set-id') ?? undefined;
}

/** A short-lived token that opens event streams only: EventSource cannot send the key in a header. */
export async function streamToken(key: string): Promise<string> {
  return (await apiSend<{ token: string }>(key, apiPath('stream-tokens'), { method: 'POST', body: {} })).body.token;
}

export function changeStreamUrl(object: string, token: string, after: string | undefined): string {
  const params = new URLSearchParams({ token });
  if (after) params.set('after', after);
  return `${apiPath('objects', object, 'changes', 'stream')}?${params}`;
}
