import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { ConnectionError, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { DomainError } from './domain-error';
import type { HttpExceptionFilter } from './http-exception.filter';

/**
 * Longest path parameter (an object name, a record id, a client's chat id, ...) the router takes.
 * Above the longest id any route accepts (a client chat id, 128), so that a slightly longer one is the
 * route's own 400 naming the rule, not a 414.
 */
export const MAX_PATH_PARAM_LENGTH = 256;

/**
 * Fastify options for what Fastify and Node answer on their own, before any hook or route runs:
 * an over-long path parameter or a malformed URL (the router), a request line or header the HTTP
 * parser refuses, a missing Host header (Node), requests while the server closes. Their own
 * answers carry a `FST_ERR_*` code, no code, or no body at all; these give the one error shape.
 */
export function frameworkErrorOptions(filter: HttpExceptionFilter) {
  return {
    routerOptions: { maxParamLength: MAX_PATH_PARAM_LENGTH },
    frameworkErrors: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      // No onRequest hook runs for these, so the request id header is set here.
      reply.raw.setHeader('x-request-id', request.id);
      filter.send(routerError(error), request, reply);
    },
    clientErrorHandler: (error: ConnectionError, socket: Duplex) => {
      if (error.code === 'ECONNRESET' || socket.destroyed) return;
      answerOnSocket(filter, socket, parserError(error));
    },
    // Both answered by the hook of installFrameworkErrorHandlers instead of by Fastify and Node.
    return503OnClosing: false,
    http: { requireHostHeader: false },
  };
}

/** The parts of frameworkErrorOptions that need the built application: hooks and server events. */
export function installFrameworkErrorHandlers(app: NestFastifyApplication, filter: HttpExceptionFilter): void {
  const fastify = app.getHttpAdapter().getInstance();
  let closing = false;
  // Fastify runs preClose as soon as it starts closing, while running requests drain.
  fastify.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  fastify.addHook('onRequest', async (request, reply) => {
    if (closing) {
      void reply.header('connection', 'close');
      throw new DomainError('shutting_down', 'The server is shutting down; send the request again');
    }
    // What Node checks itself unless told not to (it would answer with an empty body).
    if (request.raw.httpVersion === '1.1' && !request.headers.host) {
      throw new DomainError('malformed_request', 'An HTTP/1.1 request needs a Host header');
    }
  });
  const server = fastify.server;
  // Without a listener Node answers an Expect other than 100-continue with an empty 417.
  server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
    const id = randomUUID();
    const { status, body } = filter.toResponse(
      new DomainError('expectation_failed', 'The only Expect this server meets is "100-continue"'),
      id,
    );
    const json = JSON.stringify(body);
    response.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(json),
      'x-request-id': id,
      connection: 'close',
    });
    response.end(json);
  });
  // Without a listener Node closes the connection of a CONNECT request without any answer.
  server.on('connect', (request: IncomingMessage, socket: Duplex) => {
    answerOnSocket(filter, socket, new DomainError('route_not_found', `Cannot CONNECT ${request.url}`));
  });
}

function routerError(error: FastifyError): unknown {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return new DomainError('uri_too_long', `A path parameter is longer than ${MAX_PATH_PARAM_LENGTH} characters`, {
      maxLength: MAX_PATH_PARAM_LENGTH,
    });
  }
  if (error.code === 'FST_ERR_BAD_URL') {
    return new DomainError('invalid_url', 'The URL path is not valid: a percent-encoded sequence is malformed');
  }
  // An async route constraint failed (none is used): a 500, logged by the filter.
  return error;
}

function parserError(error: ConnectionError): DomainError {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new DomainError('request_timeout', 'The request did not arrive completely in time');
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return new DomainError('headers_too_large', `The request line and headers are larger than ${maxHeaderSize} bytes`, {
      maxBytes: maxHeaderSize,
    });
  }
  // The parser's reason ("Invalid header value char", ...) names the problem without quoting the request.
  const reason = (error as ConnectionError & { reason?: unknown }).reason;
  return new DomainError(
    'malformed_request',
    `The request is not valid HTTP${typeof reason === 'string' && reason ? `: ${reason}` : ''}`,
  );
}

/**
 * Writes a whole response on a socket that has no Fastify request (the parser gave up, or a
 * CONNECT), then closes it: what follows on the connection cannot be trusted to start a request.
 */
function answerOnSocket(filter: HttpExceptionFilter, socket: Duplex, error: DomainError): void {
  // As Node does: a response already being written must not get a second one mixed into it.
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
  if (!socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const id = randomUUID();
  const { status, body } = filter.toResponse(error, id);
  const json = JSON.stringify(body);
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(json)}`,
    `x-request-id: ${id}`,
    'connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${json}`, () => socket.destroy());
}
