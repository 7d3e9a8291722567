import { Migration } from '@mikro-orm/migrations';

/**
 * Durable chats and their messages. `chat_messages.id` is the stream cursor (bigserial, strictly
 * increasing per commit order of inserts); the partial index serves the workers' claim query.
 */
export class MigrationChats extends Migration {
  override name = '20261122020000_chats';

  override up(): void {
    this.addSql(`create table "chats" (
      "id" uuid primary key,
      "owner" varchar(255) not null,
      "owner_role" varchar(16) not null,
      "agent" varchar(63) not null,
      "title" varchar(255) null,
      "status" varchar(20) not null check ("status" in ('waiting', 'pending', 'running', 'requires_action', 'error')),
      "context" jsonb null,
      "dynamic_tools" jsonb not null default '[]',
      "pending_tool_calls" jsonb null,
      "action_expires_at" timestamptz null,
      "worker_id" varchar(128) null,
      "heartbeat_at" timestamptz null,
      "available_at" timestamptz not null default now(),
      "attempts" integer not null default 0,
      "turn_iterations" integer not null default 0,
      "turn_tokens" integer not null default 0,
      "last_error" jsonb null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`);
    this.addSql(`create index "chats_pending_idx" on "chats" ("available_at") where "status" = 'pending'`);
    this.addSql(`create index "chats_running_idx" on "chats" ("heartbeat_at") where "status" = 'running'`);
    this.addSql(`create index "chats_action_idx" on "chats" ("action_expires_at") where "status" = 'requires_action'`);
    this.addSql(`create index "chats_owner_idx" on "chats" ("owner", "updated_at" desc)`);
    this.addSql(`create table "chat_messages" (
      "id" bigserial primary key,
      "chat_id" uuid not null references "chats" ("id") on delete cascade,
      "role" varchar(16) not null check ("role" in ('user', 'assistant', 'tool')),
      "parts" jsonb not null,
      "usage" jsonb null,
      "created_at" timestamptz not null default now()
    )`);
    this.addSql(`create index "chat_messages_chat_idx" on "chat_messages" ("chat_id", "id")`);
  }

  override down(): void {
    this.addSql(`drop table "chat_messages"`);
    this.addSql(`drop table "chats"`);
  }
}
