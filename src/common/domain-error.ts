import type { ErrorCode } from './error-codes';

export interface DomainErrorOptions {
  /** A transient condition: the response tells the client when to try again (`Retry-After`, seconds). */
  retryAfterSeconds?: number;
}

/**
 * A failure a caller can act on. Services throw these with a stable snake_case code from the
 * catalog (src/common/error-codes.ts); the one exception filter decides the HTTP status from it.
 */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    readonly options: DomainErrorOptions = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
