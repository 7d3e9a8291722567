import { Migration } from '@mikro-orm/migrations';
import { DATA_SCHEMA } from '../sql-identifier';

/**
 * The index of an `indexed` or lookup field becomes (field, id), as new fields get it: the records
 * API orders by the field with id as the tie-breaker, and a page after a cursor is then a range of
 * that index at any depth (ties and empty values included). Rebuilds each single-column B-tree index
 * the app made on an object table (`idx_` names; unique, GIN and trigram indexes stay); writes to a
 * table wait while its index is built.
 */
export class MigrationKeysetIndexes extends Migration {
  override name = '20261128000002_keyset_indexes';

  override up(): void {
    this.addSql(rebuild(`%I, "id"`, `x.indnatts = 1 and a.attname <> 'id'`));
  }

  override down(): void {
    this.addSql(
      rebuild(
        `%I`,
        `x.indnatts = 2 and x.indkey[1] = (select attnum from pg_attribute where attrelid = t.oid and attname = 'id')`,
      ),
    );
  }
}

/** A block that recreates each matching `idx_` B-tree index of the data schema over `columns` (its first column as %I). */
function rebuild(columns: string, which: string): string {
  return `do $$
    declare r record;
    begin
      for r in
        select i.relname as index_name, t.relname as table_name, a.attname as column_name
          from pg_index x
          join pg_class i on i.oid = x.indexrelid
          join pg_class t on t.oid = x.indrelid
          join pg_namespace n on n.oid = t.relnamespace
          join pg_am am on am.oid = i.relam
          join pg_attribute a on a.attrelid = t.oid and a.attnum = x.indkey[0]
         where n.nspname = '${DATA_SCHEMA}' and am.amname = 'btree' and not x.indisunique
           and i.relname like 'idx\\_%' and ${which}
      loop
        execute format('drop index %I.%I', '${DATA_SCHEMA}', r.index_name);
        execute format('create index %I on %I.%I (${columns})', r.index_name, '${DATA_SCHEMA}', r.table_name, r.column_name);
      end loop;
    end
  $$`;
}
