import OpenAI from 'openai';
import { DomainError } from '../common/domain-error';
import type { ErrorCode } from '../common/error-codes';

/** Kinds of model failure, each with its own HTTP status and retry advice. */
export type LlmErrorKind =
  'rate_limited' | 'timeout' | 'auth' | 'bad_request' | 'context_length' | 'unavailable' | 'aborted' | 'invalid_response';

const CODES: Record<LlmErrorKind, ErrorCode> = {
  rate_limited: 'llm_rate_limited',
  timeout: 'llm_timeout',
  auth: 'llm_auth_failed',
  bad_request: 'llm_bad_request',
  context_length: 'llm_context_length',
  unavailable: 'llm_unavailable',
  aborted: 'llm_aborted',
  invalid_response: 'llm_invalid_response',
};

/** Every code a model call can end with; bounded, so it can label metrics. */
export const LLM_ERROR_CODES: readonly ErrorCode[] = Object.values(CODES);

/** What the provider said about trying again, read from its response headers. */
export interface LlmRetryHints {
  /** `retry-after-ms`, or `Retry-After` in seconds or as an HTTP date: how long the provider asks us to wait. */
  retryAfterMs?: number;
  /** `x-should-retry: true|false`, when the provider says so explicitly (it overrides the status). */
  shouldRetry?: boolean;
}

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
    readonly hints: LlmRetryHints = {},
  ) {
    super(CODES[kind], message, status === undefined ? { kind } : { kind, status });
    this.name = 'LlmError';
  }

  /** The wait the provider asked for, if any, at most `capMs`. */
  retryAfterMs(capMs: number): number | undefined {
    const asked = this.hints.retryAfterMs;
    return asked === undefined ? undefined : Math.min(asked, capMs);
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
    const hints = retryHints(error.headers as Headers | undefined);
    if (status === 429)
      return new LlmError('rate_limited', 'The model endpoint is rate limiting requests', true, status, upstream, hints);
    if (status === 401 || status === 403)
      return new LlmError('auth', 'The model endpoint rejected the API key', false, status, upstream, hints);
    if (status === 408) return new LlmError('timeout', 'The model endpoint timed out', true, status, upstream, hints);
    if (status !== undefined && status >= 400 && status < 500 && isContextLengthError(error)) {
      return new LlmError(
        'context_length',
        "The conversation is longer than the model's context window: lower the agent's model.contextTokens",
        false,
        status,
        upstream,
        // Never retried, whatever x-should-retry says: the same request cannot fit the next time either.
      );
    }
    if (status !== undefined && status >= 400 && status < 500) {
      return new LlmError('bad_request', 'The model endpoint rejected the request', false, status, upstream, hints);
    }
    return new LlmError('unavailable', 'The model endpoint failed', true, status, upstream, hints);
  }
  const upstream = (error as Error)?.message ?? String(error);
  return new LlmError('invalid_response', 'The model endpoint sent an answer that could not be read', true, undefined, upstream);
}

/**
 * OpenAI (and Azure) say `code: context_length_exceeded`; vLLM, LiteLLM, Mistral, Anthropic-style and other
 * endpoints only say it in their message ("maximum context length is 8192 tokens", "prompt is too long").
 */
const CONTEXT_LENGTH_MESSAGE =
  /context[ _-]length|context window|maximum context|prompt is too long|prompt too long|too many (input |prompt )?tokens/i;

function isContextLengthError(error: { code?: string | null; message?: string }): boolean {
  if (error.code === 'context_length_exceeded') return true;
  return CONTEXT_LENGTH_MESSAGE.test(error.message ?? '');
}

/**
 * The provider's retry advice: `retry-after-ms` (OpenAI's, milliseconds) first, then the standard
 * `Retry-After` (seconds, or an HTTP date); a negative or unreadable value is ignored.
 */
export function retryHints(headers: Headers | undefined, now: number = Date.now()): LlmRetryHints {
  if (!headers) return {};
  const hints: LlmRetryHints = {};
  const shouldRetry = headers.get('x-should-retry');
  if (shouldRetry === 'true' || shouldRetry === 'false') hints.shouldRetry = shouldRetry === 'true';
  const retryAfterMs = parseRetryAfter(headers.get('retry-after-ms'), headers.get('retry-after'), now);
  if (retryAfterMs !== undefined) hints.retryAfterMs = retryAfterMs;
  return hints;
}

function parseRetryAfter(milliseconds: string | null, retryAfter: string | null, now: number): number | undefined {
  if (milliseconds !== null && /^\s*\d+(\.\d+)?\s*$/.test(milliseconds)) return Math.ceil(Number(milliseconds));
  if (retryAfter === null) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(retryAfter)) return Math.ceil(Number(retryAfter) * 1000);
  // An HTTP date names its day and month; Date.parse alone would take "-4" for a year.
  const at = /[a-z]{3}/i.test(retryAfter) ? Date.parse(retryAfter) : NaN;
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}
