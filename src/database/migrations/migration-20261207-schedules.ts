import { Migration } from '@mikro-orm/migrations';

/**
 * Schedules: a question to an agent or a metric alert, run as its owner key on a cron (with a time
 * zone) or an interval. `next_run_at` is the next due tick: the replica that finds it due advances it
 * and queues the run in one transaction under the row's lock, so a tick is queued once however many
 * replicas look. A run per tick (unique with its tick time), its deliveries, and per alert and
 * dimension value whether the condition held at the last run.
 */
export class MigrationSchedules extends Migration {
  override name = '20261207000001_schedules';

  override up(): void {
    this.addSql(`create table "schedules" (
      "id" uuid primary key,
      "owner_key_id" uuid not null references "api_keys" ("id") on delete cascade,
      "name" text not null,
      "cron" text null,
      "every_seconds" integer null,
      "timezone" text not null default 'UTC',
      "action" jsonb not null,
      "deliver" jsonb not null,
      "status" varchar(16) not null default 'active',
      "disabled_reason" text null,
      "next_run_at" timestamptz null,
      "last_run_at" timestamptz null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now(),
      constraint "schedules_cron_or_every" check (("cron" is null) <> ("every_seconds" is null))
    )`);
    this.addSql(`create index "schedules_owner_idx" on "schedules" ("owner_key_id", "created_at")`);
    this.addSql(`create index "schedules_due_idx" on "schedules" ("next_run_at") where "status" = 'active'`);
    this.addSql(`create table "schedule_runs" (
      "id" uuid primary key,
      "schedule_id" uuid not null references "schedules" ("id") on delete cascade,
      "trigger" varchar(16) not null,
      "tick_at" timestamptz null,
      "status" varchar(16) not null default 'queued',
      "error" text null,
      "chat_id" uuid null,
      "fired" jsonb null,
      "payload" jsonb null,
      "created_at" timestamptz not null default now(),
      "started_at" timestamptz null,
      "finished_at" timestamptz null,
      constraint "schedule_runs_tick_unique" unique ("schedule_id", "tick_at")
    )`);
    this.addSql(`create index "schedule_runs_list_idx" on "schedule_runs" ("schedule_id", "created_at" desc, "id" desc)`);
    this.addSql(`create table "schedule_deliveries" (
      "id" uuid primary key,
      "run_id" uuid not null references "schedule_runs" ("id") on delete cascade,
      "position" integer not null,
      "kind" varchar(16) not null,
      "target" text not null,
      "status" varchar(16) not null default 'pending',
      "attempts" integer not null default 0,
      "response_status" integer null,
      "error_code" varchar(64) null,
      "error" text null,
      "created_at" timestamptz not null default now(),
      "delivered_at" timestamptz null
    )`);
    this.addSql(`create index "schedule_deliveries_run_idx" on "schedule_deliveries" ("run_id", "position")`);
    this.addSql(`create table "schedule_alert_states" (
      "schedule_id" uuid not null references "schedules" ("id") on delete cascade,
      "dimension" text not null,
      "holds" boolean not null,
      "updated_at" timestamptz not null default now(),
      primary key ("schedule_id", "dimension")
    )`);
  }
}
