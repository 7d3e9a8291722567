import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { EntityManager } from '@mikro-orm/postgresql';
import { Client } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { DATABASE_URL } from './database.constants';
import { listen, notify } from './pg-notify';

/** One channel for the whole app; payloads carry a `type` and stay small (hints, not content). */
export const PUBSUB_CHANNEL = 'data_copilot_events';
/** Postgres caps NOTIFY payloads at 8000 bytes; stay well below. */
const MAX_PAYLOAD = 7000;

type Listener = (event: Record<string, unknown>) => void;

/** The NOTIFY payload of an event: its JSON, a too-long text piece dropped (`truncated`, listeners re-read). */
export function eventPayload(event: Record<string, unknown>): string {
  const payload = JSON.stringify(event);
  return Buffer.byteLength(payload) > MAX_PAYLOAD ? JSON.stringify({ ...event, delta: undefined, truncated: true }) : payload;
}

/**
 * Cross-replica events over Postgres LISTEN/NOTIFY: Postgres is the only coordination point.
 * Publishing inside a transaction delivers on commit, so a hint never precedes its data. Every
 * replica (this one included) receives every event through its LISTEN connection; after a lost
 * connection it reconnects and emits `{ type: 'resync' }` so listeners re-read what they may have missed.
 */
@Injectable()
export class PgPubSub implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(PgPubSub.name);
  private readonly listeners = new Set<Listener>();
  private client?: Client;
  private stopped = false;
  private reconnecting = false;

  constructor(
    @Inject(DATABASE_URL) private readonly databaseUrl: string,
    private readonly em: EntityManager,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.connect();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    const client = this.client;
    if (!client) return;
    // A LISTEN connection that stopped answering must not hold up shutdown.
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref());
    await Promise.race([client.end().catch(() => undefined), timeout]);
  }

  /**
   * Whether this replica hears every event now: false while its LISTEN connection is down (events sent
   * meanwhile are lost; a `resync` follows the reconnect). Caches that must not miss a change read through then.
   */
  get listening(): boolean {
    return this.client !== undefined;
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Sends an event; with `em` inside a transaction it goes out on commit. */
  async publish(event: Record<string, unknown>, em: EntityManager = this.em.fork()): Promise<void> {
    await notify(em, PUBSUB_CHANNEL, eventPayload(event));
  }

  /**
   * Hands `event` to this replica's listeners now, for a writer whose transaction (that published it)
   * has just committed: its own next request must not wait for the notification's round trip.
   */
  deliverLocally(event: Record<string, unknown>): void {
    this.emit(event);
  }

  /** Opens the LISTEN connection; the end handler is attached only once it works, so a failed attempt starts nothing. */
  private async connect(): Promise<void> {
    const client = new Client({ connectionString: this.databaseUrl });
    client.on('error', (error) => this.logger.warn({ msg: 'LISTEN connection error', error: error.message }));
    try {
      await client.connect();
      await listen(client, PUBSUB_CHANNEL);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    client.on('notification', (message) => {
      if (message.channel !== PUBSUB_CHANNEL || !message.payload) return;
      try {
        this.emit(JSON.parse(message.payload) as Record<string, unknown>);
      } catch {
        this.logger.warn({ msg: 'ignored a malformed notification' });
      }
    });
    client.once('end', () => {
      if (this.client === client) this.client = undefined;
      if (!this.stopped) void this.reconnect();
    });
    this.client = client;
  }

  /** One reconnect loop at a time, with capped backoff, until connected or stopped. */
  private async reconnect(): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    try {
      for (let attempt = 1; !this.stopped; attempt++) {
        await sleep(Math.min(5000, 100 * 2 ** attempt));
        if (this.stopped) return;
        try {
          await this.connect();
          this.logger.log({ msg: 'LISTEN connection restored' });
          this.emit({ type: 'resync' });
          return;
        } catch (error) {
          this.logger.warn({ msg: 'LISTEN reconnect failed', attempt, error: (error as Error).message });
        }
      }
    } finally {
      this.reconnecting = false;
    }
  }

  private emit(event: Record<string, unknown>): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.error({ msg: 'event listener failed', err: error });
      }
    }
  }
}
