import { Migration } from '@mikro-orm/migrations';

/**
 * Token quotas, usage and the audit trail.
 *
 * `usage`: one row per model call. The quota check sums today's rows of a key and of an agent before
 * every model call, so both sums are index range scans (`key_id, at` and `agent, at`, carrying the
 * tokens, so the sums read the index only).
 *
 * `audit_log`: every tool call and every admin change. Append-only: a trigger refuses UPDATE, DELETE
 * and TRUNCATE for every role the application connects as (owners and superusers included), so a bug
 * or a stolen application connection cannot rewrite history; only dropping the trigger (DDL an
 * operator does on purpose) would.
 */
export class MigrationUsageAudit extends Migration {
  override name = '20261126000000_usage_audit';

  override up(): void {
    this.addSql(`alter table "api_keys" add column "tokens_per_day" integer null`);
    this.addSql(`create table "usage" (
      "id" bigserial primary key,
      "key_id" uuid null,
      "agent" text null,
      "chat_id" uuid null,
      "model" text not null,
      "prompt_tokens" integer not null,
      "completion_tokens" integer not null,
      "total_tokens" integer not null,
      "duration_ms" integer not null,
      "outcome" text not null,
      "at" timestamptz not null default now()
    )`);
    this.addSql(`create index "usage_key_at_idx" on "usage" ("key_id", "at") include ("total_tokens")`);
    this.addSql(`create index "usage_agent_at_idx" on "usage" ("agent", "at") include ("total_tokens")`);
    this.addSql(`create index "usage_at_idx" on "usage" ("at")`);

    this.addSql(`create table "audit_log" (
      "id" bigserial primary key,
      "at" timestamptz not null default now(),
      "kind" text not null check ("kind" in ('tool', 'admin')),
      "key_id" uuid null,
      "agent" text null,
      "chat_id" uuid null,
      "tool" text null,
      "action" text null,
      "target" text null,
      "arguments" jsonb null,
      "row_count" integer null,
      "duration_ms" integer null,
      "outcome" text not null
    )`);
    this.addSql(`create index "audit_log_key_idx" on "audit_log" ("key_id", "id")`);
    this.addSql(`create index "audit_log_chat_idx" on "audit_log" ("chat_id", "id") where "chat_id" is not null`);
    this.addSql(`create index "audit_log_at_idx" on "audit_log" ("at")`);
    this.addSql(`create function "audit_log_append_only"() returns trigger language plpgsql as $$
      begin
        raise exception 'audit_log is append-only: % is not allowed', tg_op using errcode = 'insufficient_privilege';
      end $$`);
    this.addSql(`create trigger "audit_log_no_change" before update or delete on "audit_log"
      for each row execute function "audit_log_append_only"()`);
    this.addSql(`create trigger "audit_log_no_truncate" before truncate on "audit_log"
      for each statement execute function "audit_log_append_only"()`);
  }

  override down(): void {
    this.addSql(`drop table "audit_log"`);
    this.addSql(`drop function "audit_log_append_only"()`);
    this.addSql(`drop table "usage"`);
    this.addSql(`alter table "api_keys" drop column "tokens_per_day"`);
  }
}
