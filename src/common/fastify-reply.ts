import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { ServerResponse } from 'node:http';

/** Takes the raw response over from Fastify, for a stream written by hand. */
export function hijack(reply: FastifyReply): ServerResponse {
  reply.hijack();
  return reply.raw;
}

/** Aborts when the client disconnects before the response is done (cancels model calls and tools). */
export function abortWhenClientLeaves(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  if (reply.raw.destroyed) controller.abort();
  return controller.signal;
}

/** A handler parameter: the signal of abortWhenClientLeaves for this request (cancels its database statements). */
export const ClientSignal = createParamDecorator((_data: unknown, ctx: ExecutionContext): AbortSignal =>
  abortWhenClientLeaves(ctx.switchToHttp().getResponse<FastifyReply>()),
);
