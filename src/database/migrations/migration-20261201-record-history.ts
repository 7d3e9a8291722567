import { Migration } from '@mikro-orm/migrations';
import { DATA_READER_ROLE } from '../database.constants';

/**
 * Record history, change sets and the trash, kept in the change feed's own outbox.
 *
 * - `change_sets`: one row per unit of change (a write, a batch, an import, an approved agent write, a
 *   restore, a revert), appended by the first statement that writes a record of it. Who (`key_id`),
 *   how (`via`), and for approvals the chat and tool call and the key that approved.
 * - `record_changes` gains `change_set_id` and `before` (the values an update replaced, only the fields
 *   it set): with `record` (the row the write left) that is each version's before → after. Once a change
 *   is past the feed's retention, `record` of an update is cut to the fields it set (`compacted`), so the
 *   history keeps the changed values only; a version's whole record is then rebuilt from a later whole
 *   one and the `before` values in between.
 * - `record_trash`: deleted records, pointing to the change whose `record` holds the row as deleted.
 */
export class MigrationRecordHistory extends Migration {
  override name = '20261201000001_record_history';

  override up(): void {
    this.addSql(`create table "change_sets" (
      "id" uuid primary key,
      "at" timestamptz not null default now(),
      "key_id" text null,
      "object" varchar(63) not null,
      "via" varchar(16) not null check ("via" in ('api', 'batch', 'import', 'approval', 'revert', 'restore')),
      "chat_id" text null,
      "tool_call_id" text null,
      "approver_key_id" text null,
      "reverts" uuid null,
      "reverted_by" uuid null
    )`);
    this.addSql(`create index "change_sets_at_idx" on "change_sets" ("at" desc, "id" desc)`);
    this.addSql(`create index "change_sets_key_at_idx" on "change_sets" ("key_id", "at" desc, "id" desc)`);
    this.addSql(`alter table "record_changes" add column "change_set_id" uuid null, add column "before" jsonb null,
      add column "compacted" boolean not null default false`);
    this.addSql(
      `create index "record_changes_uncompacted_idx" on "record_changes" ("at") where "op" = 'update' and not "compacted"`,
    );
    this.addSql(`create index "record_changes_record_idx" on "record_changes" ("object", "record_id", "id")`);
    this.addSql(`create index "record_changes_change_set_idx" on "record_changes" ("change_set_id", "id")
      where "change_set_id" is not null`);
    this.addSql(`create table "record_trash" (
      "object" varchar(63) not null,
      "record_id" uuid not null,
      "change_id" bigint not null,
      "change_set_id" uuid null,
      "deleted_at" timestamptz not null default now(),
      "key_id" text null,
      primary key ("object", "record_id")
    )`);
    this.addSql(`create index "record_trash_deleted_at_idx" on "record_trash" ("object", "deleted_at" desc, "record_id")`);
    this.addSql(`create index "record_trash_purge_idx" on "record_trash" ("deleted_at")`);
    // record_history reads them in the data tools' read-only transactions, as the SELECT-only role.
    this.addSql(`grant select on "record_changes", "change_sets", "record_trash" to "${DATA_READER_ROLE}"`);
  }

  override down(): void {
    this.addSql(`revoke select on "record_changes" from "${DATA_READER_ROLE}"`);
    this.addSql(`drop table "record_trash"`);
    this.addSql(`drop index "record_changes_change_set_idx"`);
    this.addSql(`drop index "record_changes_record_idx"`);
    this.addSql(`drop index "record_changes_uncompacted_idx"`);
    this.addSql(`alter table "record_changes" drop column "compacted", drop column "before", drop column "change_set_id"`);
    this.addSql(`drop table "change_sets"`);
  }
}
