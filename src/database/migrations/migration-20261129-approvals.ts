import { Migration } from '@mikro-orm/migrations';

/**
 * Writes with approval. `agents.writes`: the objects and operations an agent may propose writes for
 * (`{ "deal": ["update"] }`, none by default). `chats.status` gains `requires_approval`: a write proposal
 * waits for a person. `approval_tokens`: the approval tokens that were spent, one row each (the primary
 * key makes spending insert-once, so two replicas can never both spend one), with what came of them.
 * `audit_log.tool_call_id`: the tool call an entry belongs to, linking a proposal, its decision and its write.
 */
export class MigrationApprovals extends Migration {
  override name = '20261129000008_approvals';

  override up(): void {
    this.addSql(`alter table "agents" add column "writes" jsonb not null default '{}'`);
    this.addSql(`alter table "chats" drop constraint "chats_status_check"`);
    this.addSql(
      `alter table "chats" add constraint "chats_status_check"
         check ("status" in ('waiting', 'pending', 'running', 'requires_action', 'requires_approval', 'error'))`,
    );
    this.addSql(`create index "chats_approval_idx" on "chats" ("action_expires_at") where "status" = 'requires_approval'`);
    this.addSql(`create table "approval_tokens" (
      "token_hash" varchar(64) primary key,
      "chat_id" uuid not null,
      "tool_call_id" varchar(200) not null,
      "decision" varchar(10) not null check ("decision" in ('approve', 'reject')),
      "key_id" uuid null,
      "outcome" jsonb null,
      "spent_at" timestamptz not null default now()
    )`);
    this.addSql(`create index "approval_tokens_chat_idx" on "approval_tokens" ("chat_id", "tool_call_id")`);
    this.addSql(`alter table "audit_log" add column "tool_call_id" varchar(200) null`);
  }

  override down(): void {
    this.addSql(`alter table "audit_log" drop column "tool_call_id"`);
    this.addSql(`drop table "approval_tokens"`);
    this.addSql(`drop index "chats_approval_idx"`);
    this.addSql(`update "chats" set "status" = 'error' where "status" = 'requires_approval'`);
    this.addSql(`alter table "chats" drop constraint "chats_status_check"`);
    this.addSql(
      `alter table "chats" add constraint "chats_status_check"
         check ("status" in ('waiting', 'pending', 'running', 'requires_action', 'error'))`,
    );
    this.addSql(`alter table "agents" drop column "writes"`);
  }
}
