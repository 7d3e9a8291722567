import { Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { PgPubSub } from './pg-pubsub.service';
import { sqlState, UNDEFINED_COLUMN, UNDEFINED_TABLE } from '../common/pg-errors';
import { StandaloneConnection } from './standalone-connection';

/** How the read replica answered its last lag check: `lagging` above READ_MAX_LAG_MS, `down` when unreachable or no standby. */
export type ReadReplicaState = 'ok' | 'lagging' | 'down';

export interface ReadReplicaStatus {
  state: ReadReplicaState;
  /**
   * Replay lag at the last check, milliseconds: 0 when the replica had replayed everything the
   * primary had written just before; null when unknown (down, or still catching up after a start).
   */
  lagMs: number | null;
}

/** Why a read that could have gone to the read replica went to the primary instead. */
export type ReadFallbackReason = 'lagging' | 'down' | 'error';

/** Event of a key's write, for the other app replicas (see ReadReplica.wrote). */
const KEY_WROTE = 'key_wrote';

/** How the lag checks show up in pg_stat_activity, on both servers. */
const MONITOR_APPLICATION_NAME = 'data-copilot:replica-monitor';

/**
 * On the replica: the WAL position it replayed, and how old its last replayed transaction is (only
 * when none of the primary's recent positions were replayed: a replay timestamp alone would not do,
 * as on an idle primary the last replayed transaction only gets older while the replica is caught up).
 */
const REPLAY_SQL = `select pg_is_in_recovery() as standby, pg_last_wal_replay_lsn()::text as replayed,
  (extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::float8 as replay_age_ms`;

/** SQLSTATEs of a replica that stopped, or could not take the connection (class 08: connection exceptions). */
const UNREACHABLE = new Set(['57P01', '57P02', '57P03']);
/**
 * SQLSTATEs of a replica behind the primary or in conflict with its replay: a table, column or role
 * it has not replayed yet (the metadata is read on the primary), a query cancelled for a conflict
 * with recovery (40001, 57P04). The same read on the primary answers.
 */
const BEHIND = new Set([UNDEFINED_TABLE, UNDEFINED_COLUMN, '42704', '40001', '57P04']);

/** A connection to the read replica could not be opened or set up: the read runs on the primary. */
export class ReplicaUnavailable extends Error {
  constructor(cause: unknown) {
    super(`the read replica is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** How often the lag is checked: a quarter of READ_MAX_LAG_MS, between 50 ms and 1 s. */
export function lagCheckIntervalMs(maxLagMs: number): number {
  return Math.min(1_000, Math.max(50, Math.floor(maxLagMs / 4)));
}

/**
 * Where the data engine's reads go when DATABASE_READ_URL names a streaming replica of the primary,
 * and what is known of that replica.
 *
 * The lag is checked every lagCheckIntervalMs on connections of their own: the primary's WAL position
 * (kept with the time the check began), then the position the replica replayed. The lag is the age of
 * the newest check whose primary position the replica has replayed: 0 when it has this one's, and
 * whatever happens to the clocks of the two servers, the replica then holds every transaction
 * committed before that check began. A replica behind all the checks kept (READ_MAX_LAG_MS and more)
 * gets the age of its last replayed transaction. A read may go to the replica only while the last
 * check, at most three intervals old, found it at most READ_MAX_LAG_MS behind; else it falls back to
 * the primary (counted by reason) until a check finds it caught up. A replica that cannot be
 * reached, or that is no standby (promoted), is `down`.
 *
 * Read-your-writes: a key that wrote (DataPool marks it after each write and on commit) reads on the
 * primary for `stickyMs`, READ_MAX_LAG_MS plus the checks' freshness: a read routed to the replica
 * after that finds it replayed everything committed before the write. The mark goes to the other app
 * replicas through the pubsub (at most one event per key per half window, sent before the write's
 * response), so a key's next request reads its write whichever app replica serves it. Reads without
 * a key (the server's own work) and revalidations (`fresh`) always run on the primary.
 */
export class ReadReplica {
  private readonly logger = new Logger(ReadReplica.name);
  private readonly primaryCheck: StandaloneConnection;
  private readonly replicaCheck: StandaloneConnection;
  readonly intervalMs: number;
  /** A check older than this no longer vouches for the replica. */
  private readonly freshMs: number;
  /** How long a key that wrote reads on the primary. */
  readonly stickyMs: number;
  private status: ReadReplicaStatus = { state: 'down', lagMs: null };
  private checkedAt = 0;
  /** The primary's WAL position at each recent check, oldest first, back past READ_MAX_LAG_MS. */
  private readonly positions: Array<{ at: number; lsn: bigint }> = [];
  private timer?: NodeJS.Timeout;
  private checking?: Promise<void>;
  private stopped = false;
  /** Per key: until when its reads stay on the primary. */
  private readonly writers = new Map<string, number>();
  /** Per key: when this app replica last told the others of a write. */
  private readonly announced = new Map<string, number>();
  /** At start and after a lost LISTEN connection, marks of other app replicas may be missing: every read stays on the primary until then. */
  private allPrimaryUntil = 0;
  private readonly fallbackCounts: Record<ReadFallbackReason, number> = { lagging: 0, down: 0, error: 0 };

  constructor(
    primaryUrl: string,
    replicaUrl: string,
    private readonly maxLagMs: number,
    private readonly pubsub: PgPubSub,
  ) {
    this.intervalMs = lagCheckIntervalMs(maxLagMs);
    this.freshMs = 3 * this.intervalMs;
    this.stickyMs = maxLagMs + this.freshMs;
    const timeoutMs = Math.max(1_000, 2 * this.intervalMs);
    this.primaryCheck = new StandaloneConnection(primaryUrl, MONITOR_APPLICATION_NAME, timeoutMs);
    this.replicaCheck = new StandaloneConnection(replicaUrl, MONITOR_APPLICATION_NAME, timeoutMs);
    pubsub.subscribe((event) => {
      // Another app replica's mark covers writes until its next one, half a window later.
      if (event.type === KEY_WROTE && typeof event.keyId === 'string') this.mark(event.keyId, this.stickyMs * 1.5);
      if (event.type === 'resync') this.allPrimaryUntil = Date.now() + this.stickyMs * 1.5;
    });
  }

  /**
   * Checks the replica once (the app starts knowing it), then every intervalMs. Writes the other app
   * replicas announced before this one listened are unknown here: reads start on the primary, for as
   * long as such a mark would have lasted.
   */
  async start(): Promise<void> {
    this.allPrimaryUntil = Date.now() + this.stickyMs * 1.5;
    await this.check();
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.checking;
    await Promise.all([this.primaryCheck.close(), this.replicaCheck.close()]);
  }

  /** The replica's state (`down` too when the last check is too old to vouch for it). */
  current(): ReadReplicaStatus {
    return this.fresh() ? this.status : { state: 'down', lagMs: this.status.lagMs };
  }

  /** Reads that went to the primary because of the replica, by reason, since start. */
  fallbacks(): Readonly<Record<ReadFallbackReason, number>> {
    return this.fallbackCounts;
  }

  /**
   * Where a read of `key` runs: the replica when it is fresh and within READ_MAX_LAG_MS, unless the
   * read has no key, must see the latest state (`fresh`) or comes from a key that wrote lately.
   */
  route(key: string | undefined, fresh = false): 'replica' | 'primary' {
    if (key === undefined || fresh || this.wroteLately(key)) return 'primary';
    const { state } = this.current();
    if (state === 'ok') return 'replica';
    this.fallbackCounts[state]++;
    return 'primary';
  }

  /**
   * After a read on the replica failed: true when the replica, not the read, is at fault (so the same
   * read runs on the primary). An unreachable replica is `down` until a check finds it again.
   */
  failed(error: unknown, signal: AbortSignal | undefined): boolean {
    if (signal?.aborted) return false;
    const code = sqlState(error);
    const unreachable =
      error instanceof ReplicaUnavailable ||
      (code === undefined ? lostConnection(error) : UNREACHABLE.has(code) || code.startsWith('08'));
    if (!unreachable && !(code !== undefined && BEHIND.has(code))) return false;
    this.fallbackCounts.error++;
    if (unreachable && this.status.state !== 'down') {
      this.logger.warn({ msg: 'read replica unreachable: reads go to the primary', error: (error as Error).message });
      this.status = { state: 'down', lagMs: null };
    }
    return true;
  }

  /**
   * `key` wrote (or committed a write): its reads stay on the primary for stickyMs, on every app
   * replica. Resolves once the other app replicas are told (at most once per key per half window).
   */
  async wrote(key: string): Promise<void> {
    const now = Date.now();
    this.mark(key, this.stickyMs);
    if ((this.announced.get(key) ?? 0) > now - this.stickyMs / 2) return;
    this.announced.set(key, now);
    await this.pubsub.publish({ type: KEY_WROTE, keyId: key }).catch((error: unknown) => {
      this.announced.delete(key);
      this.logger.warn({ msg: 'could not tell the other app replicas of a write', error: (error as Error).message });
    });
  }

  private wroteLately(key: string): boolean {
    const now = Date.now();
    return now < this.allPrimaryUntil || (this.writers.get(key) ?? 0) > now;
  }

  private mark(key: string, forMs: number): void {
    const now = Date.now();
    // Marks expire: past a few thousand keys, the expired ones are dropped (those still running stay).
    if (this.writers.size >= 10_000) forget(this.writers, now);
    if (this.announced.size >= 10_000) forget(this.announced, now - this.stickyMs);
    this.writers.set(key, Math.max(this.writers.get(key) ?? 0, now + forMs));
  }

  private fresh(): boolean {
    return Date.now() - this.checkedAt <= this.freshMs;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.checking = this.check().finally(() => this.schedule());
    }, this.intervalMs);
    this.timer.unref();
  }

  private async check(): Promise<void> {
    // The check vouches from when it began: the primary's position is read after that.
    const startedAt = Date.now();
    let next: ReadReplicaStatus;
    let problem: string | undefined;
    try {
      const [{ lsn }] = await this.primaryCheck.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
      this.remember(startedAt, parseLsn(lsn));
      const [row] = await this.replicaCheck.query<{ standby: boolean; replayed: string | null; replay_age_ms: number | null }>(
        REPLAY_SQL,
      );
      if (!row.standby || row.replayed === null) {
        next = { state: 'down', lagMs: null };
        problem = 'DATABASE_READ_URL is not a standby (was it promoted?)';
      } else {
        const lagMs = this.lagOf(parseLsn(row.replayed), startedAt, row.replay_age_ms);
        next = { state: lagMs !== null && lagMs <= this.maxLagMs ? 'ok' : 'lagging', lagMs };
      }
    } catch (error) {
      next = { state: 'down', lagMs: null };
      problem = error instanceof Error ? error.message : String(error);
    }
    if (this.stopped) return;
    if (next.state !== this.status.state) {
      const line = { msg: `read replica ${next.state}`, lagMs: next.lagMs, maxLagMs: this.maxLagMs, error: problem };
      if (next.state === 'ok') this.logger.log(line);
      else this.logger.warn(line);
    }
    this.status = next;
    this.checkedAt = startedAt;
  }

  /** Keeps the primary's position of this check, and of older ones only what a lag up to READ_MAX_LAG_MS needs. */
  private remember(at: number, lsn: bigint): void {
    this.positions.push({ at, lsn });
    const horizon = at - this.maxLagMs - 2 * this.intervalMs;
    while (this.positions.length > 1 && this.positions[1].at <= horizon) this.positions.shift();
  }

  /**
   * The age of the newest kept check whose primary position the replica replayed (0: this check's);
   * behind them all, at least the oldest one's age, or the age of the last replayed transaction when
   * that is more; null when neither says (a replica still catching up after its start).
   */
  private lagOf(replayed: bigint, now: number, replayAgeMs: number | null): number | null {
    for (let i = this.positions.length - 1; i >= 0; i--) {
      if (this.positions[i].lsn <= replayed) return now - this.positions[i].at;
    }
    const behindAll = this.positions.length > 1 ? now - this.positions[0].at : 0;
    if (replayAgeMs === null) return behindAll > 0 ? behindAll : null;
    // A clock a little behind the primary's must not make a negative lag.
    return Math.max(behindAll, Math.round(replayAgeMs), 0);
  }
}

/** A pg_lsn's text (`16/B374D848`: two hexadecimal halves) as one number. */
export function parseLsn(text: string): bigint {
  const [high, low] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

/** A connection that broke under a statement: a socket error (ECONNRESET, EPIPE, ...) or pg's own words for it. */
function lostConnection(error: unknown): boolean {
  if (error instanceof DomainError || !(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return (typeof code === 'string' && /^E[A-Z]+$/.test(code)) || /connection|not queryable/i.test(error.message);
}

function forget(entries: Map<string, number>, before: number): void {
  for (const [key, at] of entries) if (at <= before) entries.delete(key);
}
