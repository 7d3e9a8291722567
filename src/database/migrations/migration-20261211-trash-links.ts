import { Migration } from '@mikro-orm/migrations';

/**
 * A trashed record's links: per join table it was on, the records on the other side in link order, kept by its
 * delete (whose cascade removes the join rows) so a restore or a revert makes them again. Null for records of
 * objects without links, and for those trashed before this column.
 */
export class MigrationTrashLinks extends Migration {
  override name = '20261211000001_trash_links';

  override up(): void {
    this.addSql(`alter table "record_trash" add column "links" jsonb null`);
  }

  override down(): void {
    this.addSql(`alter table "record_trash" drop column "links"`);
  }
}
