import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Closes the connections that never carried a request when the server closes. Node neither counts
 * them as idle nor times them out once closing has begun, so one of them (a spare connection an
 * HTTP client opens after an aborted request, a browser's preconnect) would hold a graceful shutdown
 * until the process is killed. Connections serving a request are left to finish it.
 */
export function closeUnusedConnectionsOnClose(fastify: FastifyInstance): void {
  const unused = new Set<Socket>();
  let closing = false;
  fastify.server.on('connection', (socket: Socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    unused.add(socket);
    socket.once('close', () => unused.delete(socket));
  });
  fastify.server.on('request', (request: IncomingMessage) => unused.delete(request.socket));
  fastify.addHook('preClose', (done) => {
    closing = true;
    for (const socket of unused) socket.destroy();
    done();
  });
}
