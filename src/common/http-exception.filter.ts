import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  databaseBusy,
  DEADLOCK_DETECTED,
  deadlockBusy,
  DATETIME_FIELD_OVERFLOW,
  FOREIGN_KEY_VIOLATION,
  INVALID_DATETIME_FORMAT,
  INVALID_TEXT_REPRESENTATION,
  NOT_NULL_VIOLATION,
  NUMERIC_VALUE_OUT_OF_RANGE,
  QUERY_CANCELED,
  RESTRICT_VIOLATION,
  UNIQUE_VIOLATION,
  isPoolTimeout,
  sqlState,
} from './pg-errors';
import { DomainError } from './domain-error';
import { ErrorCode, statusForCode } from './error-codes';

export interface ErrorBody {
  error: string;
  code: ErrorCode;
  details?: unknown;
}

/** Postgres SQLSTATEs that reach here only if a service did not translate them; mapped, never a 500. */
const PG_ERRORS: Record<string, { code: ErrorCode; message: string }> = {
  [UNIQUE_VIOLATION]: { code: 'unique_violation', message: 'A record with this value already exists' },
  [FOREIGN_KEY_VIOLATION]: { code: 'invalid_reference', message: 'A referenced record does not exist or is still referenced' },
  [RESTRICT_VIOLATION]: { code: 'record_referenced', message: 'The record is still referenced by other records' },
  [NOT_NULL_VIOLATION]: { code: 'invalid_value', message: 'A required value is missing' },
  [INVALID_TEXT_REPRESENTATION]: { code: 'invalid_value', message: 'A value has the wrong format' },
  [INVALID_DATETIME_FORMAT]: { code: 'invalid_value', message: 'A date or time value has the wrong format' },
  [DATETIME_FIELD_OVERFLOW]: { code: 'invalid_value', message: 'A date or time value is out of range' },
  [NUMERIC_VALUE_OUT_OF_RANGE]: { code: 'invalid_value', message: 'A number is out of range' },
  [QUERY_CANCELED]: { code: 'query_timeout', message: 'The query took too long and was cancelled' },
};

/**
 * A front door whose clients expect errors in their own wire format (OpenAI's `{ error: { ... } }`):
 * every failure under `prefix` keeps its status and is written by `render` instead.
 */
export interface ErrorShape {
  /** A path prefix such as `/v1`: the path itself and everything below it. */
  prefix: string;
  render(status: number, body: ErrorBody): unknown;
  /** The `WWW-Authenticate` of a 401 under `prefix`; absent: `Bearer`. */
  challenge?(request: FastifyRequest): string;
}

/**
 * The one place where failures become HTTP: domain errors by their code, framework errors by
 * their status, anything unexpected as a 500 carrying the request id (the stack goes to the log).
 * What Fastify or Node answer before Nest sees a request goes through here too (framework-errors.ts).
 */
@Catch()
export class HttpExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpError');

  /**
   * `ormAcquireTimeoutMs`: ORM_ACQUIRE_TIMEOUT_MS. A pool timeout that reaches the filter is the ORM's
   * (the data engine answers its own), and is the same 503 database_busy as the data engine's.
   */
  constructor(
    private readonly shapes: readonly ErrorShape[] = [],
    private readonly ormAcquireTimeoutMs?: number,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    this.send(exception, http.getRequest<FastifyRequest>(), http.getResponse<FastifyReply>());
  }

  /** Answers `request` with the error body of `exception`. */
  send(thrown: unknown, request: FastifyRequest, reply: FastifyReply): void {
    // The ORM's own failures of contention (metadata writes and their DDL, jobs) answer as the data engine's do.
    const exception =
      this.ormAcquireTimeoutMs !== undefined && isPoolTimeout(thrown)
        ? databaseBusy(this.ormAcquireTimeoutMs)
        : sqlState(thrown) === DEADLOCK_DETECTED
          ? deadlockBusy()
          : thrown;
    const { status, body } = this.toResponse(exception, String(request.id));
    if (status >= 500 && exception instanceof DomainError) {
      // An expected condition (model endpoint down, not configured): one line, no stack.
      // The request id comes with the log context of the request.
      this.logger.warn({ msg: 'request failed', code: exception.code, error: exception.message });
    } else if (status >= 500) {
      this.logger.error({ msg: 'request failed', err: describe(exception) });
    }
    if (reply.sent || reply.raw.headersSent) {
      // A streaming response already started: the stream itself reports errors.
      reply.raw.end();
      return;
    }
    const retryAfter = exception instanceof DomainError ? exception.options.retryAfterSeconds : undefined;
    if (retryAfter !== undefined) void reply.header('retry-after', String(retryAfter));
    const shape = this.shapes.find((s) => underPrefix(request.url, s.prefix));
    // A 401 names the scheme it wants (RFC 9110); MCP hosts read it to know a bearer token is missing.
    if (status === 401) void reply.header('www-authenticate', shape?.challenge?.(request) ?? 'Bearer');
    void reply
      .status(status)
      .header('content-type', 'application/json; charset=utf-8')
      .send(shape ? shape.render(status, body) : body);
  }

  /** The status and body for a failure; `requestId` is quoted by a 500 only. */
  toResponse(exception: unknown, requestId: string): { status: number; body: ErrorBody } {
    if (exception instanceof DomainError) {
      const body: ErrorBody = { error: exception.message, code: exception.code };
      if (exception.details !== undefined) body.details = exception.details;
      return { status: statusForCode(exception.code), body };
    }
    if (exception instanceof HttpException && exception.cause) {
      // Fastify's own errors (malformed JSON, wrong content type, body too large) arrive wrapped.
      return this.toResponse(exception.cause, requestId);
    }
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const response = exception.getResponse();
      const message =
        typeof response === 'object' && response && 'message' in response ? String(response.message) : exception.message;
      const code =
        status === 404
          ? 'route_not_found'
          : status === 401
            ? 'unauthorized'
            : status === 403
              ? 'forbidden'
              : codeForStatus(status);
      return { status, body: { error: message, code } };
    }
    const fastifyError = exception as { statusCode?: number; code?: string; message?: string };
    if (typeof fastifyError?.statusCode === 'number' && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
      // Fastify's own errors: malformed JSON, empty JSON body, wrong content type, body too large.
      const code =
        fastifyError.statusCode === 413
          ? 'payload_too_large'
          : fastifyError.statusCode === 415
            ? 'unsupported_media_type'
            : fastifyError.code?.startsWith('FST_ERR_CTP')
              ? 'invalid_json'
              : codeForStatus(fastifyError.statusCode);
      return { status: fastifyError.statusCode, body: { error: fastifyError.message ?? 'Bad request', code } };
    }
    const state = sqlState(exception);
    const pg = state === undefined ? undefined : PG_ERRORS[state];
    if (pg) return { status: statusForCode(pg.code), body: { error: pg.message, code: pg.code } };
    return {
      status: HttpStatus.INTERNAL_SERVER_ERROR,
      body: { error: 'Internal server error', code: 'internal_error', details: { requestId } },
    };
  }
}

function underPrefix(url: string | undefined, prefix: string): boolean {
  if (!url?.startsWith(prefix)) return false;
  const next = url.charAt(prefix.length);
  return next === '' || next === '/' || next === '?';
}

function codeForStatus(status: number): ErrorCode {
  if (status === 400) return 'bad_request';
  if (status === 409) return 'conflict';
  if (status === 429) return 'rate_limited';
  return status >= 500 ? 'internal_error' : 'bad_request';
}

function describe(error: unknown): unknown {
  return error instanceof Error ? { name: error.name, message: error.message, stack: error.stack } : error;
}
