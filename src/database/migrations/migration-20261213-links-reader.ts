import { Migration } from '@mikro-orm/migrations';
import { DATA_READER_ROLE } from '../database.constants';

/**
 * The SELECT-only role the data tools read as (DATA_READER_ROLE) reads the join tables of `links` fields too, those
 * there now and those made later (default privileges, as for `data`): a links value, or a rollup through one, is
 * read there.
 */
export class MigrationLinksReader extends Migration {
  override name = '20261213000001_links_reader';

  override up(): void {
    this.addSql(`grant usage on schema "data_links" to "${DATA_READER_ROLE}"`);
    this.addSql(`grant select on all tables in schema "data_links" to "${DATA_READER_ROLE}"`);
    this.addSql(`alter default privileges in schema "data_links" grant select on tables to "${DATA_READER_ROLE}"`);
  }

  override down(): void {
    this.addSql(`alter default privileges in schema "data_links" revoke select on tables from "${DATA_READER_ROLE}"`);
    this.addSql(`revoke select on all tables in schema "data_links" from "${DATA_READER_ROLE}"`);
    this.addSql(`revoke usage on schema "data_links" from "${DATA_READER_ROLE}"`);
  }
}
