import { Migration } from '@mikro-orm/migrations';

/**
 * A token per claim: ownership checks compare it, not the worker id, so two runs of one chat on the
 * same replica (a reclaim while an aborted run unwinds) can never both write.
 */
export class MigrationChatClaims extends Migration {
  override name = '20261122030000_chat_claims';

  override up(): void {
    this.addSql(`alter table "chats" add column "claim_token" uuid null`);
  }

  override down(): void {
    this.addSql(`alter table "chats" drop column "claim_token"`);
  }
}
