import { HttpStatus } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { ErrorCode, statusForCode } from '../common/error-codes';
import type { ErrorBody, ErrorShape } from '../common/http-exception.filter';

/** An error as OpenAI's API answers it, so that client libraries raise their usual error classes. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** Our codes that OpenAI clients know by OpenAI's own names; every other code is passed on as it is. */
const OPENAI_CODES: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'invalid_api_key',
  agent_not_found: 'model_not_found',
  // What OpenAI clients look for to shorten a conversation and try again.
  context_too_large: 'context_length_exceeded',
  llm_context_length: 'context_length_exceeded',
};

/** OpenAI's error types by status: the SDKs pick their error class by status, some clients read the type. */
function typeOf(status: number): string {
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  // 401 too: OpenAI answers an unknown key with invalid_request_error / invalid_api_key.
  return 'invalid_request_error';
}

/** The request parameter a failure is about, when the error names one (`details.param` or `details.option`). */
function paramOf(details: unknown): string | null {
  if (typeof details !== 'object' || details === null) return null;
  const { param, option } = details as { param?: unknown; option?: unknown };
  if (typeof param === 'string') return param;
  return typeof option === 'string' ? option : null;
}

/** The one mapping of our error bodies to OpenAI's, for the HTTP answers and for errors inside a stream alike. */
export function toOpenAiError(status: number, body: ErrorBody): OpenAiErrorBody {
  const requestId = (body.details as { requestId?: unknown } | undefined)?.requestId;
  const message =
    body.code === 'internal_error' && typeof requestId === 'string' ? `${body.error} (request ${requestId})` : body.error;
  return { error: { message, type: typeOf(status), param: paramOf(body.details), code: OPENAI_CODES[body.code] ?? body.code } };
}

/** An error thrown during a streamed turn, with its status, as the exception filter would have answered it. */
export function openAiErrorOf(error: unknown, requestId: string): OpenAiErrorBody {
  if (error instanceof DomainError) {
    return toOpenAiError(statusForCode(error.code), { error: error.message, code: error.code, details: error.details });
  }
  return toOpenAiError(HttpStatus.INTERNAL_SERVER_ERROR, {
    error: 'Internal server error',
    code: 'internal_error',
    details: { requestId },
  });
}

/** Everything under /v1 answers errors in OpenAI's shape, with the status of our code. */
export const OPENAI_ERROR_SHAPE: ErrorShape = { prefix: '/v1', render: toOpenAiError };
