/**
 * A small, bounded HTTP load generator for the benchmarks: keep-alive connections to one
 * loopback server, a fixed number of requests spread over a fixed number of concurrent
 * workers, and the latency of every request from the first byte written to the last byte read.
 */
import { Agent, request } from 'node:http';

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface HttpResponse {
  status: number;
  body: string;
}

/** How long a pooled connection may stay idle before the client closes it. */
const IDLE_SOCKET_MS = 30_000;

/** A keep-alive client for one origin (http://127.0.0.1:<port>). */
export class HttpClient {
  private readonly agent: Agent;

  constructor(
    private readonly port: number,
    private readonly defaultHeaders: Record<string, string> = {},
    maxSockets = 64,
  ) {
    // Idle sockets are closed by this side after 30 s, before the server's keep-alive timeout (Fastify's 72 s):
    // a request sent on a socket the server is closing at that moment fails with ECONNRESET.
    this.agent = new Agent({ keepAlive: true, maxSockets, timeout: IDLE_SOCKET_MS });
  }

  send(req: HttpRequest): Promise<HttpResponse> {
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    const headers: Record<string, string | number> = { ...this.defaultHeaders, ...req.headers };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(payload);
    }
    return new Promise((resolve, reject) => {
      const r = request(
        { host: '127.0.0.1', port: this.port, method: req.method, path: req.path, headers, agent: this.agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      r.on('error', reject);
      r.end(payload);
    });
  }

  /** Sends and expects `status`; returns the parsed JSON body. */
  async json<T = unknown>(req: HttpRequest, status = 200): Promise<T> {
    const res = await this.send(req);
    if (res.status !== status) {
      throw new Error(`${req.method} ${req.path}: expected ${status}, got ${res.status}: ${res.body.slice(0, 500)}`);
    }
    return (res.body ? JSON.parse(res.body) : undefined) as T;
  }

  close(): void {
    this.agent.destroy();
  }
}

export interface LoadOptions {
  client: HttpClient;
  requests: number;
  concurrency: number;
  /** The i-th request (0-based). */
  make: (i: number) => HttpRequest;
  expectStatus?: number;
  /** Optional body check; a thrown error or `false` counts the request as an error. */
  check?(res: HttpResponse, i: number): boolean | void;
}

export interface LoadResult {
  requests: number;
  concurrency: number;
  errors: number;
  /** First error messages, for the log. */
  errorSamples: string[];
  /** Latencies in ms, sorted ascending. */
  latencies: number[];
  wallMs: number;
}

/** Runs `requests` requests with `concurrency` workers; never more requests than asked. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const [result] = await runInterleaved(options.client, options.requests, options.concurrency, [options]);
  return result;
}

/** One of the routes of runInterleaved: how to make its requests and check their answers. */
export type InterleavedRoute = Pick<LoadOptions, 'make' | 'expectStatus' | 'check'>;

/**
 * Runs `requests` requests with `concurrency` workers, the i-th to `routes[i % routes.length]`, and
 * gives each route its own result: every moment of the run (and whatever else the machine does then)
 * weighs on all routes alike, so their latencies compare.
 */
export async function runInterleaved(
  client: HttpClient,
  requests: number,
  concurrency: number,
  routes: InterleavedRoute[],
): Promise<LoadResult[]> {
  const tallies = routes.map(() => ({ latencies: [] as number[], errors: 0, errorSamples: [] as string[] }));
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= requests) return;
      const route = routes[i % routes.length];
      const tally = tallies[i % routes.length];
      const fail = (message: string) => {
        tally.errors++;
        if (tally.errorSamples.length < 5) tally.errorSamples.push(message);
      };
      const req = route.make(i);
      const started = process.hrtime.bigint();
      try {
        const res = await client.send(req);
        tally.latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
        if (res.status !== (route.expectStatus ?? 200)) {
          fail(`${req.method} ${req.path} → ${res.status} ${res.body.slice(0, 300)}`);
        } else if (route.check && route.check(res, i) === false) {
          fail(`${req.method} ${req.path} → unexpected body ${res.body.slice(0, 300)}`);
        }
      } catch (error) {
        tally.latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
        fail(`${req.method} ${req.path} → ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  };
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: Math.min(concurrency, requests) }, worker));
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  return tallies.map((tally) => ({
    requests: tally.latencies.length,
    concurrency,
    errors: tally.errors,
    errorSamples: tally.errorSamples,
    latencies: tally.latencies.sort((x, y) => x - y),
    wallMs,
  }));
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** Times `work` `runs` times one after another; returns sorted durations in ms. */
export async function timeRuns(runs: number, work: () => Promise<void>): Promise<number[]> {
  const durations: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = process.hrtime.bigint();
    await work();
    durations.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return durations.sort((a, b) => a - b);
}
