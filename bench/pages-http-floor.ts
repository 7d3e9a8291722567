/**
 * The bare HTTP floor of the grid pages bench: a plain `node:http` server in a process of its own
 * that answers each request of a case by running that case's statements through a `pg` pool of 8
 * connections and sending their rows back as JSON. No framework, no auth, no validation, no row
 * decoding: what any Node.js HTTP server pays on this machine for an HTTP round trip in front of the
 * same SQL. Forked by bench/pages-only.ts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'pg';
import type { ObjectMeta } from '../src/metadata/object-metadata.types';
import { forkForAnswer } from './harness';
import { HttpClient, type HttpRequest } from './load';
import { pageCases, type PageCase } from './pages-cases';

interface Init {
  type: 'init';
  databaseUrl: string;
  object: ObjectMeta;
  ids: string[];
  keyId: string;
  connections: number;
}

export interface HttpFloor {
  client: HttpClient;
  /** The floor server's process. */
  pid: number;
  /** The floor's twin of the app's i-th request of case `caseIndex`: same method and body, the case's statements. */
  request(caseIndex: number, i: number, appRequest: HttpRequest): HttpRequest;
  close(): Promise<void>;
}

/** Starts the floor server in a child process; it serves until close(). */
export async function startHttpFloor(init: Omit<Init, 'type'>): Promise<HttpFloor> {
  const { child, answer } = await forkForAnswer<{ port: number }>(__filename, '--serve', {
    type: 'init',
    ...init,
  } satisfies Init);
  const port = answer.port;
  const client = new HttpClient(port, {}, init.connections);
  return {
    client,
    pid: child.pid!,
    request: (caseIndex, i, appRequest) => ({
      method: appRequest.method,
      path: `/floor/${caseIndex}/${i}`,
      body: appRequest.body,
    }),
    close: async () => {
      client.close();
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function serve(init: Init): void {
  const cases: PageCase[] = pageCases(init.object, init.ids, init.keyId);
  const pool = new Pool({ connectionString: init.databaseUrl, max: init.connections });
  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    // Parsed as the app parses its bodies, then unused: the statements are the case's.
    if (chunks.length) JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const [, , caseIndex, i] = (req.url ?? '').split('/');
    const pageCase = cases[Number(caseIndex)];
    const client = await pool.connect();
    const results: unknown[][] = [];
    try {
      for (const statement of pageCase.statements(Number(i))) {
        results.push((await client.query(statement.sql, [...statement.parameters])).rows);
      }
    } finally {
      client.release();
    }
    const body = JSON.stringify({ results });
    res.writeHead(pageCase.status ?? 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const server = createServer((req, res) => {
    answer(req, res).catch((error: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    });
  });
  server.keepAliveTimeout = 72_000;
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close();
    void pool.end().then(() => process.exit(0));
  });
}

if (process.argv.includes('--serve')) {
  process.once('message', (init: Init) => {
    try {
      serve(init);
    } catch (error) {
      process.send?.({ error: String(error) });
    }
  });
}
