import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ChangesService } from './changes.service';

/** How often each replica removes changes past CHANGE_RETENTION_DAYS (idempotent: replicas may overlap). */
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

/** Keeps the change feed to its retention: a cleanup at start and then every hour. */
@Injectable()
export class ChangeRetention implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(ChangeRetention.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(private readonly changes: ChangesService) {}

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
    this.running = this.changes
      .prune()
      .then((removed) => {
        if (removed) this.logger.log({ msg: 'removed expired record changes', removed });
      })
      .catch((error: unknown) =>
        this.logger.warn({
          msg: 'change retention cleanup failed',
          error: error instanceof Error ? error.message : String(error),
        }),
      )
      .finally(() => (this.running = undefined));
  }
}
