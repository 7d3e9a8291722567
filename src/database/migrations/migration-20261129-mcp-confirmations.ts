import { Migration } from '@mikro-orm/migrations';

/**
 * Write confirmations over MCP: a tool call waits for its client's answer to an elicitation, and that answer
 * comes back in another POST, maybe to another replica. `mcp_confirmations` holds one row per waiting
 * elicitation (the session's key and nonce, when it expires); the replica that receives the answer stores it
 * in the row, and the waiting replica reads it and deletes the row.
 */
export class MigrationMcpConfirmations extends Migration {
  override name = '20261129000014_mcp_confirmations';

  override up(): void {
    this.addSql(`create table "mcp_confirmations" (
      "request_id" varchar(100) primary key,
      "key_id" uuid not null,
      "session" varchar(100) not null,
      "answer" jsonb null,
      "expires_at" timestamptz not null
    )`);
    this.addSql(`create index "mcp_confirmations_key_idx" on "mcp_confirmations" ("key_id")`);
    this.addSql(`create index "mcp_confirmations_expiry_idx" on "mcp_confirmations" ("expires_at")`);
  }

  override down(): void {
    this.addSql(`drop table "mcp_confirmations"`);
  }
}
