import { Logger, type LoggerService } from '@nestjs/common';
import { PinoLogger, Logger as PinoNestLogger, type Params } from 'nestjs-pino';
import { pino, stdSerializers, type DestinationStream, type Logger as Pino } from 'pino';
import PinoPretty from 'pino-pretty';
import type { AppConfig } from '../config/app-config';

/**
 * The one logger of the process. Fastify, Nest (every `new Logger(context)`), MikroORM and main.ts
 * all write through this pino instance, so every line has one shape:
 * `{"level":"info","time":"<ISO>",["requestId"|"chatId":…,]"context":"…","msg":"…",…fields}`.
 *
 * Call convention: Nest's `Logger` from @nestjs/common, a stable message and data as fields,
 * `this.logger.log({ msg: 'chat run finished', status, durationMs })` (main.ts: the same object on
 * `mainLogger.info`). Lines written while serving a request get `requestId`, and lines of durable
 * chat work `chatId`, from AsyncLocalStorage (nestjs-pino's store): never pass them by hand where
 * that context exists, or the line would carry the key twice.
 */

export interface LoggingOptions {
  level: AppConfig['logLevel'];
  format: AppConfig['logFormat'];
  /** Where lines go instead of stdout (tests). */
  destination?: DestinationStream;
}

/** Sends lines to the current target: the logger lives as long as the process, its output may change. */
class Output implements DestinationStream {
  target: DestinationStream = process.stdout;

  write(line: string): void {
    this.target.write(line);
  }
}

const output = new Output();

/** Lines that did not name their context get this one, first, so every line has a `context`. */
function defaultContext(context: string) {
  return <T extends object>(fields: T): T => ('context' in fields ? fields : { context, ...fields });
}

export const rootLogger: Pino = pino(
  {
    level: 'info',
    // No pid/hostname: one process per container, and the shape stays the same everywhere.
    base: null,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }), log: defaultContext('app') },
    serializers: {
      err: stdSerializers.err,
      // Only what identifies a request: its URL and headers can carry record data and credentials.
      req: (req: { method?: string; routeOptions?: { url?: string } }) => ({ method: req.method, route: req.routeOptions?.url }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
    redact: { paths: ['authorization', '*.authorization', '*.headers.authorization'], censor: '[redacted]' },
  },
  output,
);

/** nestjs-pino over the root logger: Nest's logger service and the AsyncLocalStorage it reads. */
const nestPinoParams: Params = { pinoHttp: { logger: rootLogger, autoLogging: false, wrapSerializers: false } };
const pinoLogger = new PinoLogger(nestPinoParams);

/** Nest's logger service: what `new Logger(context)` in any class writes through. */
export const nestLogger: LoggerService = new PinoNestLogger(pinoLogger, nestPinoParams);

/**
 * main.ts's lines (configuration errors, embedded Postgres, listening, shutdown): written whatever
 * LOG_LEVEL says, as before Nest took over logging, since supervisors and scripts wait for
 * "listening on".
 */
export const mainLogger: Pino = rootLogger.child({}, { formatters: { log: defaultContext('main') } });
// Set on the child itself: a child created at the parent's level would follow the parent's changes.
mainLogger.level = 'info';

/** Fastify's logger: the root's child; Fastify's own lines (listening, 503 while closing) are `http`. */
export function httpLogger(): Pino {
  return rootLogger.child({}, { formatters: { log: defaultContext('http') } });
}

/**
 * A Fastify `preHandler` hook: the rest of the request (guards, pipes, the handler, the error
 * filter, and whatever they start) runs in a logging context carrying `requestId`. Not nestjs-pino's
 * middleware: on Fastify it runs before the body is read, and the body's events arrive in the
 * connection's async context, so POST requests would lose the request id.
 */
export function requestLogContext(request: { id: string }, _reply: unknown, done: () => void): void {
  runInLogContext({ requestId: request.id }, done);
}

/**
 * Runs `fn` in a logging context of its own whose lines all carry `fields` (e.g. `{ chatId }`),
 * across every await inside it; for work that no request carries, like a durable chat's run.
 */
export function runInLogContext<T>(fields: Record<string, unknown>, fn: () => T): T {
  return pinoLogger.runInContext(fn, { bindings: fields });
}

/**
 * Sets the level, format and destination of the process's one logger and makes it Nest's, so
 * main.ts can log before Nest starts. A later call (another app in the same process, as in tests)
 * replaces the earlier settings.
 */
export function configureLogging(options: LoggingOptions): void {
  rootLogger.level = options.level;
  const destination = options.destination ?? process.stdout;
  output.target =
    options.format === 'pretty'
      ? PinoPretty({ destination, sync: true, colorize: false, ignore: 'context', messageFormat: '[{context}] {msg}' })
      : destination;
  Logger.overrideLogger(nestLogger);
}
