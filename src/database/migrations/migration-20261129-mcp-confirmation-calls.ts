import { Migration } from '@mikro-orm/migrations';

/**
 * A waiting MCP write confirmation names the tool call it belongs to (its JSON-RPC id, as JSON), so that the
 * client's `notifications/cancelled` for that call, which may reach another replica, ends the wait.
 */
export class MigrationMcpConfirmationCalls extends Migration {
  override name = '20261129000016_mcp_confirmation_calls';

  override up(): void {
    this.addSql(`alter table "mcp_confirmations" add column "call_id" text null`);
  }

  override down(): void {
    this.addSql(`alter table "mcp_confirmations" drop column "call_id"`);
  }
}
