import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ChangesService } from '../changes/changes.service';
import { TrashService } from './trash.service';

/** How often each replica runs the retention cleanup (idempotent: replicas may overlap). */
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

/**
 * Keeps the change feed, record history and the trash to their retention (CHANGE_RETENTION_DAYS,
 * HISTORY_RETENTION_DAYS, TRASH_RETENTION_DAYS): a cleanup at start and then every hour.
 */
@Injectable()
export class RecordRetention implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(RecordRetention.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly changes: ChangesService,
    private readonly trash: TrashService,
  ) {}

  onModuleInit(): void {
    this.timer = setInterval(() => this.run(), PRUNE_INTERVAL_MS);
    this.timer.unref();
    this.run();
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  private run(): void {
    if (this.running) return;
    this.running = this.prune()
      .then(({ compacted, removed, purged }) => {
        if (compacted || removed || purged) this.logger.log({ msg: 'record retention', compacted, removed, purged });
      })
      .catch((error: unknown) =>
        this.logger.warn({
          msg: 'record retention cleanup failed',
          error: error instanceof Error ? error.message : String(error),
        }),
      )
      .finally(() => (this.running = undefined));
  }

  /** The trash first: a change that held a purged record may then expire with the rest. */
  private async prune(): Promise<{ compacted: number; removed: number; purged: number }> {
    const purged = await this.trash.purgeExpired();
    return { ...(await this.changes.prune()), purged };
  }
}
