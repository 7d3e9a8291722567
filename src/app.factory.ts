import { MikroORM } from '@mikro-orm/postgresql';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { SwaggerModule } from '@nestjs/swagger';
import { randomUUID } from 'node:crypto';
import type { DestinationStream } from 'pino';
import { AppModule } from './app.module';
import { installRateLimits } from './auth/rate-limits';
import type { AppConfig } from './config/app-config';
import { corsOptions } from './common/cors.options';
import { frameworkErrorOptions, installFrameworkErrorHandlers } from './common/framework-errors';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { registerJsonBodyParser } from './common/json-body.parser';
import { registerCsvBodyParser } from './transfer/csv-body.parser';
import { createOpenApiDocument } from './common/openapi.document';
import { closeUnusedConnectionsOnClose } from './common/unused-connections';
import { createValidationPipe } from './common/validation.pipe';
import { runInRequestContext } from './database/request-context';
import { mcpErrorShape } from './mcp/mcp-errors';
import { OPENAI_ERROR_SHAPE } from './openai-compat/openai-errors';
import { configureLogging, httpLogger, nestLogger, requestLogContext } from './observability/logger';
import { PrometheusService } from './observability/prometheus.service';
import { RequestLogController } from './observability/request-log.controller';

/**
 * Connections the kernel may queue for accept: a burst of clients connecting at once (thousands of
 * event streams after a deploy) must not overflow Node's default of 511, whose dropped handshakes
 * come back as resets and second-long retries. Linux caps it at net.core.somaxconn.
 */
export const LISTEN_BACKLOG = 4096;

export interface CreateAppOptions {
  /** Where log lines go instead of stdout (tests read them). */
  logDestination?: DestinationStream;
}

/** Request ids: the caller's x-request-id when it is sane, otherwise a new UUID. */
function requestId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[\w.-]{1,128}$/.test(given) ? given : randomUUID();
}

/**
 * Builds the application (not yet listening): Fastify and Nest on the one logger (a line per
 * request carrying its request id), CORS for CORS_ORIGINS, the global validation pipe and error
 * filter, and OpenAPI docs at /docs (the document itself at /docs-json).
 */
export async function createApp(
  config: AppConfig,
  databaseUrl: string,
  options: CreateAppOptions = {},
): Promise<NestFastifyApplication> {
  configureLogging({ level: config.logLevel, format: config.logFormat, destination: options.logDestination });
  // Under /v1 errors take OpenAI's shape, so that OpenAI client libraries raise their usual error classes;
  // under /mcp a body that is not JSON is JSON-RPC's parse error, and a 401 says where users sign in.
  const shapes = [OPENAI_ERROR_SHAPE, mcpErrorShape(config.oidcIssuers.length > 0)];
  const filter = new HttpExceptionFilter(shapes, config.ormAcquireTimeoutMs);
  const framework = frameworkErrorOptions(filter);
  // One registry per app: the request log hook records into it before Nest exists.
  const metrics = new PrometheusService(config.metricsToken);
  const adapter = new FastifyAdapter({
    loggerInstance: httpLogger(),
    logController: new RequestLogController({ requestIdLogLabel: 'requestId' }, metrics),
    genReqId: requestId,
    bodyLimit: 2 * 1024 * 1024,
    // What Fastify and Node answer themselves (a refused URL or header, a 503 while draining) in the error shape.
    ...framework,
    // A client has this long to send a whole request, headers and body (then 408 and the connection
    // closes), so slow senders cannot hold connections forever. Node counts only the reception of the
    // request: a response, an event stream included, may last as long as it likes. No socket idle
    // timeout (connectionTimeout): it would cut quiet event streams between keep-alive comments.
    requestTimeout: config.httpRequestTimeoutMs,
    http: {
      ...framework.http,
      requestTimeout: config.httpRequestTimeoutMs,
      headersTimeout: config.httpRequestTimeoutMs,
      // How often Node looks for overdue requests (its default, 30 s, would double a short timeout).
      connectionsCheckingInterval: Math.min(1_000, Math.ceil(config.httpRequestTimeoutMs / 4)),
    },
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, databaseUrl, metrics), adapter, {
    logger: nestLogger,
    abortOnError: false,
  });
  // Nest runs this hook first, before every other request hook, and copies its headers to the raw
  // response: preflights are answered before authentication, and errors and hijacked event streams
  // carry the CORS headers too. Unset CORS_ORIGINS: no hook, no access-control-* header anywhere.
  if (config.corsOrigins) app.enableCors(corsOptions(config.corsOrigins));
  // Security headers on every answer (helmet's defaults, resolved once, not per request). The playground
  // page sets its own, stricter, policy; Swagger UI at /docs needs inline styles, which the default policy
  // allows. With CORS_ORIGINS set, other origins may read responses, so the resource policy must not be
  // same-origin.
  app.useSecurityHeaders({ crossOriginResourcePolicy: { policy: config.corsOrigins ? 'cross-origin' : 'same-origin' } });
  registerJsonBodyParser(app);
  registerCsvBodyParser(app);
  app.useGlobalPipes(createValidationPipe());
  app.useGlobalFilters(filter);
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onRequest', (request, reply, done) => {
    // On the raw response, so that hijacked replies (event streams) carry it too.
    reply.raw.setHeader('x-request-id', request.id);
    done();
  });
  // After the hook above, so that its refusals carry the request id too.
  installFrameworkErrorHandlers(app, filter);
  // The rest of the request (guards, pipes, the handler, the error filter) runs with its request id on
  // every log line, and with an ORM context of its own, forked only if the request uses the ORM.
  const orm = app.get(MikroORM);
  fastify.addHook('preHandler', (request, reply, done) =>
    requestLogContext(request, reply, () => runInRequestContext(orm.em, done)),
  );
  // After the hooks above: a refused request still carries its request id, and is refused while draining.
  await installRateLimits(app, config);
  closeUnusedConnectionsOnClose(fastify);
  // The UI at /docs, the document at /docs-json.
  SwaggerModule.setup('docs', app, createOpenApiDocument(app));
  return app;
}
