import { Migration } from '@mikro-orm/migrations';

/**
 * Jobs the server starts itself (a stored field's fill queued again at boot) have no key: `key_id` null,
 * visible to admins only, like every job of another key.
 */
export class MigrationSystemJobs extends Migration {
  override name = '20261209000001_system_jobs';

  override up(): void {
    this.addSql(`alter table "jobs" alter column "key_id" drop not null`);
  }
}
