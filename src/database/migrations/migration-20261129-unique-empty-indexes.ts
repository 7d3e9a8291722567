import { Migration } from '@mikro-orm/migrations';
import { DATA_SCHEMA } from '../sql-identifier';

/**
 * A unique field gets a partial index on (field, id) over its empty rows, as new unique fields do:
 * its unique index is on the field alone, so an order by it read every empty row and sorted them by
 * id once a page reached them. Adds one for each unique index the app made on an object table (`key_`
 * names), named as the app names it (`nul_` and the same rest); writes to a table wait while it is built.
 */
export class MigrationUniqueEmptyIndexes extends Migration {
  override name = '20261129000007_unique_empty_indexes';

  override up(): void {
    this.addSql(`do $$
      declare r record;
      begin
        for r in
          select i.relname as index_name, t.relname as table_name, a.attname as column_name
            from pg_index x
            join pg_class i on i.oid = x.indexrelid
            join pg_class t on t.oid = x.indrelid
            join pg_namespace n on n.oid = t.relnamespace
            join pg_attribute a on a.attrelid = t.oid and a.attnum = x.indkey[0]
           where n.nspname = '${DATA_SCHEMA}' and x.indisunique and not x.indisprimary and x.indnatts = 1
             and i.relname like 'key\\_%'
        loop
          execute format(
            'create index if not exists %I on %I.%I (%I, "id") where %I is null',
            'nul_' || substr(r.index_name, 5), '${DATA_SCHEMA}', r.table_name, r.column_name, r.column_name
          );
        end loop;
      end
    $$`);
  }

  override down(): void {
    this.addSql(`do $$
      declare r record;
      begin
        for r in
          select c.relname as index_name from pg_class c join pg_namespace n on n.oid = c.relnamespace
           where n.nspname = '${DATA_SCHEMA}' and c.relkind = 'i' and c.relname like 'nul\\_%'
        loop
          execute format('drop index %I.%I', '${DATA_SCHEMA}', r.index_name);
        end loop;
      end
    $$`);
  }
}
