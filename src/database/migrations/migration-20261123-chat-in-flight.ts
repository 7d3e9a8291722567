import { Migration } from '@mikro-orm/migrations';

/**
 * An owner's chats in flight (pending or running): counted for the per-key cap on every new turn,
 * and per owner by the fair claim, so neither scans an owner's whole chat history.
 */
export class MigrationChatInFlight extends Migration {
  override name = '20261123010000_chat_in_flight';

  override up(): void {
    this.addSql(`create index "chats_in_flight_idx" on "chats" ("owner") where "status" in ('pending', 'running')`);
  }

  override down(): void {
    this.addSql(`drop index "chats_in_flight_idx"`);
  }
}
