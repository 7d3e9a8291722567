import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { resolveTarget, type PinnedTarget } from './webhook-target';

/** Most bytes of a receiver's response body that are read and kept. */
export const MAX_RESPONSE_BODY_BYTES = 1024;

/** What one attempt got: a status (none when no response came), the start of its body, how long it took. */
export interface AttemptResult {
  ok: boolean;
  status?: number;
  body?: string;
  durationMs: number;
  error?: string;
}

/** A keep-alive agent for the attempts to one pinned target: one connection, reused from one attempt to the next. */
export function keepAliveAgent(target: PinnedTarget): http.Agent {
  return target.url.protocol === 'https:'
    ? new https.Agent({ keepAlive: true, maxSockets: 1 })
    : new http.Agent({ keepAlive: true, maxSockets: 1 });
}

/**
 * POSTs `body` to the pinned address of `target`: the connection goes to `target.address` whatever DNS
 * says now (the Host header and TLS name stay the URL's host), redirects are not followed (a 3xx is a
 * failed attempt), and the whole attempt, connection to response, has `timeoutMs`. At most
 * MAX_RESPONSE_BODY_BYTES of the response are read. With `agent` (keepAliveAgent of the same target), on
 * its connection; else on a connection of its own. Never throws.
 */
export function postOnce(
  target: PinnedTarget,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
  agent?: http.Agent,
): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const pinned: LookupFunction = (_host, options, callback) => {
    if ((options as { all?: boolean }).all) {
      (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    } else {
      callback(null, target.address, target.family);
    }
  };
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (result: Omit<AttemptResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: elapsed() });
    };
    const transport = target.url.protocol === 'https:' ? https : http;
    const request = transport.request(
      target.url,
      {
        method: 'POST',
        lookup: pinned,
        agent: agent ?? false,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        // Read to its end, the connection goes back to the agent; cut short, it is closed.
        const done = (whole: boolean) => {
          const status = response.statusCode ?? 0;
          const text = Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BODY_BYTES).toString('utf8');
          const ok = status >= 200 && status < 300;
          finish({ ok, status, body: text, error: ok ? undefined : describeStatus(status) });
          if (!whole) response.destroy();
        };
        response.on('data', (chunk: Buffer) => {
          if (size < MAX_RESPONSE_BODY_BYTES) chunks.push(chunk);
          size += chunk.length;
          if (size >= MAX_RESPONSE_BODY_BYTES) done(false);
        });
        response.on('end', () => done(true));
        response.on('error', () => done(false));
      },
    );
    const timer = setTimeout(() => {
      finish({ ok: false, error: `No response within ${timeoutMs} ms` });
      request.destroy();
    }, timeoutMs);
    request.on('error', (error: NodeJS.ErrnoException) =>
      finish({ ok: false, error: error.code ? `${error.code}: ${error.message}` : error.message }),
    );
    request.end(body);
  });
}

function describeStatus(status: number): string {
  if (status >= 300 && status < 400) return `The receiver answered ${status} (redirects are not followed)`;
  return `The receiver answered ${status}`;
}

/**
 * Signed attempts to one webhook (Standard Webhooks: `webhook-id` the message's id, the same on every retry;
 * `webhook-timestamp`; `webhook-signature`): its target resolved and checked once (WEBHOOK_ALLOW_PRIVATE), and
 * one kept-alive connection pinned to it for the attempts that follow. Record events and schedule events alike.
 */
export class SignedSender {
  private readonly signer: Webhook;
  private target?: Promise<PinnedTarget>;
  private agent?: http.Agent;

  constructor(
    private readonly webhook: { url: string; secret: string },
    private readonly timeoutMs: number,
    private readonly allowPrivate: boolean,
  ) {
    this.signer = new Webhook(webhook.secret);
  }

  /** One attempt of `body`, signed as message `messageId`. Never throws. */
  async send(messageId: string, body: string): Promise<AttemptResult> {
    let target;
    try {
      target = await (this.target ??= resolveTarget(this.webhook.url, this.allowPrivate));
    } catch (error) {
      this.target = undefined;
      return { ok: false, durationMs: 0, error: (error as Error).message };
    }
    this.agent ??= keepAliveAgent(target);
    const now = new Date();
    const headers = {
      'webhook-id': messageId,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': this.signer.sign(messageId, now, body),
      'user-agent': 'data-copilot-webhooks',
    };
    return postOnce(target, headers, body, this.timeoutMs, this.agent);
  }

  close(): void {
    this.agent?.destroy();
  }
}
