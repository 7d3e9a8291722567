import { Inject, Injectable, Logger } from '@nestjs/common';
import { ChatWorker } from '../chats/durable/chat.worker';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataPool } from '../database/data-pool';
import { MIGRATIONS, migrationNames } from '../database/migrations';
import { JobQueue } from '../jobs/job-queue.service';
import type { HealthResponse, ReadinessChecks, ReadinessResponse } from './health.dto';
import { HealthRepository } from './health.repository';

@Injectable()
export class HealthService {
  private readonly logger = new Logger(HealthService.name);
  private readonly expectedMigrations = migrationNames();

  constructor(
    private readonly repo: HealthRepository,
    private readonly worker: ChatWorker,
    private readonly data: DataPool,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** ok when the database answers and holds every migration of this build. */
  async check(): Promise<HealthResponse> {
    let applied: number;
    try {
      applied = await this.repo.appliedMigrations();
    } catch (error) {
      // The 503 itself is logged as a failed request; this adds the cause, for whoever looks closer.
      this.logger.debug({ msg: 'health check failed', error: error instanceof Error ? error.message : String(error) });
      throw new DomainError('database_unavailable', 'The database is not reachable');
    }
    // Migrations are only ever added, so a newer replica's extra ones still count as migrated.
    if (applied < MIGRATIONS.length) {
      throw new DomainError('database_unavailable', 'The database is not migrated');
    }
    return { status: 'ok' };
  }

  /** The process runs: no I/O at all, so a busy or lost database never makes it fail. */
  live(): HealthResponse {
    return { status: 'ok' };
  }

  /**
   * Ready for traffic: the database answers (its own connection, 3 s at most), every migration of
   * this build is recorded there (extra ones of a newer replica are fine), and the chat worker runs
   * when CHAT_WORKER_ENABLED, the job queue's workers run and its tables answer. Otherwise 503 `not_ready` naming the checks that failed. The read
   * replica is reported as last checked (no I/O here), never a failure: the primary serves its reads.
   */
  async ready(): Promise<ReadinessResponse> {
    const replica = this.data.readReplica()?.status;
    const checks: ReadinessChecks = {
      database: 'ok',
      migrations: 'ok',
      worker: 'ok',
      jobQueue: 'ok',
      readReplica: replica?.state ?? 'disabled',
    };
    let pendingMigrations: string[] = [];
    try {
      const applied = new Set(await this.repo.appliedMigrationNames());
      pendingMigrations = this.expectedMigrations.filter((name) => !applied.has(name));
      if (pendingMigrations.length) checks.migrations = 'pending';
    } catch (error) {
      this.logger.debug({ msg: 'readiness check failed', error: error instanceof Error ? error.message : String(error) });
      checks.database = 'unreachable';
      checks.migrations = 'unknown';
    }
    if (!this.jobs.active) checks.jobQueue = 'stopped';
    else if (!(await this.jobs.ping())) checks.jobQueue = 'unreachable';
    if (!this.config.chatWorkerEnabled) checks.worker = 'disabled';
    else if (!this.worker.active) checks.worker = 'stopped';

    const failed = Object.entries(checks).filter(
      ([check, state]) => check !== 'readReplica' && state !== 'ok' && state !== 'disabled',
    );
    const lag = replica ? { readReplicaLagMs: replica.lagMs } : {};
    if (failed.length) {
      throw new DomainError(
        'not_ready',
        `Not ready: ${failed.map(([check, state]) => `${check} ${state}`).join(', ')}`,
        pendingMigrations.length ? { checks, pendingMigrations, ...lag } : { checks, ...lag },
      );
    }
    return { status: 'ok', checks, ...lag };
  }
}
