import { DomainError } from './domain-error';

/** Postgres SQLSTATEs by name, so code that reads one says which condition it means. */
export const UNIQUE_VIOLATION = '23505';
export const FOREIGN_KEY_VIOLATION = '23503';
/** Lookups are ON DELETE RESTRICT: deleting a record others still point to fails with this, not 23503. */
export const RESTRICT_VIOLATION = '23001';
export const NOT_NULL_VIOLATION = '23502';
/** Class 22: every data exception (bad format, out of range, ...) starts with it. */
export const DATA_EXCEPTION_CLASS = '22';
export const INVALID_TEXT_REPRESENTATION = '22P02';
export const INVALID_DATETIME_FORMAT = '22007';
export const DATETIME_FIELD_OVERFLOW = '22008';
export const NUMERIC_VALUE_OUT_OF_RANGE = '22003';
export const UNTRANSLATABLE_CHARACTER = '22P05';
export const READ_ONLY_SQL_TRANSACTION = '25006';
export const INSUFFICIENT_PRIVILEGE = '42501';
export const UNDEFINED_TABLE = '42P01';
export const UNDEFINED_COLUMN = '42703';
export const PROGRAM_LIMIT_EXCEEDED = '54000';
export const QUERY_CANCELED = '57014';
export const DEADLOCK_DETECTED = '40P01';

/** How many `.cause` links are followed: ORM wrappers nest a level or two, never more. */
const MAX_CAUSE_DEPTH = 5;
const SQLSTATE_PATTERN = /^[0-9A-Z]{5}$/;

/** The SQLSTATE of a pg error, also when an ORM layer wrapped it (found through `.cause`); undefined for anything else. */
export function sqlState(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && depth < MAX_CAUSE_DEPTH; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && SQLSTATE_PATTERN.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * pg-pool's two timeouts of `connectionTimeoutMillis`: no connection came free in time, or a new one
 * did not connect in time. They carry no code, only these messages (kept by the ORM's wrappers).
 */
const POOL_TIMEOUT_MESSAGES = new Set([
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
]);

/** Whether `error` is a pool's wait for a connection that timed out (also when an ORM layer wrapped it). */
export function isPoolTimeout(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < MAX_CAUSE_DEPTH; depth++) {
    if (current instanceof Error && POOL_TIMEOUT_MESSAGES.has(current.message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** The 503 of a pool whose every connection stayed taken for `waitedMs`: try again in a moment. */
export function databaseBusy(waitedMs: number): DomainError {
  return new DomainError(
    'database_busy',
    `Every database connection stayed busy for ${waitedMs} ms; try again in a moment`,
    { waitedMs },
    { retryAfterSeconds: Math.max(1, Math.ceil(waitedMs / 1000)) },
  );
}

/**
 * The 503 of a transaction Postgres rolled back to end a deadlock: two writers took the same rows or tables
 * in different orders and one of them gave way. A moment's contention, not a server fault.
 */
export function deadlockBusy(): DomainError {
  return new DomainError(
    'database_busy',
    'The write ran into concurrent writes of the same records and was rolled back; send it again',
    { reason: 'deadlock' },
    { retryAfterSeconds: 1 },
  );
}
