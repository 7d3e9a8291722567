import { Migration } from '@mikro-orm/migrations';

/**
 * Ids that AI SDK clients (`useChat`) give their chats and user messages, so a client can address a
 * durable chat by its own id and find its messages again under the ids it knows. A chat's client id
 * is unique per owner: two keys may use the same id for chats of their own. `chat_messages.metadata`
 * keeps what a UI message reports about each model step (model, finish reason).
 */
export class MigrationChatClientIds extends Migration {
  override name = '20261124010000_chat_client_ids';

  override up(): void {
    this.addSql(`alter table "chats" add column "client_id" varchar(128) null`);
    this.addSql(
      `create unique index "chats_owner_client_id_idx" on "chats" ("owner", "client_id") where "client_id" is not null`,
    );
    this.addSql(`alter table "chat_messages" add column "client_id" varchar(128) null`);
    this.addSql(`alter table "chat_messages" add column "metadata" jsonb null`);
  }

  override down(): void {
    this.addSql(`alter table "chat_messages" drop column "metadata"`);
    this.addSql(`alter table "chat_messages" drop column "client_id"`);
    this.addSql(`drop index "chats_owner_client_id_idx"`);
    this.addSql(`alter table "chats" drop column "client_id"`);
  }
}
