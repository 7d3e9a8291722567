import { setTimeout as sleep } from 'node:timers/promises';
import http from 'node:http';
import type { ChatMessageResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import type { PendingToolCall } from '../../src/chats/durable/chat.types';
import { bodyOf } from './responses';
import { onSseFrames } from './sse-frames';
import { bearer, TestApp } from './test-app';

/** Polls GET /chats/:id until `predicate` holds (or fails after `timeoutMs`). */
export async function waitForChat(
  t: TestApp,
  id: string,
  predicate: (chat: ChatResponse) => boolean,
  key = t.adminKey,
  timeoutMs = 10_000,
): Promise<ChatResponse> {
  const until = Date.now() + timeoutMs;
  let last: ChatResponse | undefined;
  while (Date.now() < until) {
    last = bodyOf<ChatResponse>(await t.http.get(`/api/v1/chats/${id}`).set(bearer(key)));
    if (predicate(last)) return last;
    await sleep(25);
  }
  throw new Error(`chat ${id} never reached the expected state; last: ${JSON.stringify(last)}`);
}

export const hasStatus =
  (...statuses: string[]) =>
  (chat: { status: string }) =>
    statuses.includes(chat.status);

/**
 * `data` of an event of the chat streams, parsed. Each event type sends its own shape (`message`: a
 * ChatMessageResponse; `status`: `{ status, lastError }`; `message_part`: `{ delta }`;
 * `action_required`: `{ pendingToolCalls }`; watch events: `{ chatId, status? }`; ...), so every
 * field is optional here and a test reads those of the event type it looks at.
 */
export interface SseData extends Partial<ChatMessageResponse> {
  status?: string;
  lastError?: { code: string; message: string } | null;
  delta?: string;
  chatId?: string;
  pendingToolCalls?: PendingToolCall[];
  [key: string]: unknown;
}

export interface SseEvent {
  event: string;
  id?: string;
  data: SseData;
}

/** A live SSE connection to the app's HTTP server that collects parsed events. */
export class SseClient {
  readonly events: SseEvent[] = [];
  /** The server ended the response (or the connection went away). */
  ended = false;
  /** The response's headers (names lower-cased). */
  headers: http.IncomingHttpHeaders = {};
  private request?: http.ClientRequest;
  private response?: http.IncomingMessage;

  static async open(baseUrl: string, path: string, key: string, headers: Record<string, string> = {}): Promise<SseClient> {
    const client = new SseClient();
    await new Promise<void>((resolve, reject) => {
      client.request = http.get(
        `${baseUrl}${path}`,
        { headers: { ...bearer(key), accept: 'text/event-stream', ...headers } },
        (res) => {
          client.response = res;
          client.headers = res.headers;
          if (res.statusCode !== 200) return reject(new Error(`SSE status ${res.statusCode}`));
          onSseFrames(res, (frame) => client.parse(frame));
          res.on('close', () => (client.ended = true));
          resolve();
        },
      );
      client.request.on('error', reject);
    });
    return client;
  }

  private parse(frame: string): void {
    let event = 'message';
    let id: string | undefined;
    const data: string[] = [];
    for (const line of frame.split('\n')) {
      if (line.startsWith(':')) continue;
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    if (!data.length) return;
    this.events.push({ event, id, data: JSON.parse(data.join('\n')) as SseData });
  }

  of(type: string): SseEvent[] {
    return this.events.filter((e) => e.event === type);
  }

  async waitFor(predicate: (events: SseEvent[]) => boolean, timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!predicate(this.events)) {
      if (Date.now() > until)
        throw new Error(
          `SSE condition not met; events: ${JSON.stringify(this.events.map((e) => [e.event, e.id, e.data?.status]))}`,
        );
      await sleep(20);
    }
  }

  /** Waits until the server ends the stream (fails after `timeoutMs`). */
  async waitForEnd(timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!this.ended) {
      if (Date.now() > until) throw new Error(`SSE stream still open after ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  close(): void {
    this.request?.destroy();
    this.response?.destroy();
  }
}

/** Base URL of a test app's server, listening on a random loopback port. */
export async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.getHttpServer().address();
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
}

/** Resolves once `condition` holds (checked every 20 ms), or fails after `timeoutMs`. */
export async function eventually(condition: () => Promise<boolean> | boolean, timeoutMs = 5_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await sleep(20);
  }
}
