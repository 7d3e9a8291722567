import { Migration } from '@mikro-orm/migrations';

/**
 * Import jobs: one row per CSV import, its progress updated as it goes (rows read, written,
 * rejected, the first rejected rows' errors), so that any replica can answer for it. `heartbeat_at`
 * moves while the job's process works on it: a running job whose heartbeat stopped lost its process.
 */
export class MigrationImportJobs extends Migration {
  override name = '20261127000001_import_jobs';

  override up(): void {
    this.addSql(`create table "jobs" (
      "id" uuid primary key,
      "key_id" uuid not null references "api_keys" ("id") on delete cascade,
      "kind" varchar(20) not null,
      "object_name" varchar(100) not null,
      "status" varchar(10) not null,
      "dry_run" boolean not null,
      "atomic" boolean not null,
      "rows_read" integer not null default 0,
      "rows_written" integer not null default 0,
      "rows_rejected" integer not null default 0,
      "errors" jsonb not null default '[]',
      "failure" jsonb null,
      "heartbeat_at" timestamptz not null default now(),
      "created_at" timestamptz not null default now(),
      "finished_at" timestamptz null
    )`);
    this.addSql(`create index "jobs_key_idx" on "jobs" ("key_id", "created_at")`);
    this.addSql(`create index "jobs_running_idx" on "jobs" ("heartbeat_at") where "status" = 'running'`);
  }

  override down(): void {
    this.addSql(`drop table "jobs"`);
  }
}
