import { Migration } from '@mikro-orm/migrations';

/** `links` fields: the schema of their join tables (one per link), apart from the one table per object of `data`. */
export class MigrationLinksFields extends Migration {
  override name = '20261208000001_links_fields';

  override up(): void {
    this.addSql(`create schema if not exists "data_links"`);
  }
}
