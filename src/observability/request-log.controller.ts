import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import type { PrometheusService } from './prometheus.service';

/**
 * Fastify's request logging, reshaped: one line when a request completes, with the route pattern
 * and the names of the query parameters. Never the URL: its query string can hold record data
 * (`?where=`) or a credential (`?token=`). The same moment counts the request in the metrics, by
 * route pattern too, so that no URL can become a label.
 */
export class RequestLogController extends LogController {
  constructor(
    options: ConstructorParameters<typeof LogController>[0],
    private readonly metrics?: PrometheusService,
  ) {
    super(options);
  }

  override incomingRequest(): void {}

  /** The completion line reports the 404; Fastify's own line would quote the URL. */
  override routeNotFound(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const route = request.routeOptions.url;
    this.metrics?.observeHttpRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    const fields = {
      context: 'http',
      msg: 'request completed',
      method: request.method,
      route: route ?? null,
      query: queryNames(request.query),
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime),
    };
    if (error) reply.log.error({ ...fields, err: error });
    else if (reply.statusCode >= 500) reply.log.warn(fields);
    else reply.log.info(fields);
  }
}

function queryNames(query: unknown): string[] {
  return typeof query === 'object' && query !== null ? Object.keys(query) : [];
}
