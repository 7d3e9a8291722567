import { Migration } from '@mikro-orm/migrations';

/** Agents: admin-defined specs; JSON columns for the nested settings. */
export class MigrationAgents extends Migration {
  override name = '20261122010000_agents';

  override up(): void {
    this.addSql(`create table "agents" (
      "id" uuid primary key,
      "name" varchar(63) not null unique,
      "label" varchar(255) not null,
      "role" varchar(255) not null,
      "description" text null,
      "instructions" text not null,
      "model" jsonb not null,
      "tools" jsonb not null,
      "allowed_objects" jsonb not null,
      "planning" jsonb not null,
      "guardrails" jsonb not null,
      "access" jsonb not null,
      "active" boolean not null default true,
      "version" integer not null default 1,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`);
  }

  override down(): void {
    this.addSql(`drop table "agents"`);
  }
}
