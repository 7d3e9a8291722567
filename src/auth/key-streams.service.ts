import { BeforeApplicationShutdown, Inject, Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { DomainError } from '../common/domain-error';
import { CAP_RETRY_AFTER_SECONDS } from '../common/limits';
import { SseWriter } from '../common/sse.writer';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import type { Caller } from './caller';

/** Revoked key ids remembered per replica; ids are never reused, and revocations are rare. */
const REVOKED_MAX = 10_000;

/**
 * The event streams (SSE) open on this replica, by API key. A key holds at most
 * `sseMaxStreamsPerKey` of them; a stream frees its slot when it ends. A revoked key's streams end
 * at once: ApiKeyService calls `closeKey` on every replica when the revocation arrives.
 */
@Injectable()
export class KeyStreams implements BeforeApplicationShutdown {
  private readonly byKey = new Map<string, Set<SseWriter>>();
  /** Keys revoked while their request was past authentication: such a request must not open a stream. */
  private readonly revoked = new Set<string>();

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  /**
   * Opens an event stream for the caller on the raw response that `open` hands over. The checks come
   * first, so a refused stream is still a normal JSON error: 401 for a key revoked meanwhile, 429
   * with Retry-After when the key already holds its cap.
   */
  open(caller: Caller, open: () => ServerResponse, options: { headers?: Record<string, string> } = {}): SseWriter {
    const streams = this.admit(caller);
    const writer = new SseWriter(open(), { keepAliveMs: this.config.sseKeepAliveMs, headers: options.headers });
    streams.add(writer);
    this.byKey.set(caller.keyId, streams);
    writer.onClose(() => {
      streams.delete(writer);
      if (!streams.size && this.byKey.get(caller.keyId) === streams) this.byKey.delete(caller.keyId);
    });
    return writer;
  }

  /**
   * The checks of `open` alone, for a route that must know before it changes anything that its
   * stream will open (a refusal after the change would leave the client without its answer).
   */
  check(caller: Caller): void {
    this.admit(caller);
  }

  private admit(caller: Caller): Set<SseWriter> {
    if (this.revoked.has(caller.keyId)) throw new DomainError('unauthorized', 'Unknown or revoked API key');
    const streams = this.byKey.get(caller.keyId) ?? new Set<SseWriter>();
    const limit = this.config.sseMaxStreamsPerKey;
    if (streams.size >= limit) {
      throw new DomainError(
        'too_many_streams',
        `This key has ${streams.size} event streams open on this server, the most allowed at once; close one first`,
        { open: streams.size, limit },
        { retryAfterSeconds: CAP_RETRY_AFTER_SECONDS },
      );
    }
    return streams;
  }

  /** The key was revoked: its streams end now and it opens no more. */
  closeKey(keyId: string): void {
    if (this.revoked.size >= REVOKED_MAX) this.revoked.clear();
    this.revoked.add(keyId);
    for (const writer of [...(this.byKey.get(keyId) ?? [])]) writer.close();
  }

  /** Keys with a stream open here. */
  keyIds(): string[] {
    return [...this.byKey.keys()];
  }

  /** Open streams would keep the HTTP server from closing. */
  beforeApplicationShutdown(): void {
    for (const streams of [...this.byKey.values()]) for (const writer of [...streams]) writer.close();
  }
}
