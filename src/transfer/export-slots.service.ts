import { Inject, Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { CAP_RETRY_AFTER_SECONDS } from '../common/limits';
import { APP_CONFIG, type AppConfig } from '../config/app-config';

/**
 * The CSV exports streaming on this replica. Each holds a data pool connection (and a snapshot) for
 * as long as its client reads, so they are capped twice: EXPORT_CONCURRENCY on the replica, which
 * keeps the rest of the pool for requests people wait on, and EXPORT_MAX_PER_KEY per API key, so one
 * key cannot take every slot. Beyond either cap, an export is refused at once (429 with Retry-After)
 * rather than queued: a queued export would hold its request open with nothing to show.
 */
@Injectable()
export class ExportSlots {
  private running = 0;
  private readonly byKey = new Map<string, number>();

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  /** Takes a slot for the caller, or throws too_many_exports; the release frees it (once, however often called). */
  admit(caller: Caller): () => void {
    const own = this.byKey.get(caller.keyId) ?? 0;
    if (own >= this.config.exportMaxPerKey) {
      throw refused(
        `This key already streams ${own} CSV export${own === 1 ? '' : 's'} on this server, the most allowed at once; wait for it to end`,
        { scope: 'key', running: own, limit: this.config.exportMaxPerKey },
      );
    }
    if (this.running >= this.config.exportConcurrency) {
      throw refused('This server already streams as many CSV exports as it may at once; try again in a moment', {
        scope: 'server',
        running: this.running,
        limit: this.config.exportConcurrency,
      });
    }
    this.running++;
    this.byKey.set(caller.keyId, own + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
      const left = (this.byKey.get(caller.keyId) ?? 1) - 1;
      if (left > 0) this.byKey.set(caller.keyId, left);
      else this.byKey.delete(caller.keyId);
    };
  }
}

function refused(message: string, details: { scope: 'key' | 'server'; running: number; limit: number }): DomainError {
  return new DomainError('too_many_exports', message, details, { retryAfterSeconds: CAP_RETRY_AFTER_SECONDS });
}
