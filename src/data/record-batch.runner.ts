import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import type { DataSession } from '../database/data-pool';
import { inSavepoint } from '../database/savepoint';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import {
  batchFailed,
  type BatchOperation,
  type BatchOperationError,
  type BatchOperationResult,
  failedResult,
  operationError,
} from './record-batch';
import type { ChangeCapture } from './change-outbox';
import { etagOf } from './record-version';
import { compileInsert, compileUpdate, VERSION_ALIAS } from './records.compiler';
import type { ObjectReferrers } from '../metadata/object-metadata.types';
import { deleteRecord, encodeWrite, missedWrite, notFound, scopedRows } from './record-write';

/** Who writes a batch, the change set its writes belong to, and the lookups and links its deletes clear. */
export interface BatchWriter extends Pick<ChangeCapture, 'keyId' | 'changeSet'> {
  referrers?: ObjectReferrers;
}

/** A write's capture for the feed: who, which change set, what kind. */
function captureOf(writer: BatchWriter, op: ChangeCapture['op']): ChangeCapture {
  return { op, keyId: writer.keyId, changeSet: writer.changeSet };
}

/** Where one attempt at a batch runs: a transaction of its own, or a savepoint of the caller's transaction. */
export type BatchTransaction = <T>(work: (session: DataSession) => Promise<T>) => Promise<T>;

/** A checked batch: its operations as parsed, those planned to run, and the errors found before any SQL. */
export interface PlannedBatch {
  operations: readonly BatchOperation[];
  planned: readonly PlannedOperation[];
  errors: readonly BatchOperationError[];
}

/**
 * Runs a planned batch. `atomic`: all or nothing; any failure writes nothing and throws the first
 * failing operation's error with every failing operation in `details.errors`. Otherwise each
 * operation that can be applied is, and the others report their error in their result.
 *
 * The usual path makes one statement per update or delete and one per run of creates. Only when
 * something fails are the operations replayed one by one behind savepoints, so that every failing
 * one is named, not just the first that broke the transaction.
 */
export async function runBatch(
  { operations, planned, errors }: PlannedBatch,
  atomic: boolean,
  writer: BatchWriter,
  transaction: BatchTransaction,
): Promise<BatchOperationResult[]> {
  const results = new Map<number, BatchOperationResult>();
  if (atomic && !errors.length) {
    try {
      for (const result of await transaction((session) => runAll(session, planned, writer))) results.set(result.index, result);
      return [...results.values()].sort((a, b) => a.index - b.index);
    } catch (error) {
      if (!(error instanceof OperationFailed)) throw error;
    }
  }
  if (atomic) {
    // Something failed: replay to name every failing operation, then roll it all back. When only checks
    // made before the database failed, the rest is first written at once: when that goes through, none
    // of it fails, and the replay one by one (a statement and a savepoint per operation) is not needed.
    const replayed = await transaction(async (session) => {
      const rest = () => inSavepoint(session, 'batch_attempt', (attempt) => runAll(attempt, planned, writer));
      if (errors.length && (await rest().then(() => true, writeFailed))) throw new RolledBack([]);
      throw new RolledBack(await runEach(session, planned, writer));
    }).catch((error: unknown) => {
      if (error instanceof RolledBack) return error.results;
      throw error;
    });
    throw batchFailed([...errors, ...replayed.flatMap((r) => (r.error ? [{ index: r.index, ...r.error }] : []))]);
  }
  for (const result of await transaction((session) => runEach(session, planned, writer))) results.set(result.index, result);
  const ids = new Map(operations.map((o) => [o.index, o.op === 'create' ? null : o.id]));
  for (const error of errors) results.set(error.index, failedResult(error, ids.get(error.index) ?? null));
  return [...results.values()].sort((a, b) => a.index - b.index);
}

/** A batch operation with its values encoded, ready to run. */
export type PlannedOperation = BatchOperation & { object: ObjectMeta; values?: Map<string, unknown> };

/** An operation of an all-or-nothing batch failed: the batch is replayed to name every failing one. */
class OperationFailed extends Error {
  constructor() {
    super('a batch operation failed');
  }
}

/** Thrown to roll back a replay while carrying out what it found. */
class RolledBack extends Error {
  constructor(readonly results: BatchOperationResult[]) {
    super('rolled back');
  }
}

/** Checks what can be checked before any SQL: the action is granted, the id is one, the values fit. */
export function planOperation(view: ObjectMeta | DomainError, operation: BatchOperation): PlannedOperation {
  if (view instanceof DomainError) throw view;
  if (operation.op === 'create') return { ...operation, object: view, values: encodeWrite(view, operation.record, 'insert') };
  if (!isUuid(operation.id)) throw notFound(view.name, operation.id);
  if (operation.op === 'update') return { ...operation, object: view, values: encodeWrite(view, operation.record, 'update') };
  return { ...operation, object: view };
}

/** False for runAll's OperationFailed (an operation failed); any other error is rethrown. */
function writeFailed(error: unknown): false {
  if (error instanceof OperationFailed) return false;
  throw error;
}

/** Bound parameters one insert of a batch may use (PostgreSQL takes at most 65,535 in a statement). */
const BATCH_INSERT_PARAMS = 30_000;

/**
 * Runs the operations in order, runs of creates as one insert each; the first failing operation
 * throws OperationFailed (the transaction is lost then anyway; the caller replays to find them all).
 */
async function runAll(
  session: DataSession,
  planned: readonly PlannedOperation[],
  writer: BatchWriter,
): Promise<BatchOperationResult[]> {
  const results: BatchOperationResult[] = [];
  const isGroupable = (operation: PlannedOperation | undefined) => operation?.op === 'create' && operation.values!.size > 0;
  try {
    for (let at = 0; at < planned.length;) {
      if (!isGroupable(planned[at])) {
        results.push(await runOne(session, planned[at++], writer));
        continue;
      }
      const { object } = planned[at];
      const perInsert = Math.max(1, Math.floor(BATCH_INSERT_PARAMS / object.fields.length));
      let end = at;
      while (end < planned.length && end - at < perInsert && isGroupable(planned[end])) end++;
      const creates = planned.slice(at, end);
      const rows = await scopedRows(
        session,
        object,
        compileInsert(
          object,
          creates.map((c) => c.values!),
          captureOf(writer, 'create'),
        ),
      );
      rows.forEach((row, i) => results.push(doneResult(creates[i], row)));
      at = end;
    }
  } catch (error) {
    if (error instanceof DomainError) throw new OperationFailed();
    throw error;
  }
  return results;
}

/** Runs each operation behind a savepoint of its own: a failing one is undone alone and reported. */
async function runEach(
  session: DataSession,
  planned: readonly PlannedOperation[],
  writer: BatchWriter,
): Promise<BatchOperationResult[]> {
  const results: BatchOperationResult[] = [];
  for (const operation of planned) {
    try {
      const isDomainError = (error: unknown) => error instanceof DomainError;
      results.push(await inSavepoint(session, 'batch_operation', (s) => runOne(s, operation, writer), isDomainError));
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      results.push(failedResult(operationError(operation.index, error), operation.op === 'create' ? null : operation.id));
    }
  }
  return results;
}

async function runOne(session: DataSession, operation: PlannedOperation, writer: BatchWriter): Promise<BatchOperationResult> {
  const { object } = operation;
  if (operation.op === 'create') {
    const [row] = await scopedRows(session, object, compileInsert(object, [operation.values!], captureOf(writer, 'create')));
    return doneResult(operation, row);
  }
  const rows =
    operation.op === 'update'
      ? await scopedRows(
          session,
          object,
          compileUpdate(object, operation.id, operation.values!, operation.versions, {
            ...captureOf(writer, 'update'),
            changedFields: [...operation.values!.keys()],
          }),
        )
      : await deleteRecord(
          session,
          object,
          operation.id,
          operation.versions,
          captureOf(writer, 'delete'),
          writer.referrers ?? { lookups: [], links: [] },
        );
  if (!rows.length) throw await missedWrite(object, operation.id, operation.versions, session);
  return doneResult(operation, rows[0]);
}

/** A result needs the row's id and version only: decoding all fields of 1,000 rows cost more than the rest of it. */
function doneResult(operation: PlannedOperation, row: Record<string, unknown>): BatchOperationResult {
  if (operation.op === 'delete') return { index: operation.index, id: operation.id, status: 204 };
  return {
    index: operation.index,
    id: String(row.id),
    status: operation.op === 'create' ? 201 : 200,
    etag: etagOf(String(row[VERSION_ALIAS])),
  };
}
