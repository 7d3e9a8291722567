/**
 * A failure a caller can act on. Services throw these with a stable snake_case code; the one
 * exception filter (src/common/http-exception.filter.ts) decides the HTTP status from the code.
 */
export class DomainError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
