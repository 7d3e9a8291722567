import { Module } from '@nestjs/common';
import { JobQueue } from './job-queue.service';

/** The Postgres job queue every replica works (pg-boss); features define their jobs on it. */
@Module({
  providers: [JobQueue],
  exports: [JobQueue],
})
export class JobsModule {}
