import { DomainError } from './domain-error';
import type { ErrorCode } from './error-codes';

/** A query-string parameter holding JSON (where, orderBy): undefined when absent, `code` when not JSON. */
export function parseJsonParam(name: string, raw: string | undefined, code: ErrorCode): unknown {
  if (raw === undefined || raw === '') return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    throw new DomainError(code, `${name} must be valid JSON`);
  }
}

/** A query-string flag: `true` or `false`, `fallback` when absent or empty, else 400 validation_failed. */
export function parseFlagParam(name: string, raw: string | undefined, fallback: boolean): boolean {
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new DomainError('validation_failed', `${name} must be true or false`, { errors: [`${name} must be true or false`] });
}

/** An ISO 8601 time the validation let through, as a Date; 400 for one that names no real instant (2026-02-30). */
export function parseTime(value: string, name: string): Date {
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw new DomainError('validation_failed', `${name} must be an ISO 8601 date or time`);
  return at;
}
