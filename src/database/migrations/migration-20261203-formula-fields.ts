import { Migration } from '@mikro-orm/migrations';

/**
 * Formula fields: computed when read from an expression over the record's other fields, with no column of
 * their own. A field definition keeps the expression as written and the type of its value.
 */
export class MigrationFormulaFields extends Migration {
  override name = '20261203000001_formula_fields';

  override up(): void {
    this.addSql(`alter table "field_definitions" add column "expression" text null, add column "result_type" varchar(16) null`);
  }
}
