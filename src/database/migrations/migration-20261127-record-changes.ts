import { Migration } from '@mikro-orm/migrations';

/**
 * The change feed's outbox: one row per record write, appended by the write's own statement (see
 * src/data/change-outbox.ts). `cursor` comes from a sequence, taken while the writer holds the
 * object's feed lock until its commit, so cursors of one object become visible in commit order.
 * `record_change_horizons` keeps, per object, the last cursor the retention cleanup removed: a reader
 * behind it has missed changes (410 cursor_expired).
 *
 * A statement-level trigger sends one NOTIFY per statement and object on the app's pubsub channel
 * (the name of PUBSUB_CHANNEL); Postgres delivers it on commit and merges duplicates of one transaction.
 */
export class MigrationRecordChanges extends Migration {
  override name = '20261127000003_record_changes';

  override up(): void {
    this.addSql(`create sequence "record_changes_cursor_seq"`);
    this.addSql(`create table "record_changes" (
      "cursor" bigint primary key,
      "object" varchar(63) not null,
      "op" varchar(6) not null check ("op" in ('create', 'update', 'delete')),
      "record_id" uuid not null,
      "changed_fields" text[] not null,
      "record" jsonb not null,
      "at" timestamptz not null default now(),
      "key_id" text null
    )`);
    this.addSql(`create index "record_changes_object_cursor_idx" on "record_changes" ("object", "cursor")`);
    this.addSql(`create index "record_changes_at_idx" on "record_changes" ("at")`);
    this.addSql(`create table "record_change_horizons" (
      "object" varchar(63) primary key,
      "pruned_through" bigint not null
    )`);
    this.addSql(`create function "record_changes_notify"() returns trigger language plpgsql as $$
      begin
        perform pg_notify('data_copilot_events', json_build_object('type', 'record_changes', 'object', o)::text)
          from (select distinct "object" as o from new_rows) objects;
        return null;
      end
    $$`);
    this.addSql(`create trigger "record_changes_notify" after insert on "record_changes"
      referencing new table as new_rows for each statement execute function "record_changes_notify"()`);
  }

  override down(): void {
    this.addSql(`drop table "record_change_horizons"`);
    this.addSql(`drop table "record_changes"`);
    this.addSql(`drop function "record_changes_notify"()`);
    this.addSql(`drop sequence "record_changes_cursor_seq"`);
  }
}
