import { Injectable, OnModuleInit } from '@nestjs/common';
import { JobQueue } from '../jobs/job-queue.service';
import { PrometheusService } from './prometheus.service';

/** Shows the job queue on /metrics: jobs by queue and state, the oldest waiting job's age, failed attempts. */
@Injectable()
export class JobQueueCollector implements OnModuleInit {
  constructor(
    private readonly metrics: PrometheusService,
    private readonly jobs: JobQueue,
  ) {}

  onModuleInit(): void {
    this.metrics.collectJobQueue(async () => {
      const failures = this.jobs.failedAttempts();
      return (await this.jobs.stats()).map((q) => ({ ...q, failedAttempts: failures.get(q.queue) ?? 0 }));
    });
  }
}
