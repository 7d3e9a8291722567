import { Migration } from '@mikro-orm/migrations';

/**
 * The pending deliveries of a webhook's record, by cursor: a job of the dispatcher's page looks up
 * whether an earlier change of one of its records is still waiting in another job (it then waits behind
 * that one), once per job.
 */
export class MigrationPendingDeliveries extends Migration {
  override name = '20261210000001_pending_deliveries';

  override up(): void {
    this.addSql(
      `create index "webhook_deliveries_pending_idx" on "webhook_deliveries" ("webhook_id", "record_id", "cursor") ` +
        `where "status" = 'pending'`,
    );
  }
}
