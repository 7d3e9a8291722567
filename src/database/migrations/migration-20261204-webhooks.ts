import { Migration } from '@mikro-orm/migrations';
import { getConstructionPlans } from 'pg-boss';

/** The schema of the job queue's tables (pg-boss). */
export const JOB_QUEUE_SCHEMA = 'pgboss';

/**
 * The job queue and webhooks.
 *
 * The queue's tables are pg-boss's own, created here from the SQL pg-boss gives for its schema
 * (getConstructionPlans) rather than by pg-boss at start: the tables then exist, and are recorded as
 * migrated, before any replica starts a worker, and a deployment that forbids DDL at run time still
 * works. Its BEGIN/COMMIT are cut: the migration runs in a transaction of its own. pg-boss records its
 * schema version in `pgboss.version`; a later pg-boss release upgrades that schema itself at start
 * (under its own advisory lock), from the version recorded there.
 *
 * Webhooks: a subscription (owner key, target, objects, event kinds, optional where, its signing
 * secret), a cursor per subscription and object in the change feed, and a delivery per change sent.
 */
export class MigrationWebhooks extends Migration {
  override name = '20261204000001_webhooks';

  override up(): void {
    this.addSql(jobQueueSchemaSql());
    this.addSql(`create table "webhooks" (
      "id" uuid primary key,
      "owner_key_id" uuid not null references "api_keys" ("id") on delete cascade,
      "url" text not null,
      "objects" text[] not null,
      "events" text[] not null,
      "where" jsonb null,
      "description" text null,
      "secret" text not null,
      "status" varchar(16) not null default 'active',
      "disabled_reason" text null,
      "failing_since" timestamptz null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`);
    this.addSql(`create index "webhooks_owner_idx" on "webhooks" ("owner_key_id", "created_at")`);
    this.addSql(`create table "webhook_cursors" (
      "webhook_id" uuid not null references "webhooks" ("id") on delete cascade,
      "object" varchar(63) not null,
      "cursor" bigint not null,
      "dispatched_at" timestamptz not null default now(),
      primary key ("webhook_id", "object")
    )`);
    this.addSql(`create table "webhook_deliveries" (
      "id" uuid primary key,
      "webhook_id" uuid not null references "webhooks" ("id") on delete cascade,
      "object" varchar(63) not null,
      "record_id" uuid not null,
      "cursor" bigint not null,
      "op" varchar(8) not null,
      "status" varchar(16) not null default 'pending',
      "attempts" integer not null default 0,
      "response_status" integer null,
      "response_body" text null,
      "duration_ms" integer null,
      "error" text null,
      "created_at" timestamptz not null default now(),
      "queued_at" timestamptz not null default now(),
      "last_attempt_at" timestamptz null,
      "delivered_at" timestamptz null,
      constraint "webhook_deliveries_change_unique" unique ("webhook_id", "object", "cursor")
    )`);
    this.addSql(
      `create index "webhook_deliveries_list_idx" on "webhook_deliveries" ("webhook_id", "created_at" desc, "id" desc)`,
    );
  }
}

/** pg-boss's schema as one script for a migration's transaction. */
export function jobQueueSchemaSql(): string {
  const plan = getConstructionPlans(JOB_QUEUE_SCHEMA).trim();
  return plan.replace(/^BEGIN;/, '').replace(/COMMIT;$/, '');
}
