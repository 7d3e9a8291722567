import { Migration } from '@mikro-orm/migrations';

/**
 * Approvals outside durable chats: a spent token belongs to the conversation its proposal was made in, which
 * is a chat's id or a front door's own scope (an MCP session, an OpenAI-compatible key), so `chat_id uuid`
 * becomes `scope` text. A token presented after its expiry where no chat records that (the OpenAI-compatible
 * API, whose clients send the same answer again with every later request) is spent as `expire`.
 */
export class MigrationApprovalScopes extends Migration {
  override name = '20261129000011_approval_scopes';

  override up(): void {
    this.addSql(`alter table "approval_tokens" rename column "chat_id" to "scope"`);
    this.addSql(`alter table "approval_tokens" alter column "scope" type varchar(200) using "scope"::text`);
    this.addSql(`alter index "approval_tokens_chat_idx" rename to "approval_tokens_scope_idx"`);
    this.addSql(`alter table "approval_tokens" drop constraint "approval_tokens_decision_check"`);
    this.addSql(
      `alter table "approval_tokens" add constraint "approval_tokens_decision_check" check ("decision" in ('approve', 'reject', 'expire'))`,
    );
  }

  override down(): void {
    this.addSql(`delete from "approval_tokens" where "scope" !~ '^[0-9a-f-]{36}$' or "decision" = 'expire'`);
    this.addSql(`alter table "approval_tokens" drop constraint "approval_tokens_decision_check"`);
    this.addSql(
      `alter table "approval_tokens" add constraint "approval_tokens_decision_check" check ("decision" in ('approve', 'reject'))`,
    );
    this.addSql(`alter index "approval_tokens_scope_idx" rename to "approval_tokens_chat_idx"`);
    this.addSql(`alter table "approval_tokens" alter column "scope" type uuid using "scope"::uuid`);
    this.addSql(`alter table "approval_tokens" rename column "scope" to "chat_id"`);
  }
}
