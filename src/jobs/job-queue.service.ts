import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { CompiledQuery } from 'kysely';
import { PgBoss, type Db, type JobInsert, type JobWithMetadata, type Queue, type WorkOptions } from 'pg-boss';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import type { DataSession } from '../database/data-pool';
import { DATABASE_URL } from '../database/database.constants';
import { JOB_QUEUE_SCHEMA } from '../database/migrations/migration-20261204-webhooks';

/** Connections of the queue's own pool (fetching, completing, maintenance) on each replica. */
const JOB_POOL_SIZE = 4;
/** After a job, the wake-up that fetches the next job of its key comes this much later (once the job is settled). */
const SETTLE_WAKE_MS = 50;
/** How long a shutdown waits for the jobs in flight before it leaves them to their lease, milliseconds. */
const STOP_TIMEOUT_MS = 5_000;

/** A job as its handler sees it: its data, and which attempt this is (0 = the first). */
export type QueuedJob<T> = Pick<JobWithMetadata<T>, 'id' | 'data' | 'retryCount' | 'retryLimit' | 'createdOn' | 'signal'>;

/** One kind of job: its queue (policy, retries, lease) and how this replica works it. */
export interface JobDefinition<T> {
  queue: Omit<Queue, 'name'> & { name: string };
  /**
   * Jobs of one group (`group.id` of a job: an owner) each replica runs at once, of its JOB_CONCURRENCY:
   * the others stay free for other groups. Strict: pg-boss counts them in memory, leaves groups at their
   * limit out of its fetches and puts back, unchanged, a job fetched past it. (pg-boss's cluster-wide
   * `groupConcurrency` is not used: it counts active jobs when each fetch runs, so concurrent fetches,
   * even of one replica, can pass it together; it cannot be combined with the strict one.)
   */
  groupConcurrency?: number;
  /**
   * Runs one job. Resolving completes it; throwing fails this attempt, which pg-boss retries with the
   * queue's backoff until its retryLimit, then leaves `failed`. A replica that dies mid-job leaves it
   * active until its lease (expireInSeconds) runs out; then it is retried like a failed attempt.
   */
  handler: (job: QueuedJob<T>) => Promise<void>;
}

/** A queue's state for /metrics and readiness. */
export interface JobQueueStats {
  queue: string;
  /** Jobs waiting to run: new, deferred, or waiting for their retry. */
  queued: number;
  active: number;
  /** Jobs that failed their last attempt and are kept (the queue's retention). */
  failed: number;
  /** Age of the oldest job waiting to run, seconds (0: none waits). */
  oldestQueuedSeconds: number;
}

/**
 * The Postgres job queue (pg-boss) of every replica: each replica works every queue, a job runs on one
 * of them at a time (claimed with SKIP LOCKED), a lease (expireInSeconds) hands a dead replica's job to
 * another, failed attempts are retried with backoff. Its tables are created by the migrations
 * (migration-20261204-webhooks); pg-boss only keeps them up to date.
 *
 * Features define their jobs (`define`) while the app is made; the queue starts working them once the
 * app is bootstrapped and stops at shutdown, giving jobs in flight STOP_TIMEOUT_MS to end.
 */
@Injectable()
export class JobQueue implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(JobQueue.name);
  private readonly boss: PgBoss;
  private readonly definitions: JobDefinition<never>[] = [];
  /** The id work() returned for each queue on this replica, for notifyWorker. */
  private readonly workerIds = new Map<string, string[]>();
  private running = false;
  /** Resolves once pg-boss started (onApplicationBootstrap): sends before it wait for it. */
  private readonly started: Promise<void>;
  private markStarted!: () => void;
  /** Failed attempts seen by this replica's workers since start, by queue. */
  private readonly failures = new Map<string, number>();

  constructor(
    @Inject(DATABASE_URL) databaseUrl: string,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.boss = new PgBoss({
      connectionString: databaseUrl,
      schema: JOB_QUEUE_SCHEMA,
      max: JOB_POOL_SIZE,
      application_name: 'data-copilot:jobs',
      // The migrations created the schema; pg-boss upgrades it itself only after an upgrade of the package.
      createSchema: false,
      migrate: true,
      // How fresh the ready counts are that let busy workers fetch back to back (burstWhenReadyExceeds).
      queueCacheIntervalSeconds: 2,
      schedule: false,
      // No LISTEN connection and no NOTIFY inside the transactions that add jobs (they would serialise those
      // commits, as they would any write's): a replica wakes its own workers (`wake`), the others poll.
      useListenNotify: false,
      registerInstance: false,
      // Expired leases are found by the supervisor's monitor pass: both at JOB_SUPERVISE_INTERVAL_S.
      superviseIntervalSeconds: config.jobSuperviseIntervalS,
      monitorIntervalSeconds: config.jobSuperviseIntervalS,
      openTelemetry: { enabled: false },
    });
    this.started = new Promise((resolve) => (this.markStarted = resolve));
    this.boss.on('error', (error: Error) => this.logger.warn({ msg: 'job queue error', error: error.message }));
  }

  /** Works `definition`'s jobs once the app is bootstrapped. Call it while the app is made (a constructor, onModuleInit). */
  define<T>(definition: JobDefinition<T>): void {
    this.definitions.push(definition);
  }

  /** True while this replica's workers run. */
  get active(): boolean {
    return this.running;
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.boss.start();
    this.markStarted();
    for (const { queue } of this.definitions) {
      const { name, ...options } = queue;
      await this.boss.createQueue(name, options);
      // A queue made by an older build keeps its policy; its retries and lease follow this build's settings.
      await this.boss.updateQueue(name, {
        retryLimit: options.retryLimit,
        retryDelay: options.retryDelay,
        retryBackoff: options.retryBackoff,
        retryDelayMax: options.retryDelayMax,
        expireInSeconds: options.expireInSeconds,
        retentionSeconds: options.retentionSeconds,
      });
    }
    for (const definition of this.definitions) await this.work(definition);
    this.running = true;
  }

  async onApplicationShutdown(): Promise<void> {
    this.running = false;
    // Jobs still running after the timeout keep their claim until their lease ends, then another replica retries them.
    await this.boss.stop({ graceful: true, close: true, timeout: STOP_TIMEOUT_MS }).catch((error: Error) => {
      this.logger.warn({ msg: 'job queue stop failed', error: error.message });
    });
  }

  /**
   * Adds jobs; with `session` (a transaction of the data pool), in that transaction: they exist only
   * if it commits. Jobs of a `key_strict_fifo` queue with one singletonKey run in order of (creation
   * time, id): give ids that sort in the order they must run.
   */
  async insert(queue: string, jobs: JobInsert[], session?: DataSession): Promise<void> {
    if (!jobs.length) return;
    await this.boss.insert(queue, jobs, session ? { db: sessionDb(session) } : {});
  }

  /**
   * Adds one job; answers its id, or null when the queue's policy dropped it (an `exclusive` queue already
   * holds a job of its singletonKey, queued or running).
   */
  async send(queue: string, data: object, options: { id?: string; singletonKey?: string } = {}): Promise<string | null> {
    // A feature's own bootstrap may run before the queue's: its jobs go in once the queue is up.
    await this.started;
    const id = await this.boss.send(queue, data, options);
    if (id) this.wake(queue);
    return id;
  }

  /**
   * Makes a worker of `queue` on this replica fetch now rather than at its next poll (pg-boss wakes the
   * first worker of a work() call; the others keep polling): after a commit that added jobs, or after a job
   * completed (the next job of its key may run).
   */
  wake(queue: string): void {
    if (!this.running) return;
    for (const id of this.workerIds.get(queue) ?? []) this.boss.notifyWorker(id);
  }

  /** Each defined queue's counts, read now. */
  async stats(): Promise<JobQueueStats[]> {
    const names = this.definitions.map((d) => d.queue.name);
    if (!names.length) return [];
    const queues = await this.boss.getQueues(names);
    const { rows } = await this.boss
      .getDb()
      .executeSql(
        `select "name", extract(epoch from now() - min("created_on"))::float8 as "age" from ${JOB_QUEUE_SCHEMA}."job" ` +
          `where "name" = any($1) and "state" < 'active' group by "name"`,
        [names],
      );
    const ages = new Map((rows as { name: string; age: number }[]).map((r) => [r.name, r.age]));
    return queues.map((q) => ({
      queue: q.name,
      queued: q.queuedCount,
      active: q.activeCount,
      failed: q.failedCount,
      oldestQueuedSeconds: Math.max(0, ages.get(q.name) ?? 0),
    }));
  }

  /** The queue's tables answer (3 s at most). */
  async ping(): Promise<boolean> {
    const timeout = new Promise<boolean>((resolve) => setTimeout(resolve, 3_000, false).unref());
    const query = this.boss
      .getDb()
      .executeSql(`select 1 from ${JOB_QUEUE_SCHEMA}."version" limit 1`)
      .then(() => true)
      .catch(() => false);
    return Promise.race([query, timeout]);
  }

  /** Failed attempts this replica's workers saw since start, by queue. */
  failedAttempts(): ReadonlyMap<string, number> {
    return this.failures;
  }

  /** JOB_CONCURRENCY workers of the queue, one job each at a time; the group limit counted across them. */
  private async work(definition: JobDefinition<never>): Promise<void> {
    const name = definition.queue.name;
    const options = {
      includeMetadata: true as const,
      batchSize: 1,
      localConcurrency: this.config.jobConcurrency,
      pollingIntervalSeconds: Math.max(0.5, this.config.jobPollIntervalMs / 1000),
      localGroupConcurrency: definition.groupConcurrency,
      // While a backlog waits, a worker that just got a job fetches the next at once instead of waiting out
      // its poll: only the first worker of a work() call can be woken (wake), the others would poll.
      burstWhenReadyExceeds: 1,
    } satisfies WorkOptions;
    const id = await this.boss.work<never, void, typeof options>(name, options, async (jobs: JobWithMetadata<never>[]) => {
      for (const job of jobs) {
        try {
          await definition.handler(job);
        } catch (error) {
          this.failures.set(name, (this.failures.get(name) ?? 0) + 1);
          throw error;
        } finally {
          // Settled once this returns: the next job of its key is fetchable a moment later.
          setTimeout(() => this.wake(name), SETTLE_WAKE_MS).unref();
        }
      }
    });
    this.workerIds.set(name, [id]);
  }
}

/** A data pool session as pg-boss's database: its statements run in the session's transaction. */
function sessionDb(session: DataSession): Db {
  return {
    executeSql: async (text: string, values?: unknown[]) => ({
      rows: await session.query(CompiledQuery.raw(text, values ?? [])),
    }),
  };
}
