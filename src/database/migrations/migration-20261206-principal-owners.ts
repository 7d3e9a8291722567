import { Migration } from '@mikro-orm/migrations';

/**
 * What owns a principal's chats, apart from the subject its row filters read as `$subject`.
 *
 * - `api_keys.owner`, computed by the database from the row and nowhere else: a key's subject (two keys
 *   of one subject share their chats, as before); a user's issuer and subject as `oidc:<issuer>#<subject>`
 *   (an issuer has no `#`, so no two users share one; a key's subject cannot start with `oidc:`). Two
 *   issuers' users with one `sub` no longer share chats, and neither shares a key's.
 * - `chats.owner` becomes `text` (an issuer and a subject may be longer than 255 characters together).
 * - Chats a user started (their `owner_key_id` is the user's row, their owner still its subject) move to
 *   the user's owner, and so do the events already logged for them. Chats of keys are not touched.
 */
export class MigrationPrincipalOwners extends Migration {
  override name = '20261206000001_principal_owners';

  override up(): void {
    this.addSql(`alter table "api_keys" add column "owner" text generated always as (
      case when "kind" = 'user' then 'oidc:' || "issuer" || '#' || "subject" else "subject" end) stored`);
    this.addSql(`alter table "chats" alter column "owner" type text`);
    // Events first: they are found by the chats' owners as they were.
    this.addSql(`update "chat_events" e set "event" = jsonb_set(e."event", '{owner}', to_jsonb(k."owner"))
      from "chats" c join "api_keys" k on k."id" = c."owner_key_id"
      where e."chat_id" = c."id" and k."kind" = 'user' and c."owner" = k."subject" and e."event"->>'owner' = k."subject"`);
    this.addSql(`update "chats" c set "owner" = k."owner"
      from "api_keys" k
      where k."id" = c."owner_key_id" and k."kind" = 'user' and c."owner" = k."subject"`);
  }

  override down(): void {
    // Back to subjects: a client id that two chats would then share under one owner is dropped from the users' chats.
    this.addSql(`with target as (
        select c."id", k."subject" as "owner", c."client_id" from "chats" c
          join "api_keys" k on k."kind" = 'user' and c."owner" = k."owner"
      )
      update "chats" set "client_id" = null where "id" in (
        select t."id" from target t where t."client_id" is not null and exists (
          select 1 from "chats" o left join target ot on ot."id" = o."id"
           where o."id" <> t."id" and o."client_id" = t."client_id" and coalesce(ot."owner", o."owner") = t."owner"))`);
    this.addSql(`update "chat_events" e set "event" = jsonb_set(e."event", '{owner}', to_jsonb(k."subject"))
      from "chats" c join "api_keys" k on k."kind" = 'user' and c."owner" = k."owner"
      where e."chat_id" = c."id" and e."event"->>'owner' = k."owner"`);
    this.addSql(`update "chats" c set "owner" = k."subject" from "api_keys" k where k."kind" = 'user' and c."owner" = k."owner"`);
    this.addSql(`alter table "chats" alter column "owner" type varchar(255)`);
    this.addSql(`alter table "api_keys" drop column "owner"`);
  }
}
