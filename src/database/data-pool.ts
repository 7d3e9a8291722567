import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { CompiledQuery } from 'kysely';
import { Pool, PoolClient, TypeOverrides, types } from 'pg';
import { DomainError } from '../common/domain-error';
import { keyShareOf, Semaphore } from '../common/semaphore';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { CommitAnnouncer } from './commit-announcer.service';
import { DATA_READER_ROLE, DATABASE_URL } from './database.constants';
import { backendKeyOf, cancelBackend } from './pg-cancel';
import { DEADLOCK_DETECTED, deadlockBusy, isPoolTimeout, QUERY_CANCELED, sqlState } from '../common/pg-errors';
import { PgPubSub } from './pg-pubsub.service';
import { ReadReplica, ReadReplicaStatus, ReplicaUnavailable, type ReadFallbackReason } from './read-replica';

/**
 * How the data engine's connections show up in pg_stat_activity: `data` and `reader` (the data tools'
 * SELECT-only connections), `system` (the server's own background lookups), with `-replica` on the read replica.
 */
export const DATA_POOL_APPLICATION_NAMES = {
  primary: { data: 'data-copilot:data', readers: 'data-copilot:reader', system: 'data-copilot:system' },
  replica: { data: 'data-copilot:data-replica', readers: 'data-copilot:reader-replica', system: 'data-copilot:system-replica' },
} as const;

/**
 * Run once on each new reader connection: the SELECT-only role and read-only transactions for the
 * connection's life, so that each statement of a tool call is one round trip (no begin, set role,
 * commit around it). A connection is never handed to anything but the data tools.
 */
const READER_SETUP = `set role "${DATA_READER_ROLE}"; set session characteristics as transaction read only`;

/** Where the data engine's statements run: a connection per statement, or one transaction. */
export interface DataSession {
  /** Runs one statement with its bound parameters; its rows. */
  query<T>(query: CompiledQuery<T>): Promise<T[]>;
  /** True inside DataPool.transaction: one failed statement there fails the whole transaction. */
  readonly inTransaction: boolean;
}

/** Who a data call is for, and until when. */
export interface DataCallOptions {
  /** Cancels the running statement when it aborts; a call still waiting for a connection leaves the queue at once. */
  signal?: AbortSignal;
  /**
   * The API key the call runs for: one key holds at most DATA_POOL_KEY_SHARE of a pool's connections
   * at once. None: the server's own work (seed, change-feed pruning), bound by the pool's size only.
   */
  key?: string;
}

export interface DataReadOptions extends DataCallOptions {
  /**
   * Background work (a durable chat's tool call): it first waits for one of CHAT_TOOL_CONCURRENCY
   * slots, so that a burst of chats never holds more than that share of the pool (and one key's chats
   * at most DATA_POOL_KEY_SHARE of those slots).
   */
  background?: boolean;
}

/** `signal` cancels the running statement, and so the transaction. */
export interface DataTransactionOptions extends DataCallOptions {
  /**
   * The objects whose change feeds the transaction may append to, for the feeds' readers (see `wrote`);
   * `[]` for the server's own bookkeeping, which writes no record; any object when absent.
   */
  changes?: readonly string[];
}

/** `signal` cancels the running FETCH, and so the read. */
export interface DataCursorOptions extends DataCallOptions {
  /** Rows of the next FETCH, asked before each one (so a reader can size batches by what it saw); 1..MAX_CURSOR_BATCH_ROWS. */
  batchRows: () => number;
  /**
   * The server ends the session (and so the transaction) when it waits this long for the next FETCH:
   * a backstop for a reader that stopped without closing the cursor.
   */
  idleTimeoutMs: number;
}

/** The most rows one FETCH of DataPool.cursor reads. */
export const MAX_CURSOR_BATCH_ROWS = 10_000;

/** The cursor of DataPool.cursor: one per connection at a time. */
const CURSOR_NAME = '"data_rows"';

/** Set when a cancel request may still reach the connection: it must not serve anyone else. */
interface Lease {
  cancelled: boolean;
}

/** A checked-out connection; `release` returns it to its pool (closes it when cancelled) and frees its slot. */
interface Checkout {
  client: PoolClient;
  lease: Lease;
  release: () => void;
}

/** A pg pool with the gate its callers pass first: its size in all, and a share of it per API key. */
interface GatedPool {
  pool: Pool;
  gate: Semaphore;
}

/**
 * The data engine's pools: requests' (`data`), the data tools' (reader role) and the server's own background
 * lookups (`system`: webhook cursors), apart so that they neither wait behind requests nor pass for them in
 * pg_stat_activity.
 */
export type DataPoolKind = 'data' | 'readers' | 'system';

/** One database server's pools: the primary's, or the read replica's (DATABASE_READ_URL). */
interface Server {
  name: 'primary' | 'replica';
  data: GatedPool;
  readers: GatedPool;
  system: GatedPool;
}

/**
 * The connections of the data engine (records API, aggregates, data tools, sample data), in a pool of
 * their own: slow user queries can take all of these but never the ORM's connections that API keys,
 * metadata and chats run on (nor /health, which has its own).
 *
 * Every statement here is bounded three ways:
 *  - `statement_timeout` (QUERY_TIMEOUT_MS) is a startup parameter of each connection, so it costs no
 *    round trip; a statement past it fails with `query_timeout`;
 *  - a caller's AbortSignal (the HTTP client left, a tool call timed out or was interrupted) sends the
 *    server a cancel request for the running statement, and the connection is then closed instead of
 *    returned to the pool, so that a late cancel can never hit the next user's statement;
 *  - waiting for a connection ends after DB_ACQUIRE_TIMEOUT_MS with `database_busy` (503, Retry-After).
 *
 * One API key holds at most DATA_POOL_KEY_SHARE of each pool's connections at once (at least one):
 * its excess calls wait for one of its own (and get their own `database_busy`), so one member's slow
 * or abandoned searches never keep another member's calls waiting. Every checkout passes one gate per
 * pool (`acquire`), which admits at most the pool's size, so pg's own pool never queues anyone.
 *
 * The data tools have connections of their own (the reader pool, DATA_POOL_SIZE more), set up once
 * as a SELECT-only role with read-only transactions, so their statements need no transaction around
 * them and never queue behind REST calls. Background statements (durable chats' tool calls, which
 * thousands of chats may want at once) hold at most CHAT_TOOL_CONCURRENCY of them: they queue for a
 * slot first (as long as their signal lets them: the tool's timeout), so the rest stays free for the
 * tool calls a user waits on (stateless chats, MCP).
 *
 * With DATABASE_READ_URL, the read replica has the same two pools (same sizes, same key shares, the
 * reader role set up alike: a hot standby allows SET ROLE, and is read-only anyway). Reads
 * (`readSession`, `readerSession`, `cursor`) go there when ReadReplica.route says so, and run again on
 * the primary when the replica, not the read, fails them (ReadReplica.failed); writes and
 * transactions (`session`, `transaction`) always run on the primary.
 */
@Injectable()
export class DataPool implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(DataPool.name);
  private readonly primary: Server;
  /** The read replica's pools and what is known of it; undefined without DATABASE_READ_URL. */
  private readonly replica?: Server & { watch: ReadReplica };
  /** Reader connections whose session is set up (READER_SETUP). */
  private readonly readersSetUp = new WeakSet<PoolClient>();
  private readonly background: Semaphore;

  constructor(
    @Inject(DATABASE_URL) databaseUrl: string,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    pubsub: PgPubSub,
    private readonly announcer: CommitAnnouncer,
  ) {
    const share = config.dataPoolKeyShare;
    this.background = new Semaphore(config.chatToolConcurrency, keyShareOf(config.chatToolConcurrency, share));
    const open = (connectionString: string, applicationName: string): GatedPool => {
      const pool = new Pool({
        connectionString,
        max: config.dataPoolSize,
        connectionTimeoutMillis: config.dbAcquireTimeoutMs,
        statement_timeout: config.queryTimeoutMs,
        application_name: applicationName,
        types: rawTemporalTypes(),
      });
      // A connection the server drops must not crash the process: pg reports it as an 'error' event,
      // on the pool for idle clients and on the client itself while it is checked out.
      pool.on('error', (error) => this.logger.warn({ msg: 'idle data connection failed', error: error.message }));
      pool.on('connect', (client) => {
        client.on('error', (error) => this.logger.warn({ msg: 'data connection failed', error: error.message }));
      });
      return { pool, gate: new Semaphore(config.dataPoolSize, keyShareOf(config.dataPoolSize, share)) };
    };
    const server = (name: Server['name'], url: string): Server => ({
      name,
      data: open(url, DATA_POOL_APPLICATION_NAMES[name].data),
      readers: open(url, DATA_POOL_APPLICATION_NAMES[name].readers),
      system: open(url, DATA_POOL_APPLICATION_NAMES[name].system),
    });
    this.primary = server('primary', databaseUrl);
    const readUrl = config.databaseReadUrl;
    if (readUrl) {
      this.replica = { ...server('replica', readUrl), watch: new ReadReplica(databaseUrl, readUrl, config.readMaxLagMs, pubsub) };
    }
  }

  /** Starts watching the read replica; the app starts knowing whether it can read there. */
  async onModuleInit(): Promise<void> {
    await this.replica?.watch.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.replica?.watch.stop();
    const servers = this.replica ? [this.primary, this.replica] : [this.primary];
    await Promise.all(servers.flatMap((server) => [server.data.pool.end(), server.readers.pool.end(), server.system.pool.end()]));
  }

  /**
   * Connections open and idle, and callers waiting for one (their key's share or the pool's size):
   * what the pool gauge shows. Undefined for the replica's pools without DATABASE_READ_URL.
   */
  stats(kind: DataPoolKind, on: Server['name'] = 'primary'): { total: number; idle: number; waiting: number } | undefined {
    const server = on === 'primary' ? this.primary : this.replica;
    if (!server) return undefined;
    const { pool, gate } = server[kind];
    return { total: pool.totalCount, idle: pool.idleCount, waiting: gate.waiting + pool.waitingCount };
  }

  /** The read replica's state, and the reads that fell back to the primary by reason; undefined without one. */
  readReplica(): { status: ReadReplicaStatus; fallbacks: Readonly<Record<ReadFallbackReason, number>> } | undefined {
    const watch = this.replica?.watch;
    return watch && { status: watch.current(), fallbacks: watch.fallbacks() };
  }

  /**
   * `key` wrote through the data engine (its statement or transaction committed): its reads stay on
   * the primary until the read replica surely has the write (read-your-writes, see ReadReplica), and
   * the change feed's readers, here and on the other replicas, look for the changes it appended: in the
   * feeds of `objects` (none: `[]`), of any object when absent.
   */
  async wrote(key: string | undefined, objects?: readonly string[]): Promise<void> {
    if (!objects) this.announcer.committed({ changes: true });
    else if (objects.length) this.announcer.committed({ changes: true, objects: [...objects] });
    if (key !== undefined) await this.replica?.watch.wrote(key);
  }

  /**
   * Runs each statement on a pooled connection of its own (autocommit) on the primary, cancelled when
   * `signal` aborts: for writes, and for reads that must see the latest committed state.
   */
  session(options: DataCallOptions = {}): DataSession {
    const { signal } = options;
    return {
      inTransaction: false,
      query: <T>(query: CompiledQuery<T>) =>
        this.withClient(this.primary, 'data', options, (client, lease) => this.execute(client, query, signal, lease)),
    };
  }

  /** Like session, on the primary's `system` connections: the server's own frequent lookups, not a request's. */
  systemSession(): DataSession {
    return {
      inTransaction: false,
      query: <T>(query: CompiledQuery<T>) =>
        this.withClient(this.primary, 'system', {}, (client, lease) => this.execute(client, query, undefined, lease)),
    };
  }

  /** Like session, for statements that only read: on the read replica when it may serve them. */
  readSession(options: DataCallOptions = {}): DataSession {
    const { signal } = options;
    return {
      inTransaction: false,
      query: <T>(query: CompiledQuery<T>) =>
        this.read('data', options, (client, lease) => this.execute(client, query, signal, lease)),
    };
  }

  /**
   * Like readSession, on the data tools' connections: each statement runs alone (autocommit) as the
   * SELECT-only role DATA_READER_ROLE in a READ ONLY transaction, set once per connection, so a
   * statement that tries to write is refused by the database twice over. Background statements
   * (durable chats' tool calls) each take one of CHAT_TOOL_CONCURRENCY slots first.
   */
  readerSession(options: DataReadOptions = {}): DataSession {
    const { signal, key } = options;
    const run = <T>(query: CompiledQuery<T>) =>
      this.read('readers', options, (client, lease) => this.execute(client, query, signal, lease));
    return {
      inTransaction: false,
      query: <T>(query: CompiledQuery<T>) =>
        options.background ? this.background.run(signal, cancelled, () => run(query), { key }) : run(query),
    };
  }

  /**
   * Runs `work` in one transaction on one connection of the primary: committed when it returns, rolled
   * back when it throws. A committed transaction counts as a write of `options.key` (see `wrote`).
   */
  async transaction<T>(work: (session: DataSession) => Promise<T>, options: DataTransactionOptions = {}): Promise<T> {
    const { signal } = options;
    const result = await this.withClient(this.primary, 'data', options, async (client, lease) => {
      await this.execute(client, CompiledQuery.raw('begin'), signal, lease);
      try {
        const result = await work({
          inTransaction: true,
          query: <R>(query: CompiledQuery<R>) => this.execute(client, query, signal, lease),
        });
        await this.execute(client, CompiledQuery.raw('commit'), signal, lease);
        return result;
      } catch (error) {
        await this.rollback(client, lease);
        throw error;
      }
    });
    await this.wrote(options.key, options.changes);
    return result;
  }

  /**
   * The rows of `query` as arrays of column values, read through a server-side cursor in one READ
   * ONLY transaction on one connection (of the read replica when it may serve the read): a batch of
   * `batchRows()` rows per FETCH, each FETCH a statement of its own (so QUERY_TIMEOUT_MS bounds each
   * batch, not the whole read). The next batch is fetched while the reader handles this one. The
   * connection is held until the rows run out or the reader stops (`return()`, e.g. a `break` out of
   * `for await`): the transaction then ends and the connection goes back to the pool; a FETCH
   * cancelled by `signal` closes it instead. A read the replica fails before its first batch runs on
   * the primary; one it fails later fails (its rows were partly read).
   */
  async *cursor(query: CompiledQuery<unknown[]>, options: DataCursorOptions): AsyncGenerator<unknown[][], void, undefined> {
    const replica = this.replica;
    if (replica && replica.watch.route(options.key) === 'replica') {
      const batches = this.cursorOn(replica, query, options);
      let first: IteratorResult<unknown[][], void> | undefined;
      try {
        first = await batches.next();
      } catch (error) {
        if (!replica.watch.failed(error, options.signal)) throw error;
      }
      if (first) {
        try {
          if (!first.done) {
            yield first.value;
            yield* batches;
          }
        } finally {
          // The reader stopped while holding the first batch: end the read of the rest too.
          await batches.return(undefined);
        }
        return;
      }
    }
    yield* this.cursorOn(this.primary, query, options);
  }

  private async *cursorOn(
    server: Server,
    query: CompiledQuery<unknown[]>,
    options: DataCursorOptions,
  ): AsyncGenerator<unknown[][], void, undefined> {
    const { signal } = options;
    const { client, lease, release } = await this.acquire(server, 'data', options);
    let open = false;
    try {
      await this.execute(client, CompiledQuery.raw('begin transaction read only'), signal, lease);
      open = true;
      await this.execute(
        client,
        CompiledQuery.raw(`select set_config('idle_in_transaction_session_timeout', $1, true)`, [String(options.idleTimeoutMs)]),
        signal,
        lease,
      );
      await this.execute(
        client,
        CompiledQuery.raw(`declare ${CURSOR_NAME} no scroll cursor for ${query.sql}`, [...query.parameters]),
        signal,
        lease,
      );
      const fetch = (): { rows: number; read: Promise<unknown[][]> } => {
        const rows = Math.min(Math.max(1, Math.floor(options.batchRows())), MAX_CURSOR_BATCH_ROWS);
        const read = this.execute<unknown[]>(
          client,
          CompiledQuery.raw(`fetch forward ${rows} from ${CURSOR_NAME}`),
          signal,
          lease,
          'array',
        );
        // Awaited below, or abandoned when the reader stops; its failure must not go unhandled meanwhile.
        read.catch(() => undefined);
        return { rows, read };
      };
      let next = fetch();
      for (;;) {
        const batch = await next.read;
        const last = batch.length < next.rows;
        if (!last) next = fetch();
        if (batch.length) yield batch;
        if (last) break;
      }
      await this.execute(client, CompiledQuery.raw('commit'), signal, lease);
      open = false;
    } catch (error) {
      throw this.translate(error, signal);
    } finally {
      // The reader stopped early, or a statement failed.
      if (open) await this.rollback(client, lease);
      release();
    }
  }

  /**
   * Ends the open transaction of `client`. A cancelled connection is closed on release instead, which
   * rolls back on the server anyway; one that cannot roll back is not pooled again either.
   */
  private async rollback(client: PoolClient, lease: Lease): Promise<void> {
    if (lease.cancelled) return;
    await client.query('rollback').catch(() => {
      lease.cancelled = true;
    });
  }

  private async withClient<T>(
    server: Server,
    kind: DataPoolKind,
    options: DataCallOptions,
    work: (client: PoolClient, lease: Lease) => Promise<T>,
  ): Promise<T> {
    const { signal } = options;
    const { client, lease, release } = await this.acquire(server, kind, options);
    try {
      if (signal?.aborted) throw cancelled();
      return await work(client, lease);
    } catch (error) {
      throw this.translate(error, signal);
    } finally {
      release();
    }
  }

  /** Runs a read on the read replica when it may serve it, else (or when the replica fails it) on the primary. */
  private async read<T>(
    kind: DataPoolKind,
    options: DataCallOptions,
    work: (client: PoolClient, lease: Lease) => Promise<T>,
  ): Promise<T> {
    const replica = this.replica;
    if (replica && replica.watch.route(options.key) === 'replica') {
      try {
        return await this.withClient(replica, kind, options, work);
      } catch (error) {
        if (!replica.watch.failed(error, options.signal)) throw error;
      }
    }
    return this.withClient(this.primary, kind, options, work);
  }

  /**
   * The one way to a connection: a slot of the pool's gate first (within the pool's size and the key's
   * share, waiting at most DB_ACQUIRE_TIMEOUT_MS, leaving at once when `signal` aborts), then a
   * connection of the pg pool, which the gate keeps from ever having to queue; a reader connection is
   * set up (READER_SETUP) on its first use. On the read replica, a connection that cannot be opened or
   * set up is ReplicaUnavailable (the read then runs on the primary).
   */
  private async acquire(server: Server, kind: DataPoolKind, { signal, key }: DataCallOptions): Promise<Checkout> {
    const { pool, gate } = server[kind];
    const waitedMs = this.config.dbAcquireTimeoutMs;
    const busy = () =>
      new DomainError(
        'database_busy',
        `No database connection came free for ${waitedMs} ms (one API key holds at most ${gate.perKey} of ${gate.size} at once); ` +
          'try again in a moment',
        { waitedMs },
        { retryAfterSeconds: Math.max(1, Math.ceil(waitedMs / 1000)) },
      );
    const free = await gate.acquire(signal, cancelled, { key, timeoutMs: waitedMs, onTimeout: busy });
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      free();
      if (server.name === 'replica') throw new ReplicaUnavailable(error);
      if (isPoolTimeout(error)) throw busy();
      this.logger.warn({ msg: 'no data connection', error: error instanceof Error ? error.message : String(error) });
      throw new DomainError('database_unavailable', 'The database is not reachable');
    }
    const lease: Lease = { cancelled: false };
    const release = () => {
      // release(true) closes the connection instead of pooling it.
      client.release(lease.cancelled);
      free();
    };
    if (kind === 'readers' && !this.readersSetUp.has(client)) {
      try {
        await this.execute(client, CompiledQuery.raw(READER_SETUP), signal, lease);
      } catch (error) {
        lease.cancelled = true;
        release();
        throw server.name === 'replica' && !signal?.aborted ? new ReplicaUnavailable(error) : this.translate(error, signal);
      }
      this.readersSetUp.add(client);
    }
    return { client, lease, release };
  }

  /** Runs one statement; if `signal` aborts meanwhile, asks the server to cancel it. */
  private async execute<T>(
    client: PoolClient,
    query: CompiledQuery<T>,
    signal: AbortSignal | undefined,
    lease: Lease,
    rowMode?: 'array',
  ): Promise<T[]> {
    if (signal?.aborted) throw cancelled();
    const onAbort = () => {
      lease.cancelled = true;
      const key = backendKeyOf(client);
      // Without a key, the closed connection and statement_timeout still end the statement.
      if (!key) return;
      cancelBackend(key).catch((error: unknown) =>
        this.logger.warn({ msg: 'cancel request failed', error: error instanceof Error ? error.message : String(error) }),
      );
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const values = [...query.parameters];
      const result =
        rowMode === 'array'
          ? await client.query({ text: query.sql, values, rowMode })
          : await client.query<Record<string, unknown>>(query.sql, values);
      return result.rows as T[];
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private translate(error: unknown, signal: AbortSignal | undefined): unknown {
    if (signal?.aborted) return cancelled();
    // 57014 is also what an operator's pg_cancel_backend gives; statement_timeout is by far the usual cause.
    if (sqlState(error) === QUERY_CANCELED) {
      const statementTimeoutMs = this.config.queryTimeoutMs;
      return new DomainError(
        'query_timeout',
        `The query took longer than ${statementTimeoutMs} ms and was cancelled. Ask for less: add filters to where, ` +
          'request fewer fields, use a smaller limit, or aggregate instead of listing records.',
        { statementTimeoutMs },
      );
    }
    // Two transactions writing the same records in different orders (batches) can wait for each other.
    if (sqlState(error) === DEADLOCK_DETECTED) return deadlockBusy();
    return error;
  }
}

function cancelled(): DomainError {
  return new DomainError('query_cancelled', 'The query was cancelled: its request ended before it finished');
}

/**
 * Dates and timestamps as the text Postgres sends, as the ORM's pool reads them too: the value codec
 * decodes them, and a `date` never becomes a JS Date at local midnight on the way.
 */
function rawTemporalTypes(): TypeOverrides {
  const overrides = new TypeOverrides();
  for (const oid of [types.builtins.DATE, types.builtins.TIMESTAMP, types.builtins.TIMESTAMPTZ, types.builtins.INTERVAL]) {
    overrides.setTypeParser(oid, (value: string) => value);
  }
  return overrides;
}
