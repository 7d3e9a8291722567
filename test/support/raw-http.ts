import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

/** One response as read off the wire; header names lower-cased. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A TCP connection that sends bytes exactly as given: HTTP clients refuse to send a malformed
 * request line or header, or fix it up, which is what these tests need to send.
 */
export class RawConnection {
  /** Every response the server wrote (interim 1xx ones left out), once it closed the connection. */
  readonly closed: Promise<RawResponse[]>;
  private readonly socket: Socket;

  private constructor(port: number, timeoutMs: number) {
    this.socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    this.socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    this.closed = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.socket.destroy();
        reject(
          new Error(
            `the server kept the connection open for ${timeoutMs} ms; read so far:\n${Buffer.concat(chunks).toString('latin1')}`,
          ),
        );
      }, timeoutMs);
      this.socket.on('error', () => undefined);
      this.socket.on('close', () => {
        clearTimeout(timer);
        resolve(parseResponses(Buffer.concat(chunks)));
      });
    });
  }

  static open(port: number, timeoutMs = 10_000): RawConnection {
    return new RawConnection(port, timeoutMs);
  }

  write(bytes: string | Buffer): void {
    this.socket.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
  }
}

/** Sends one request (it should say `Connection: close`, or be one the server closes after) and reads its response. */
export async function sendRaw(port: number, bytes: string | Buffer): Promise<RawResponse> {
  const connection = RawConnection.open(port);
  connection.write(bytes);
  const responses = await connection.closed;
  if (responses.length !== 1) throw new Error(`expected one response, got ${responses.length}`);
  return responses[0];
}

/** Makes `server` listen on a free loopback port (supertest does so per request otherwise); returns the port. */
export async function listenOnLoopback(server: Server): Promise<number> {
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

function parseResponses(data: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  let at = 0;
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    if (headEnd < 0) throw new Error(`incomplete response head: ${data.subarray(at).toString('latin1')}`);
    const [statusLine, ...lines] = data.subarray(at, headEnd).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    at = headEnd + 4;
    let body: Buffer<ArrayBufferLike> = Buffer.alloc(0);
    if (headers['transfer-encoding'] === 'chunked') {
      const parts: Buffer[] = [];
      for (;;) {
        const sizeEnd = data.indexOf('\r\n', at);
        const size = parseInt(data.subarray(at, sizeEnd).toString('latin1'), 16);
        at = sizeEnd + 2;
        if (!size) break;
        parts.push(data.subarray(at, at + size));
        at += size + 2;
      }
      at += 2;
      body = Buffer.concat(parts);
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      body = data.subarray(at, at + length);
      at += length;
    }
    if (status >= 200) responses.push({ status, headers, body: body.toString('utf8') });
  }
  return responses;
}
