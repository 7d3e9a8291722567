import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { PgPubSub } from './pg-pubsub.service';

/** The NOTIFY type of an announcement: a replica committed chat events and/or record changes. */
export const COMMITTED_EVENT = 'committed';

/** What was committed: chat events up to this id, record changes (of these objects; of any object without `objects`). */
export interface Committed {
  chatEvents?: number;
  changes?: boolean;
  objects?: string[];
}

/**
 * Why readers should look at the tables: this replica committed something (`local`, at once), another
 * announced its commits (`remote`), the poll came round, or the LISTEN connection was lost (`resync`).
 */
export type CommitSignal = Committed & { source: 'local' | 'remote' | 'poll' | 'resync' };

type Listener = (signal: CommitSignal) => void;

/**
 * Commits of chat events and record changes, told to the other replicas without a NOTIFY inside each
 * writing transaction: Postgres serialises every commit that sent a NOTIFY (it holds its notification
 * lock through the commit's WAL flush), so writers that each notified ran one at a time.
 *
 * Instead a writer commits, readers on this replica are told at once (`local`), and the replica
 * announces what it committed in one small NOTIFY per EVENTS_ANNOUNCE_WINDOW_MS (the newest chat
 * event id, whether record changes were written and of which objects), sent outside any transaction. Other replicas then
 * read the new rows by cursor. A replica that dies between a commit and its announcement loses
 * nothing: readers also read on every announcement of any replica and on a slow poll
 * (EVENTS_POLL_INTERVAL_MS).
 */
@Injectable()
export class CommitAnnouncer implements OnModuleInit, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(CommitAnnouncer.name);
  /** Tells this replica's announcements from the others' (each replica receives its own NOTIFYs too). */
  readonly replicaId = randomUUID();
  private readonly listeners = new Set<Listener>();
  private pending?: Committed;
  private timer?: NodeJS.Timeout;
  private poll?: NodeJS.Timeout;
  private unsubscribe?: () => void;
  private closing = false;

  constructor(
    private readonly pubsub: PgPubSub,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    this.unsubscribe = this.pubsub.subscribe((event) => {
      if (event.type === 'resync') return this.emit({ source: 'resync' });
      if (event.type !== COMMITTED_EVENT || event.replica === this.replicaId) return;
      const chatEvents = typeof event.chatEvents === 'number' ? event.chatEvents : undefined;
      const objects = Array.isArray(event.objects) ? event.objects.filter((o): o is string => typeof o === 'string') : undefined;
      this.emit({ source: 'remote', chatEvents, changes: event.changes === true, objects });
    });
    this.poll = setInterval(() => this.emit({ source: 'poll' }), this.config.eventsPollIntervalMs);
    this.poll.unref();
  }

  /** A replica shutting down announces what it has committed at once, and what it commits while it stops. */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing = true;
    // No poll wakes a reader (and its database read) while the pools close.
    clearInterval(this.poll);
    clearTimeout(this.timer);
    await this.announce();
  }

  onApplicationShutdown(): void {
    this.unsubscribe?.();
    clearInterval(this.poll);
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = undefined;
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** This replica committed `what`: its readers hear of it now, the other replicas by the next announcement. */
  committed(what: Committed): void {
    this.emit({ source: 'local', ...what });
    const pending = (this.pending ??= {});
    if (what.chatEvents !== undefined) pending.chatEvents = Math.max(pending.chatEvents ?? 0, what.chatEvents);
    if (what.changes) {
      // Objects named by every commit of the window, or none (any object) once one did not say.
      const known = !pending.changes || pending.objects !== undefined;
      pending.objects = known && what.objects ? [...new Set([...(pending.objects ?? []), ...what.objects])] : undefined;
      pending.changes = true;
    }
    if (this.closing) void this.announce();
    else if (!this.timer) {
      this.timer = setTimeout(() => void this.announce(), this.config.eventsAnnounceWindowMs);
      this.timer.unref();
    }
  }

  private async announce(): Promise<void> {
    const committed = this.pending;
    this.pending = undefined;
    this.timer = undefined;
    if (!committed) return;
    await this.pubsub
      .publish({ type: COMMITTED_EVENT, replica: this.replicaId, ...committed })
      .catch((error: unknown) => this.logger.warn({ msg: 'could not announce commits', error: (error as Error).message }));
  }

  private emit(signal: CommitSignal): void {
    for (const listener of this.listeners) {
      try {
        listener(signal);
      } catch (error) {
        this.logger.error({ msg: 'commit listener failed', err: error });
      }
    }
  }
}
