import { ConsoleLogger, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { randomUUID } from 'node:crypto';
import { AppModule } from './app.module';
import type { AppConfig } from './config/app-config';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { registerJsonBodyParser } from './common/json-body.parser';
import { createValidationPipe } from './common/validation.pipe';

const NEST_LEVELS: Record<AppConfig['logLevel'], LogLevel[]> = {
  debug: ['debug', 'verbose', 'log', 'warn', 'error', 'fatal'],
  info: ['log', 'warn', 'error', 'fatal'],
  warn: ['warn', 'error', 'fatal'],
  error: ['error', 'fatal'],
  silent: [],
};

/** Request ids: the caller's x-request-id when it is sane, otherwise a new UUID. */
function requestId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[\w.-]{1,128}$/.test(given) ? given : randomUUID();
}

/**
 * Builds the application (not yet listening): Fastify with JSON request logs carrying a request
 * id, the global validation pipe and error filter, and OpenAPI docs at /docs.
 */
export async function createApp(config: AppConfig, databaseUrl: string): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    logger: config.logLevel === 'silent' ? false : { level: config.logLevel },
    genReqId: requestId,
    bodyLimit: 2 * 1024 * 1024,
    // While draining on shutdown, new requests get a 503 instead of hanging.
    return503OnClosing: true,
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, databaseUrl), adapter, {
    logger: new ConsoleLogger({ json: true, logLevels: NEST_LEVELS[config.logLevel] }),
    abortOnError: false,
  });
  registerJsonBodyParser(app);
  app.useGlobalPipes(createValidationPipe());
  app.useGlobalFilters(new HttpExceptionFilter());
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Data copilot')
      .setDescription('Metadata-defined objects, records, and LLM agents over them. Every /api route needs a Bearer API key.')
      .setVersion('1')
      .addBearerAuth()
      .build(),
  );
  SwaggerModule.setup('docs', app, document);
  return app;
}
