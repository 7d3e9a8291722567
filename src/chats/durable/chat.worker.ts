import { EntityManager } from '@mikro-orm/postgresql';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ACCESS_CHANGED } from '../../auth/access-changed';
import { APP_CONFIG, type AppConfig } from '../../config/app-config';
import { runInLogContext } from '../../observability/logger';
import { PrometheusService } from '../../observability/prometheus.service';
import { ChatEvents } from './chat-events.service';
import { ChatRunner } from './chat-runner.service';
import { ChatClaimsRepository } from './chat-claims.repository';
import { ChatRepository } from './chat.repository';
import { ChatService } from './chat.service';

const SHUTDOWN_GRACE_MS = 10_000;

/** The last error of a turn stopped because its key was revoked (or now acts for another subject). */
const KEY_REVOKED = {
  code: 'key_revoked',
  message: 'The API key that posted this turn was revoked (or now acts for another subject); the turn was stopped',
} as const;

/**
 * The chat worker of this replica. Claims pending chats (FOR UPDATE SKIP LOCKED), woken at once by
 * NOTIFY and by a slow poll as a safety net; runs at most `chatWorkerConcurrency` at a time;
 * heart-beats them in one statement; takes back stale chats of dead replicas; expires unanswered
 * client tool calls. On shutdown it cancels its runs and hands the chats back as pending. On every
 * access change (a key revoked on any replica) it stops the turns of revoked keys, whichever replica
 * runs them: the same idempotent statement on every replica, also on those that run no chats.
 */
@Injectable()
export class ChatWorker implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ChatWorker.name);
  readonly workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private readonly timers: NodeJS.Timeout[] = [];
  private unsubscribe?: () => void;
  private stopping = false;
  private started = false;
  /** Claims and maintenance under way: shutdown waits for them, so none starts on a closing pool. */
  private readonly background = new Set<Promise<void>>();
  private claiming = false;
  private claimAgain = false;

  constructor(
    private readonly em: EntityManager,
    private readonly repo: ChatRepository,
    private readonly claims: ChatClaimsRepository,
    private readonly events: ChatEvents,
    private readonly runner: ChatRunner,
    private readonly chats: ChatService,
    private readonly metrics: PrometheusService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Taking chats: started (with CHAT_WORKER_ENABLED) and not shutting down. What readiness checks. */
  get active(): boolean {
    return this.started && !this.stopping;
  }

  onApplicationBootstrap(): void {
    this.unsubscribe = this.events.subscribe((event) => {
      if (event.type === 'interrupt' || event.type === 'deleted') this.running.get(event.chatId)?.controller.abort();
      // After a lost LISTEN connection a revocation may have gone unheard.
      if ((event.type as string) === ACCESS_CHANGED || event.type === 'resync') void this.stopRevokedTurns();
      if (!this.config.chatWorkerEnabled) return;
      if (event.type === 'resync' || ((event.type === 'status' || event.type === 'created') && event.status === 'pending')) {
        void this.claim();
      }
    });
    if (!this.config.chatWorkerEnabled) return;
    this.started = true;
    this.every(this.config.chatPollIntervalMs, () => this.claim());
    this.every(this.config.chatHeartbeatIntervalMs, () => this.maintain());
    void this.claim();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    for (const timer of this.timers) clearInterval(timer);
    this.unsubscribe?.();
    const hadRuns = this.running.size > 0;
    for (const { controller } of this.running.values()) controller.abort();
    // Runs, claims and maintenance finish before the ORM closes its pool: a connection still being
    // acquired while the pool ends is never released, and the pool's end would wait for it forever.
    await Promise.race([
      Promise.allSettled([...[...this.running.values()].map((r) => r.done), ...this.background]),
      new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS).unref()),
    ]);
    if (!hadRuns) return;
    const released = await this.claims.release(this.em.fork(), this.workerId);
    for (const chat of released)
      await this.events.publish({ type: 'status', chatId: chat.id, owner: chat.owner, status: 'pending' });
    if (released.length) this.logger.log({ msg: 'handed chats back as pending', count: released.length });
  }

  /** Claims as many pending chats as there are free slots; re-runs if woken while claiming. */
  claim(): Promise<void> {
    return this.tracked(() => this.claimFreeSlots());
  }

  private async claimFreeSlots(): Promise<void> {
    if (this.stopping) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = true;
    try {
      do {
        this.claimAgain = false;
        const free = this.config.chatWorkerConcurrency - this.running.size;
        if (free <= 0) break;
        const chats = await this.claims.claim(this.em.fork(), this.workerId, free, [...this.running.keys()]);
        for (const chat of chats) this.start(chat);
        if (chats.length === free) this.claimAgain = true;
      } while (this.claimAgain && !this.stopping);
    } catch (error) {
      this.logger.warn({ msg: 'claiming chats failed', error: (error as Error).message });
    } finally {
      this.claiming = false;
    }
  }

  private start(chat: Parameters<ChatRunner['run']>[0]): void {
    // The claim stamped heartbeat_at with the database's now(): both ends of the lag on one clock.
    if (chat.heartbeatAt) this.metrics.observeClaimLag((chat.heartbeatAt.getTime() - chat.availableAt.getTime()) / 1000);
    const finished = this.metrics.chatRunStarted();
    const controller = new AbortController();
    const entry: { controller: AbortController; done: Promise<void> } = { controller, done: Promise.resolve() };
    // Every line of the run, down to the tools it calls, carries the chat id.
    const run = runInLogContext({ chatId: chat.id }, () => this.runner.run(chat, this.workerId, controller.signal));
    entry.done = run
      .catch((error: unknown) => this.logger.error({ msg: 'chat run crashed', chatId: chat.id, err: error }))
      .finally(() => {
        finished();
        // Only our own entry: a later run of the same chat must keep its slot and heartbeat.
        if (this.running.get(chat.id) === entry) this.running.delete(chat.id);
        // A slot is free: there may be more work waiting.
        if (!this.stopping) void this.claim();
      });
    this.running.set(chat.id, entry);
  }

  /** Ends in error the pending and running turns of revoked keys; the interrupts it publishes cancel running ones. */
  private stopRevokedTurns(): Promise<void> {
    return this.tracked(async () => {
      try {
        const stopped = await this.claims.stopTurnsOfRevokedKeys(this.em.fork(), KEY_REVOKED);
        if (stopped) this.logger.log({ msg: 'stopped the turns of revoked keys', count: stopped });
      } catch (error) {
        this.logger.warn({ msg: 'stopping the turns of revoked keys failed', error: (error as Error).message });
      }
    });
  }

  /** Heartbeat of our chats, recovery of stale ones, expiry of unanswered client tool calls. */
  private maintain(): Promise<void> {
    return this.tracked(() => this.maintainNow());
  }

  private async maintainNow(): Promise<void> {
    if (this.stopping) return;
    try {
      await this.claims.heartbeat(this.em.fork(), this.workerId, [...this.running.keys()]);
      if (this.stopping) return;
      const recovered = await this.claims.recoverStale(this.em.fork(), this.config.chatStaleAfterMs, this.config.chatMaxAttempts);
      for (const chat of recovered) {
        this.logger.warn({ msg: 'took back a chat with a stale heartbeat', chatId: chat.id, status: chat.status });
        await this.events.publish({ type: 'status', chatId: chat.id, owner: chat.owner, status: chat.status });
      }
      if (this.stopping) return;
      await this.expireActions();
    } catch (error) {
      this.logger.warn({ msg: 'chat maintenance failed', error: (error as Error).message });
    }
  }

  private async expireActions(): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      for (const chat of await this.repo.lockExpiredActions(em, 100)) {
        const message = 'No tool results arrived before the requires_action timeout';
        await this.chats.writeMissingResults(em, chat, 'tool_results_timeout', message);
        await this.repo.setStatus(em, chat.id, {
          status: 'error',
          lastError: { code: 'tool_results_timeout', message },
          resetTurn: true,
        });
        await this.events.publish(
          { type: 'error', chatId: chat.id, owner: chat.owner, code: 'tool_results_timeout', message },
          em,
        );
        await this.events.publish({ type: 'status', chatId: chat.id, owner: chat.owner, status: 'error' }, em);
      }
    });
  }

  /** Runs background work so that shutdown can wait for it; never while stopping. */
  private tracked(work: () => Promise<void>): Promise<void> {
    if (this.stopping) return Promise.resolve();
    const promise = work().finally(() => this.background.delete(promise));
    this.background.add(promise);
    return promise;
  }

  private every(ms: number, task: () => Promise<void>): void {
    const timer = setInterval(() => void task(), ms);
    timer.unref();
    this.timers.push(timer);
  }
}
