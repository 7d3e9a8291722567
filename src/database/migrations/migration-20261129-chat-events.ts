import { Migration } from '@mikro-orm/migrations';

/**
 * Chat events are rows, not NOTIFYs: a chat write appends its events to `chat_events` in its own
 * statement (no pg_notify inside the transaction, so commits that publish no longer queue on
 * Postgres' notification lock), and each replica reads them by id, woken by one coalesced
 * announcement per replica and window (see CommitAnnouncer) or by its poll.
 *
 * `prev` is the chat's previous event id as committed when the event was written (read by the
 * volatile function below, so with a fresh snapshot taken after the chat's row lock): a replica
 * that wrote an event delivers it to its own streams at once only when it has delivered `prev`.
 *
 * The change feed's trigger stops sending NOTIFY too: its readers wake on the same announcements.
 */
export class MigrationChatEvents extends Migration {
  override name = '20261129000010_chat_events';

  override up(): void {
    this.addSql(`create table "chat_events" (
      "id" bigserial primary key,
      "chat_id" uuid not null,
      "event" jsonb not null,
      "message_id" bigint null,
      "prev" bigint null,
      "created_at" timestamptz not null default now()
    )`);
    this.addSql(`create index "chat_events_chat_id_idx" on "chat_events" ("chat_id", "id")`);
    this.addSql(`create index "chat_events_created_at_idx" on "chat_events" ("created_at")`);
    this.addSql(`create function "chat_event_prev"(chat uuid) returns bigint language plpgsql volatile as $$
      begin
        return (select max("id") from "chat_events" where "chat_id" = chat);
      end
    $$`);
    this.addSql(`drop trigger if exists "record_changes_notify" on "record_changes"`);
    this.addSql(`drop function if exists "record_changes_notify"()`);
  }

  override down(): void {
    this.addSql(`create function "record_changes_notify"() returns trigger language plpgsql as $$
      begin
        perform pg_notify('data_copilot_events', json_build_object('type', 'record_changes', 'object', o)::text)
          from (select distinct "object" as o from new_rows) objects;
        return null;
      end
    $$`);
    this.addSql(`create trigger "record_changes_notify" after insert on "record_changes"
      referencing new table as new_rows for each statement execute function "record_changes_notify"()`);
    this.addSql(`drop function "chat_event_prev"(uuid)`);
    this.addSql(`drop table "chat_events"`);
  }
}
