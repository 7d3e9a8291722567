import { Migration } from '@mikro-orm/migrations';

/**
 * A turn runs as the key that posted it. `chats.turn_key_id`: the key whose message (or client tool
 * results) made the chat pending, re-checked at claim; existing chats continue as the key that started
 * them. `chat_messages.key_id`: the key that posted a message, or whose turn produced it;
 * `access_fingerprint`: of tool results, the access they were produced under (a caller with another
 * access gets them withheld); null for messages that no data access produced.
 */
export class MigrationTurnCallers extends Migration {
  override name = '20261129000001_turn_callers';

  override up(): void {
    this.addSql(`alter table "chats" add column "turn_key_id" uuid null`);
    this.addSql(`update "chats" set "turn_key_id" = "owner_key_id"`);
    this.addSql(`alter table "chat_messages" add column "key_id" uuid null, add column "access_fingerprint" varchar(64) null`);
  }

  override down(): void {
    this.addSql(`alter table "chat_messages" drop column "key_id", drop column "access_fingerprint"`);
    this.addSql(`alter table "chats" drop column "turn_key_id"`);
  }
}
