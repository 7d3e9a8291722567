import { Migration } from '@mikro-orm/migrations';

/**
 * Rollup, count and lookup_value fields: computed when read from the records of another object, with no
 * column of their own. A field definition keeps the definition as written (relation or through, field,
 * function, filter) with the related object and lookup it resolved to; `result_type` keeps the type its
 * value reads as.
 */
export class MigrationRelatedFields extends Migration {
  override name = '20261205000001_related_fields';

  override up(): void {
    this.addSql(`alter table "field_definitions" add column "computed" jsonb null`);
  }
}
