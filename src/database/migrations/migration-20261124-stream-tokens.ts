import { Migration } from '@mikro-orm/migrations';

/**
 * Stream tokens: short-lived credentials that let a browser's EventSource (which cannot send an
 * Authorization header) open an event stream as the key that created them. Only a SHA-256 hash of a
 * token is stored, in the database every replica shares, so a token made on one replica opens a
 * stream on any other. Expired rows are swept as new tokens are made (the index on `expires_at`).
 */
export class MigrationStreamTokens extends Migration {
  override name = '20261124000000_stream_tokens';

  override up(): void {
    this.addSql(`create table "stream_tokens" (
      "token_hash" varchar(64) primary key,
      "key_id" uuid not null references "api_keys" ("id") on delete cascade,
      "chat_id" uuid null,
      "expires_at" timestamptz not null,
      "created_at" timestamptz not null default now()
    )`);
    this.addSql(`create index "stream_tokens_key_idx" on "stream_tokens" ("key_id", "expires_at")`);
    this.addSql(`create index "stream_tokens_expires_idx" on "stream_tokens" ("expires_at")`);
  }

  override down(): void {
    this.addSql(`drop table "stream_tokens"`);
  }
}
