import { DomainError } from '../common/domain-error';
import { statusForCode, type ErrorCode } from '../common/error-codes';
import { isPlainObject } from '../common/plain-object';
import type { AccessAction } from '../governance/access-policy.types';
import { parseIfMatch } from './record-version';

/** Most operations one batch may carry. */
export const BATCH_MAX_OPERATIONS = 1000;

/** One operation of a batch, as checked for its shape (its values are checked by the data engine). */
export type BatchOperation =
  | { index: number; op: 'create'; record: Record<string, unknown> }
  | { index: number; op: 'update'; id: string; record: Record<string, unknown>; versions?: string[] }
  | { index: number; op: 'delete'; id: string; versions?: string[] };

/** Why one operation failed: its code, message and, when one field is to blame, that field. */
export interface BatchOperationError {
  index: number;
  code: ErrorCode;
  error: string;
  field?: string;
}

/** What happened to one operation (in request order). */
export interface BatchOperationResult {
  index: number;
  /** The record's id: a created record's new id; null when a create failed. */
  id: string | null;
  /** HTTP status of the operation on its own: 201 created, 200 updated, 204 deleted, or its error's. */
  status: number;
  /** The record's version after the write (ETag form), for creates and updates. */
  etag?: string;
  error?: { code: ErrorCode; error: string; field?: string };
}

const ALLOWED_KEYS: Record<BatchOperation['op'], readonly string[]> = {
  create: ['op', 'record'],
  update: ['op', 'id', 'record', 'ifMatch'],
  delete: ['op', 'id', 'ifMatch'],
};

/** The access an operation needs. */
export function actionOf(operation: BatchOperation): AccessAction {
  return operation.op;
}

/**
 * Checks the shape of each operation: a known `op`, the keys it takes, a record object where one is
 * needed, an id string, an `ifMatch` in If-Match syntax. Bad ones become errors naming their index.
 */
export function parseOperations(raw: readonly unknown[]): { operations: BatchOperation[]; errors: BatchOperationError[] } {
  const operations: BatchOperation[] = [];
  const errors: BatchOperationError[] = [];
  raw.forEach((value, index) => {
    try {
      operations.push(parseOperation(value, index));
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      errors.push(operationError(index, error));
    }
  });
  return { operations, errors };
}

function parseOperation(value: unknown, index: number): BatchOperation {
  if (!isPlainObject(value)) throw invalid('an operation must be an object with "op"');
  const op = value.op;
  if (op !== 'create' && op !== 'update' && op !== 'delete') {
    throw invalid('"op" must be "create", "update" or "delete"');
  }
  const extra = Object.keys(value).filter((key) => !ALLOWED_KEYS[op].includes(key));
  if (extra.length) throw invalid(`a ${op} operation takes ${ALLOWED_KEYS[op].join(', ')}; not ${extra.join(', ')}`);
  if (op !== 'delete' && !isPlainObject(value.record))
    throw invalid(`a ${op} operation needs "record", an object of field values`);
  if (op === 'create') return { index, op, record: value.record as Record<string, unknown> };
  if (typeof value.id !== 'string' || !value.id) throw invalid(`a ${op} operation needs "id", the record's id`);
  if (value.ifMatch !== undefined && typeof value.ifMatch !== 'string') {
    throw invalid('"ifMatch" must be an ETag string as the record was read, e.g. "\\"1234\\""');
  }
  const versions = parseIfMatch(value.ifMatch);
  return op === 'update'
    ? { index, op, id: value.id, record: value.record as Record<string, unknown>, versions }
    : { index, op, id: value.id, versions };
}

function invalid(message: string): DomainError {
  return new DomainError('invalid_operation', message);
}

/** A failed operation, naming the field to blame when its error names exactly one. */
export function operationError(index: number, error: DomainError): BatchOperationError {
  const details = (error.details ?? {}) as { field?: unknown; fields?: unknown };
  const field =
    typeof details.field === 'string'
      ? details.field
      : Array.isArray(details.fields) && details.fields.length === 1 && typeof details.fields[0] === 'string'
        ? details.fields[0]
        : undefined;
  return { index, code: error.code, error: error.message, ...(field ? { field } : {}) };
}

/** The result line of a failed operation. */
export function failedResult(error: BatchOperationError, id: string | null): BatchOperationResult {
  const { index, ...rest } = error;
  return { index, id, status: statusForCode(error.code), error: rest };
}

/**
 * The error of an all-or-nothing batch that wrote nothing: the status and code of its first failing
 * operation, with every failing operation in `details.errors`.
 */
export function batchFailed(errors: BatchOperationError[]): DomainError {
  const sorted = [...errors].sort((a, b) => a.index - b.index);
  const first = sorted[0];
  return new DomainError(
    first.code,
    `Nothing was written: ${sorted.length} operation${sorted.length > 1 ? 's' : ''} failed; the first, at index ${first.index}: ${first.error}`,
    { errors: sorted },
  );
}
