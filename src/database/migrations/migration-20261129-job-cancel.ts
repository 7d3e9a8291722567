import { Migration } from '@mikro-orm/migrations';

/**
 * Cancelling an import job (DELETE /api/v1/jobs/:id): the request is recorded on the job's row, so the
 * replica running the job sees it at its next batch boundary (or heartbeat), wherever it was asked.
 * The job then ends with status `cancelled`.
 */
export class MigrationJobCancel extends Migration {
  override name = '20261129000005_job_cancel';

  override up(): void {
    this.addSql(`alter table "jobs" add column "cancel_requested_at" timestamptz null`);
  }

  override down(): void {
    this.addSql(`update "jobs" set "status" = 'failed' where "status" = 'cancelled'`);
    this.addSql(`alter table "jobs" drop column "cancel_requested_at"`);
  }
}
