import { Migration } from '@mikro-orm/migrations';

/**
 * Approvals outside durable chats: a spent token belongs to the conversation its proposal was made in, which
 * is a chat's id or a front door's own scope (an MCP session, an OpenAI-compatible key), so `chat_id uuid`
 * becomes `scope` text.
 */
export class MigrationApprovalScopes extends Migration {
  override name = '20261129000011_approval_scopes';

  override up(): void {
    this.addSql(`alter table "approval_tokens" rename column "chat_id" to "scope"`);
    this.addSql(`alter table "approval_tokens" alter column "scope" type varchar(200) using "scope"::text`);
    this.addSql(`alter index "approval_tokens_chat_idx" rename to "approval_tokens_scope_idx"`);
  }

  override down(): void {
    this.addSql(`delete from "approval_tokens" where "scope" !~ '^[0-9a-f-]{36}$'`);
    this.addSql(`alter index "approval_tokens_scope_idx" rename to "approval_tokens_chat_idx"`);
    this.addSql(`alter table "approval_tokens" alter column "scope" type uuid using "scope"::uuid`);
    this.addSql(`alter table "approval_tokens" rename column "scope" to "chat_id"`);
  }
}
