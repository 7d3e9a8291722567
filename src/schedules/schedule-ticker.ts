import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { JobQueue } from '../jobs/job-queue.service';
import { RUN_QUEUE, type RunJobData } from './schedule-jobs';
import { ScheduleRepository, type ScheduleRow } from './schedule.repository';
import { timingOf } from './schedules.service';
import { nextTick } from './schedule-timing';

/** Due schedules one pass queues at most (the next pass takes the rest). */
const BATCH = 100;

/**
 * Turns due ticks into run jobs, on every replica. One pass is one transaction: it locks the active
 * schedules whose next tick is due (SKIP LOCKED: a row another replica holds is that replica's), and
 * for each advances next_run_at past now, inserts the run of the tick (unique per schedule and tick
 * time) and queues its job. A tick is therefore queued once however many replicas look, and ticks
 * missed while every replica was down become one run, not one per missed tick.
 */
@Injectable()
export class ScheduleTicker implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(ScheduleTicker.name);
  private timer?: NodeJS.Timeout;
  private pass?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly repo: ScheduleRepository,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.schedule();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.pass;
  }

  /** One pass: queues every due tick; returns how many runs it queued. */
  async tick(): Promise<number> {
    return this.repo.transaction(async (tx) => {
      const due = await this.repo.lockDue(tx, BATCH);
      let queued = 0;
      const now = new Date();
      for (const schedule of due) {
        await this.repo.advance(tx, schedule.id, following(schedule, now));
        const runId = randomUUID();
        if (await this.repo.insertRun(tx, { id: runId, scheduleId: schedule.id, trigger: 'tick', tickAt: schedule.nextRunAt })) {
          await this.jobs.insert(
            RUN_QUEUE,
            [{ id: runId, data: { runId } satisfies RunJobData, group: { id: schedule.ownerKeyId } }],
            tx,
          );
          queued++;
        }
      }
      return queued;
    });
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.pass = this.tick()
        .then(() => undefined)
        .catch((error: Error) => this.logger.warn({ msg: 'schedule tick failed', error: error.message }))
        .finally(() => this.schedule());
    }, this.config.schedulePollIntervalMs);
    this.timer.unref();
  }
}

/**
 * The tick after the one found due at `now`: a cron's next match after now; an interval's next
 * multiple after its due tick that is later than now (missed ticks are not caught up one by one).
 */
function following(schedule: ScheduleRow, now: Date): Date | null {
  const timing = timingOf(schedule);
  if ('everySeconds' in timing && schedule.nextRunAt) {
    const step = timing.everySeconds * 1000;
    const due = Date.parse(schedule.nextRunAt);
    const missed = Math.max(0, Math.floor((now.getTime() - due) / step));
    return new Date(due + (missed + 1) * step);
  }
  return nextTick(timing, now);
}
