import type { ErrorCode } from './error-codes';

/**
 * A failure a caller can act on. Services throw these with a stable snake_case code from the
 * catalog (src/common/error-codes.ts); the one exception filter decides the HTTP status from it.
 */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    /** For a limit the caller may retry later: sent as the `Retry-After` header, in seconds. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
