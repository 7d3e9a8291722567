import { Migration } from '@mikro-orm/migrations';

/**
 * End users of an identity provider as principals beside API keys.
 *
 * - `api_keys.kind`: `key` (authenticates by its secret) or `user` (one person of `issuer`, authenticated
 *   by that issuer's tokens). A user row has no secret hash, so no secret can ever match it; everything
 *   keyed by a key's id (quotas, usage, audit, pool shares, streams, revocation) serves users unchanged.
 * - one row per (issuer, subject) of a user.
 * - `identity_mapping`: the one mapping from token claims to subject, role, policies and attributes.
 */
export class MigrationUserPrincipals extends Migration {
  override name = '20261202000001_user_principals';

  override up(): void {
    this.addSql(`alter table "api_keys"
      add column "kind" varchar(8) not null default 'key' check ("kind" in ('key', 'user')),
      add column "issuer" text null,
      alter column "secret_hash" drop not null`);
    this.addSql(`alter table "api_keys" add constraint "api_keys_kind_credentials" check (
      ("kind" = 'key' and "secret_hash" is not null and "issuer" is null)
      or ("kind" = 'user' and "secret_hash" is null and "issuer" is not null))`);
    this.addSql(`create unique index "api_keys_user_identity" on "api_keys" ("issuer", "subject") where "kind" = 'user'`);
    this.addSql(`create table "identity_mapping" (
      "id" smallint primary key check ("id" = 1),
      "mapping" jsonb not null,
      "updated_at" timestamptz not null default now()
    )`);
  }

  override down(): void {
    this.addSql(`drop table "identity_mapping"`);
    this.addSql(`delete from "api_keys" where "kind" = 'user'`);
    this.addSql(`drop index "api_keys_user_identity"`);
    this.addSql(`alter table "api_keys" drop constraint "api_keys_kind_credentials"`);
    this.addSql(`alter table "api_keys" drop column "kind", drop column "issuer", alter column "secret_hash" set not null`);
  }
}
