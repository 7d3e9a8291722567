import { Migration } from '@mikro-orm/migrations';

/**
 * The pending deliveries of a webhook's record, by cursor: a job of the dispatcher's page looks up
 * whether an earlier change of one of its records is still waiting in another job (it then waits behind
 * that one), once per job. `handed_on`: a page's job gave the delivery to a job of its record, in the
 * transaction that queued that job; a retry of the page (its replica died before it completed) leaves it
 * to that job.
 */
export class MigrationPendingDeliveries extends Migration {
  override name = '20261210000001_pending_deliveries';

  override up(): void {
    this.addSql(`alter table "webhook_deliveries" add column "handed_on" boolean not null default false`);
    this.addSql(
      `create index "webhook_deliveries_pending_idx" on "webhook_deliveries" ("webhook_id", "record_id", "cursor") ` +
        `where "status" = 'pending'`,
    );
  }
}
