import { Migration } from '@mikro-orm/migrations';

/**
 * A private view belongs to the API key that saved it, not to its subject: another key of the same
 * subject (say, one under narrower policies) must not see it. `owner_key_id` replaces `owner`.
 *
 * Which key saved an existing view was not recorded, so each goes to its subject's oldest active key
 * (else its oldest key): one key of the subject keeps what every key of it used to see. A private view
 * whose subject no key has any more was unreachable already and is dropped. Names stay unique per
 * object and owner, a shared view (no owner) counting as one owner.
 */
export class MigrationViewOwnerKeys extends Migration {
  override name = '20261129000002_view_owner_keys';

  override up(): void {
    this.addSql(`alter table "views" add column "owner_key_id" uuid null references "api_keys" ("id") on delete cascade`);
    this.addSql(`update "views" v set "owner_key_id" = (
        select k."id" from "api_keys" k where k."subject" = v."owner"
         order by k."revoked", k."created_at", k."id" limit 1)
      where v."owner" is not null`);
    this.addSql(`delete from "views" where "owner" is not null and "owner_key_id" is null`);
    this.addSql(`drop index "views_object_name_owner_key"`);
    this.addSql(`alter table "views" drop column "owner"`);
    this.addSql(
      `create unique index "views_object_name_owner_key" on "views" ("object", "name", "owner_key_id") nulls not distinct`,
    );
  }

  override down(): void {
    // Views of keys of one subject may share a name; all but the oldest of each are dropped.
    this.addSql(`alter table "views" add column "owner" varchar(255) null`);
    this.addSql(`update "views" v set "owner" = k."subject" from "api_keys" k where k."id" = v."owner_key_id"`);
    this.addSql(`delete from "views" v using "views" o
      where v."owner" is not null and o."owner" = v."owner" and o."object" = v."object" and o."name" = v."name"
        and (o."created_at", o."id") < (v."created_at", v."id")`);
    this.addSql(`drop index "views_object_name_owner_key"`);
    this.addSql(`alter table "views" drop column "owner_key_id"`);
    this.addSql(`create unique index "views_object_name_owner_key" on "views" ("object", "name", "owner") nulls not distinct`);
  }
}
