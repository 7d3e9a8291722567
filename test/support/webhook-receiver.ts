import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/**
 * Settings of an app under test that sends webhooks to a WebhookReceiver: private targets allowed (it runs on
 * 127.0.0.1), fast retries and polls, so that a test sees a delivery or a retry within seconds.
 */
export const WEBHOOK_TEST_ENV = {
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_RETRY_DELAY_S: '1',
  WEBHOOK_RETRY_DELAY_MAX_S: '2',
  WEBHOOK_TIMEOUT_MS: '3000',
  JOB_POLL_INTERVAL_MS: '500',
  EVENTS_POLL_INTERVAL_MS: '200',
} as const;

/** One request the receiver accepted, its signature verified. */
export interface ReceivedWebhook {
  /** The path it was sent to. */
  path: string;
  id: string;
  timestamp: string;
  body: {
    type: string;
    timestamp: string;
    data: { cursor: string; op: string; id: string; record?: Record<string, unknown> } & Record<string, unknown>;
  };
}

/**
 * A webhook receiver on 127.0.0.1, as a customer would run one: every request's signature is verified
 * with the Standard Webhooks library (`Webhook.verify`) against the secrets it was told; a request that
 * fails verification is answered 401 and counted in `rejected`. `mode` makes it fail on purpose:
 * `fail` answers 500 (so do the paths in `failing`), and `stop()` closes the port (connections refused) until `start()` again.
 */
export class WebhookReceiver {
  /** Verified requests answered 2xx, in the order they arrived. */
  readonly accepted: ReceivedWebhook[] = [];
  /** Requests answered 500 on purpose (mode `fail`), verified too. */
  readonly failed: ReceivedWebhook[] = [];
  readonly rejected: string[] = [];
  /** Every verified request as it arrived, answered or not (a redelivery shows here twice). */
  readonly arrived: ReceivedWebhook[] = [];
  /** Held requests whose sender was gone (the connection closed) when they were to be answered: never answered. */
  readonly abandoned: ReceivedWebhook[] = [];
  mode: 'ok' | 'fail' = 'ok';
  /** Paths answered 500 whatever the mode. */
  readonly failing = new Set<string>();
  /** Records (`data.id` of the body) whose deliveries are answered 500 whatever the mode. */
  readonly failingRecords = new Set<string>();
  /** Paths whose requests are held unanswered until `release`; the requests held so far, by path. */
  private readonly holding = new Map<string, (() => void)[]>();
  private readonly holdOne = new Set<string>();
  private readonly secrets = new Map<string, Webhook>();
  private server?: http.Server;
  private port = 0;

  /** Listens (again, on the same port after a stop). */
  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => this.handle(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The URL of a path on this receiver; deliveries to it are verified with `secret` once `trust` is called. */
  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  trust(path: string, secret: string): void {
    this.secrets.set(path, new Webhook(secret));
  }

  /** Holds the requests to `path` unanswered (their connection open) until `release(path)`. */
  hold(path: string): void {
    this.holding.set(path, []);
  }

  /** Requests to `path` held now. */
  held(path: string): number {
    return this.holding.get(path)?.length ?? 0;
  }

  /** Holds the next request to `path` only (until `release(path)`); the ones after it are answered. */
  holdNext(path: string): void {
    this.holding.set(path, []);
    this.holdOne.add(path);
  }

  /** Answers the held requests of `path` (and stops holding new ones). */
  release(path: string): void {
    const waiting = this.holding.get(path) ?? [];
    this.holding.delete(path);
    this.holdOne.delete(path);
    for (const answer of waiting) answer();
  }

  /** Accepted deliveries to `path`. */
  to(path: string): ReceivedWebhook[] {
    return this.accepted.filter((r) => r.path === path);
  }

  private handle(req: http.IncomingMessage, body: string, res: http.ServerResponse): void {
    const path = req.url ?? '/';
    const verifier = this.secrets.get(path);
    const headers = {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    };
    let parsed: ReceivedWebhook['body'];
    try {
      if (!verifier) throw new Error(`no secret for ${path}`);
      parsed = verifier.verify(body, headers) as ReceivedWebhook['body'];
    } catch (error) {
      this.rejected.push(`${path}: ${(error as Error).message}`);
      res.writeHead(401).end('bad signature');
      return;
    }
    const received: ReceivedWebhook = { path, id: headers['webhook-id'], timestamp: headers['webhook-timestamp'], body: parsed };
    this.arrived.push(received);
    const record = (parsed as { data?: { id?: string } }).data?.id;
    if (this.mode === 'fail' || this.failing.has(path) || (record !== undefined && this.failingRecords.has(record))) {
      this.failed.push(received);
      res.writeHead(500).end('receiver failing on purpose');
      return;
    }
    let gone = false;
    res.on('close', () => (gone = !res.writableEnded));
    const answer = () => {
      if (gone || res.destroyed) {
        this.abandoned.push(received);
        return;
      }
      this.accepted.push(received);
      res.writeHead(204).end();
    };
    const held = this.holding.get(path);
    if (held && !(this.holdOne.has(path) && held.length > 0)) held.push(answer);
    else answer();
  }
}
