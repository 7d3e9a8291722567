import { Migration } from '@mikro-orm/migrations';

/**
 * Metric definitions (the semantic layer). `uses` lists every "object.field" a metric reads (measure,
 * filter, time field, dimensions, a lookup's target field), so a metadata write can refuse to drop a
 * field a metric needs with one indexed lookup in its own transaction.
 */
export class MigrationMetricDefinitions extends Migration {
  override name = '20261126000002_metric_definitions';

  override up(): void {
    this.addSql(`create table "metric_definitions" (
      "id" uuid primary key,
      "name" varchar(63) not null unique,
      "label" varchar(255) not null,
      "description" text null,
      "object" varchar(63) not null,
      "type" varchar(16) not null,
      "measure" jsonb null,
      "filter" jsonb null,
      "numerator" varchar(63) null,
      "denominator" varchar(63) null,
      "time_field" varchar(63) null,
      "dimensions" jsonb not null default '[]',
      "synonyms" jsonb not null default '[]',
      "uses" jsonb not null default '[]',
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`);
    this.addSql(`create index "metric_definitions_uses_idx" on "metric_definitions" using gin ("uses")`);
  }

  override down(): void {
    this.addSql(`drop table "metric_definitions"`);
  }
}
