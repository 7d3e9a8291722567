import { EntityManager, type TransactionEventArgs } from '@mikro-orm/postgresql';
import { BeforeApplicationShutdown, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { CommitAnnouncer, COMMITTED_EVENT } from '../../database/commit-announcer.service';
import { PgPubSub } from '../../database/pg-pubsub.service';
import { appendEvents, type LoggedChatEvent, newestEventId, pruneEvents, READ_BATCH, readEvents } from './chat-events.repository';
import type { ChatEvent } from './chat.types';

export type ChatEventOrResync = ChatEvent | { type: 'resync' };

/** `id`: the event's row in `chat_events` (absent for pub/sub events such as `resync`). */
type Listener = (event: ChatEventOrResync, id?: number) => void;

/**
 * An id missing below ones already read belongs to a transaction still running, or to one that rolled
 * back: it is looked for again on each read for this long, then given up.
 */
const GAP_TIMEOUT_MS = 60_000;
const PRUNE_INTERVAL_MS = 60_000;

/**
 * Chat events, as rows of `chat_events` appended by the chat writes themselves (in their statement
 * or transaction; never a NOTIFY inside them), delivered to listeners on every replica:
 *
 *  - on the replica that wrote them, right after the commit, in process (no round trip): a chat's
 *    events come in commit order since writers of one chat hold its row lock, and an event whose
 *    chat's previous event (`prev`) this replica has not delivered yet waits for a read;
 *  - on the others, read by id after the writer's announcement (CommitAnnouncer: one per replica and
 *    window), any replica's later announcement, or the poll. Ids are drawn before commit, so a reader
 *    keeps the ids missing below the newest it read (gaps) and reads them again until they show up.
 *
 * A listener of one chat is found by the chat's id, so each event costs the same however many streams
 * are open on the replica. Other pub/sub events (access changes, `resync`) reach listeners too.
 */
/** How long a stopping replica waits for a read of events in flight. */
const SHUTDOWN_READ_GRACE_MS = 5000;

@Injectable()
export class ChatEvents implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger(ChatEvents.name);
  private readonly listeners = new Set<Listener>();
  private readonly byChat = new Map<string, Set<Listener>>();
  private routing?: () => void;
  /** Every event id up to `low` was delivered here (or given up); above it, those in `delivered`. */
  private low = 0;
  private high = 0;
  private readonly delivered = new Set<number>();
  /** Ids below `high` not delivered yet, with when they were first missed. */
  private readonly gaps = new Map<number, number>();
  /** Events this replica committed that wait for a read to deliver the chat's earlier events first. */
  private readonly held: LoggedChatEvent[][] = [];
  /** Events written by open transactions, delivered on commit (keyed by the transaction). */
  private readonly uncommitted = new Map<object, LoggedChatEvent[]>();
  /** Events published outside a transaction, appended together by the next statement. */
  private queued: Array<{ event: ChatEvent; done: (error?: Error) => void }> = [];
  private appending = false;
  private reading = false;
  private readAgain = false;
  private ready = false;
  private stopped = false;
  private readonly unsubscribes: Array<() => void> = [];
  private prune?: NodeJS.Timeout;

  constructor(
    private readonly em: EntityManager,
    private readonly pubsub: PgPubSub,
    private readonly announcer: CommitAnnouncer,
  ) {}

  async onModuleInit(): Promise<void> {
    // Streams opened from now on catch up from the tables: reading starts at the newest event.
    this.low = this.high = await newestEventId(this.em.fork());
    this.ready = true;
    // Events written inside a transaction go out when it commits (a savepoint's end is not a commit).
    const topLevel = (args: TransactionEventArgs): object | undefined => {
      const transaction = args.transaction as ({ savepointName?: string } & object) | undefined;
      return transaction && !transaction.savepointName ? transaction : undefined;
    };
    this.em.getEventManager().registerSubscriber({
      afterTransactionCommit: (args) => {
        const transaction = topLevel(args);
        const events = transaction && this.uncommitted.get(transaction);
        if (!events) return;
        this.uncommitted.delete(transaction);
        this.committed(events);
      },
      afterTransactionRollback: (args) => {
        const transaction = topLevel(args);
        if (transaction) this.uncommitted.delete(transaction);
      },
    });
    this.unsubscribes.push(
      this.pubsub.subscribe((event) => {
        if (event.type !== COMMITTED_EVENT) this.emit(event as unknown as ChatEventOrResync);
      }),
      this.announcer.subscribe((signal) => {
        if (signal.source === 'local' || (signal.source === 'remote' && signal.chatEvents === undefined)) return;
        if (signal.source === 'remote' && signal.chatEvents! <= this.low) return;
        void this.read();
      }),
    );
    this.prune = setInterval(() => void this.pruneOld(), PRUNE_INTERVAL_MS);
    this.prune.unref();
  }

  /**
   * Stops reading before the ORM closes its pool, and lets a read in flight finish: a read still acquiring a
   * connection while the pool ends would never release it, and the pool's end would wait for it for ever.
   * Writing events goes on (the worker publishes the chats it hands back while it stops).
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearInterval(this.prune);
    for (const unsubscribe of this.unsubscribes) unsubscribe();
    const deadline = Date.now() + SHUTDOWN_READ_GRACE_MS;
    while (this.reading && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  /**
   * Appends an event. With `em` it is written in em's transaction and delivered once that commits;
   * without, it is written (with whatever else was published meanwhile) in a statement of its own.
   */
  async publish(event: ChatEvent, em?: EntityManager): Promise<void> {
    if (em) return this.record(em, await appendEvents(em, [event]));
    await new Promise<void>((resolve, reject) => {
      this.queued.push({ event, done: (error) => (error ? reject(error) : resolve()) });
      void this.appendQueued();
    });
  }

  /** Events a statement on `em` appended: delivered now, or when em's transaction commits. */
  record(em: EntityManager, events: LoggedChatEvent[]): void {
    if (!events.length) return;
    const transaction: object | undefined = em.getTransactionContext();
    if (!transaction) return this.committed(events);
    const pending = this.uncommitted.get(transaction);
    if (pending) pending.push(...events);
    else this.uncommitted.set(transaction, [...events]);
  }

  /** Every event of every chat. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The events of one chat, and `resync` after a lost LISTEN connection. */
  subscribeChat(chatId: string, listener: Listener): () => void {
    this.routing ??= this.subscribe((event, id) => this.route(event, id));
    let listeners = this.byChat.get(chatId);
    if (!listeners) this.byChat.set(chatId, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (!listeners.size && this.byChat.get(chatId) === listeners) this.byChat.delete(chatId);
    };
  }

  /** Appends the queued events in one statement; those queued meanwhile go with the next one. */
  private async appendQueued(): Promise<void> {
    if (this.appending || !this.queued.length) return;
    this.appending = true;
    const batch = this.queued;
    this.queued = [];
    try {
      this.committed(
        await appendEvents(
          this.em.fork(),
          batch.map((q) => q.event),
        ),
      );
      for (const q of batch) q.done();
    } catch (error) {
      for (const q of batch) q.done(error as Error);
    } finally {
      this.appending = false;
      void this.appendQueued();
    }
  }

  /** This replica committed `events` (in id order): its listeners get them now, the other replicas by announcement. */
  private committed(events: LoggedChatEvent[]): void {
    this.announcer.committed({ chatEvents: events[events.length - 1].id });
    const own = new Set(events.map((e) => e.id));
    if (events.every((e) => e.prev === null || own.has(e.prev) || this.isDelivered(e.prev))) return this.deliver(events);
    // An earlier event of the chat (another replica's) has not been read here yet: it goes first.
    this.held.push(events);
    void this.read();
  }

  /** Reads what was committed since the last read (and the ids still missing below it), then the held events. */
  private async read(): Promise<void> {
    if (!this.ready || this.stopped) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    try {
      do {
        this.readAgain = false;
        for (;;) {
          this.giveUpOldGaps();
          const rows = await readEvents(this.em.fork(), this.high, [...this.gaps.keys()]);
          this.deliver(rows);
          if (rows.length < READ_BATCH) break;
        }
        for (const events of this.held.splice(0)) this.deliver(events);
      } while (this.readAgain && !this.stopped);
    } catch (error) {
      this.logger.warn({ msg: 'reading chat events failed', error: (error as Error).message });
      // Held events are committed: they go out rather than wait for a read that may fail again.
      for (const events of this.held.splice(0)) this.deliver(events);
    } finally {
      this.reading = false;
    }
  }

  /** Emits each event not delivered yet, in the given order. */
  private deliver(events: LoggedChatEvent[]): void {
    for (const { id, event } of events) {
      if (this.isDelivered(id)) continue;
      this.markDelivered(id);
      this.emit(event, id);
    }
  }

  private isDelivered(id: number): boolean {
    return id <= this.low || this.delivered.has(id);
  }

  private markDelivered(id: number): void {
    if (id > this.high) {
      const now = Date.now();
      for (let missing = this.high + 1; missing < id; missing++) this.gaps.set(missing, now);
      this.high = id;
    } else {
      this.gaps.delete(id);
    }
    this.delivered.add(id);
    while (this.delivered.has(this.low + 1) && !this.gaps.has(this.low + 1)) this.delivered.delete(++this.low);
  }

  private giveUpOldGaps(): void {
    const before = Date.now() - GAP_TIMEOUT_MS;
    for (const [id, since] of this.gaps) {
      if (since >= before) continue;
      this.gaps.delete(id);
      this.markDelivered(id);
    }
  }

  private async pruneOld(): Promise<void> {
    await pruneEvents(this.em.fork()).catch((error: unknown) =>
      this.logger.warn({ msg: 'pruning chat events failed', error: (error as Error).message }),
    );
  }

  private emit(event: ChatEventOrResync, id?: number): void {
    for (const listener of this.listeners) {
      try {
        listener(event, id);
      } catch (error) {
        this.logger.error({ msg: 'event listener failed', err: error });
      }
    }
  }

  private route(event: ChatEventOrResync, id?: number): void {
    if (event.type === 'resync') {
      for (const listeners of [...this.byChat.values()]) for (const listener of [...listeners]) listener(event);
      return;
    }
    if (!('chatId' in event)) return;
    const listeners = this.byChat.get(event.chatId);
    if (listeners) for (const listener of [...listeners]) listener(event, id);
  }
}
