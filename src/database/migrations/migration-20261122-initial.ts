import { Migration } from '@mikro-orm/migrations';

/** System tables of the foundation: API keys and object/field metadata, plus the schema of object tables. */
export class MigrationInitial extends Migration {
  override name = '20261122000000_initial';

  override up(): void {
    this.addSql(`create schema if not exists "data"`);
    this.addSql(`create table "api_keys" (
      "id" uuid primary key,
      "name" varchar(255) not null,
      "prefix" varchar(32) not null,
      "secret_hash" varchar(128) not null unique,
      "role" varchar(16) not null check ("role" in ('admin', 'member')),
      "subject" varchar(255) not null,
      "revoked" boolean not null default false,
      "created_at" timestamptz not null default now(),
      "last_used_at" timestamptz null
    )`);
    this.addSql(`create table "object_definitions" (
      "id" uuid primary key,
      "name" varchar(63) not null unique,
      "label" varchar(255) not null,
      "description" text null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`);
    this.addSql(`create table "field_definitions" (
      "id" uuid primary key,
      "object_id" uuid not null references "object_definitions" ("id") on delete cascade,
      "name" varchar(63) not null,
      "label" varchar(255) not null,
      "type" varchar(32) not null,
      "required" boolean not null default false,
      "unique" boolean not null default false,
      "indexed" boolean not null default false,
      "description" text null,
      "options" jsonb null,
      "reference" varchar(63) null,
      "position" integer not null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now(),
      unique ("object_id", "name")
    )`);
    this.addSql(`create index "field_definitions_reference_idx" on "field_definitions" ("reference")`);
  }

  override down(): void {
    this.addSql(`drop table "field_definitions"`);
    this.addSql(`drop table "object_definitions"`);
    this.addSql(`drop table "api_keys"`);
  }
}
