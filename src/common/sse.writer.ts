import type { ServerResponse } from 'node:http';

/**
 * A Server-Sent Events response: headers, `event:`/`id:`/`data:` frames, keep-alive comments so
 * proxies keep idle streams open, and an idempotent close. Writes after the client left are dropped.
 * Frames sent in one tick go out in one socket write (a step's messages and status are several frames).
 */
export class SseWriter {
  private closed = false;
  /** Frames not written yet, written together once the current tick is done. */
  private pending = '';
  private readonly keepAlive: NodeJS.Timeout;
  private readonly closeListeners: Array<() => void> = [];

  constructor(
    private readonly raw: ServerResponse,
    options: { keepAliveMs: number; headers?: Record<string, string> },
  ) {
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...options.headers,
    });
    raw.flushHeaders();
    this.keepAlive = setInterval(() => this.write(': keep-alive\n\n'), options.keepAliveMs);
    this.keepAlive.unref();
    raw.once('close', () => this.finish());
    // The client may have left while the request was being checked: 'close' has fired already.
    if (raw.destroyed || raw.writableEnded) this.finish();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** One SSE frame. `data` is JSON-encoded unless it is already a string. */
  send(data: unknown, options: { event?: string; id?: string | number } = {}): void {
    let frame = '';
    if (options.event) frame += `event: ${options.event}\n`;
    if (options.id !== undefined) frame += `id: ${options.id}\n`;
    frame += `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
    this.write(frame);
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.closeListeners.push(listener);
  }

  close(): void {
    if (this.closed) return;
    this.flush();
    this.raw.end();
    this.finish();
  }

  private write(text: string): void {
    if (this.closed) return;
    if (!this.pending) setImmediate(() => this.flush());
    this.pending += text;
  }

  private flush(): void {
    const text = this.pending;
    this.pending = '';
    if (text && !this.raw.destroyed && !this.raw.writableEnded) this.raw.write(text);
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.pending = '';
    clearInterval(this.keepAlive);
    for (const listener of this.closeListeners.splice(0)) listener();
  }
}
