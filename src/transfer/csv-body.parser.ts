import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { DomainError } from '../common/domain-error';

/**
 * A text/csv body is not read by Fastify: the request stream itself becomes the body, for the
 * import to parse as it arrives (a CSV file may be far larger than any JSON body, IMPORT_MAX_BYTES;
 * the import counts the bytes itself).
 */
export function registerCsvBodyParser(app: NestFastifyApplication): void {
  app
    .getHttpAdapter()
    .getInstance()
    .addContentTypeParser(
      'text/csv',
      (_request: FastifyRequest, payload: Readable, done: (error: null, body: Readable) => void) => done(null, payload),
    );
}

/** The request's text/csv body stream; 415 for any other body. */
export const CsvBody = createParamDecorator((_data: unknown, ctx: ExecutionContext): Readable => {
  const request = ctx.switchToHttp().getRequest<FastifyRequest>();
  const type = String(request.headers['content-type'] ?? '');
  if (!(request.body instanceof Readable) || !/^text\/csv\s*(;|$)/i.test(type)) {
    throw new DomainError('unsupported_media_type', 'Send the CSV file as the body, with Content-Type: text/csv');
  }
  return request.body;
});

/** The request's Content-Length, when sent. */
export const ContentLength = createParamDecorator((_data: unknown, ctx: ExecutionContext): number | undefined => {
  const raw = ctx.switchToHttp().getRequest<FastifyRequest>().headers['content-length'];
  const length = raw === undefined ? NaN : Number(raw);
  return Number.isSafeInteger(length) ? length : undefined;
});
