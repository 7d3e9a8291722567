import OpenAI from 'openai';
import { DomainError } from '../common/domain-error';
import type { ErrorCode } from '../common/error-codes';

/** Kinds of model failure, each with its own HTTP status and retry advice. */
export type LlmErrorKind = 'rate_limited' | 'timeout' | 'auth' | 'bad_request' | 'unavailable' | 'aborted' | 'invalid_response';

const CODES: Record<LlmErrorKind, ErrorCode> = {
  rate_limited: 'llm_rate_limited',
  timeout: 'llm_timeout',
  auth: 'llm_auth_failed',
  bad_request: 'llm_bad_request',
  unavailable: 'llm_unavailable',
  aborted: 'llm_aborted',
  invalid_response: 'llm_invalid_response',
};

/**
 * A failed model call, classified. `retryable` says whether trying again later can help. The
 * message is ours; the provider's own text (which can name internal hosts or echo key fragments)
 * is kept in `upstreamMessage` for the log only, never for a caller or a stored chat.
 */
export class LlmError extends DomainError {
  constructor(
    readonly kind: LlmErrorKind,
    message: string,
    readonly retryable: boolean,
    readonly status?: number,
    readonly upstreamMessage?: string,
  ) {
    super(CODES[kind], message, status === undefined ? { kind } : { kind, status });
    this.name = 'LlmError';
  }
}

/** Turns whatever the SDK threw into an LlmError whose message is one of ours, never the provider's text. */
export function classifyLlmError(error: unknown): LlmError {
  if (error instanceof LlmError) return error;
  if (error instanceof OpenAI.APIUserAbortError || (error as Error)?.name === 'AbortError') {
    return new LlmError('aborted', 'The model call was cancelled', false);
  }
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new LlmError('timeout', 'The model endpoint did not answer in time', true);
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return new LlmError('unavailable', 'The model endpoint could not be reached', true);
  }
  if (error instanceof OpenAI.APIError) {
    const status = typeof error.status === 'number' ? error.status : undefined;
    const upstream = error.message ? error.message.slice(0, 1000) : undefined;
    if (status === 429)
      return new LlmError('rate_limited', 'The model endpoint is rate limiting requests', true, status, upstream);
    if (status === 401 || status === 403)
      return new LlmError('auth', 'The model endpoint rejected the API key', false, status, upstream);
    if (status === 408) return new LlmError('timeout', 'The model endpoint timed out', true, status, upstream);
    if (status !== undefined && status >= 400 && status < 500) {
      return new LlmError('bad_request', 'The model endpoint rejected the request', false, status, upstream);
    }
    return new LlmError('unavailable', 'The model endpoint failed', true, status, upstream);
  }
  const upstream = (error as Error)?.message ?? String(error);
  return new LlmError('invalid_response', 'The model endpoint sent an answer that could not be read', true, undefined, upstream);
}
