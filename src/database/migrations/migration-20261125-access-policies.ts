import { Migration } from '@mikro-orm/migrations';
import { DATA_READER_ROLE } from '../database.constants';

/**
 * Access policies (object grants, row filters, hidden fields) and what a key carries for them: the
 * names of its policies and its attributes (`$attr.<name>` in row filters).
 *
 * Also the SELECT-only role the data tools' READ ONLY transactions switch to (`SET LOCAL ROLE`), so
 * even a compiler bug cannot write. Roles belong to the whole cluster: creating it needs CREATEROLE
 * (or a superuser) the first time, and the app's user becomes a member so it may switch to it.
 * Several databases of one cluster share the role; each grants it SELECT on its own `data` schema,
 * for tables the app's user creates later too (ALTER DEFAULT PRIVILEGES).
 */
export class MigrationAccessPolicies extends Migration {
  override name = '20261125000000_access_policies';

  override up(): void {
    this.addSql(`create table "access_policies" (
      "id" uuid primary key,
      "name" varchar(63) not null unique,
      "description" text null,
      "objects" jsonb not null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`);
    this.addSql(`alter table "api_keys" add column "policies" jsonb not null default '[]'`);
    this.addSql(`alter table "api_keys" add column "attributes" jsonb not null default '{}'`);
    // A durable chat's turns run as the key that started it, under that key's policies.
    this.addSql(`alter table "chats" add column "owner_key_id" uuid null`);
    this.addSql(`do $$
      begin
        if not exists (select from pg_roles where rolname = '${DATA_READER_ROLE}') then
          begin
            create role "${DATA_READER_ROLE}" nologin;
          exception
            when duplicate_object or unique_violation then null; -- another database of this cluster made it meanwhile
            when insufficient_privilege then
              raise exception 'Cannot create the role "${DATA_READER_ROLE}": the database user needs CREATEROLE once (or an administrator runs CREATE ROLE "${DATA_READER_ROLE}" NOLOGIN; GRANT "${DATA_READER_ROLE}" TO <app user>)';
          end;
        end if;
        if not pg_has_role(current_user, '${DATA_READER_ROLE}', 'MEMBER') then
          begin
            execute format('grant %I to %I', '${DATA_READER_ROLE}', current_user);
          exception
            when unique_violation then null; -- another database of this cluster granted it meanwhile
            when insufficient_privilege then
              raise exception 'Cannot make the database user a member of "${DATA_READER_ROLE}": an administrator runs GRANT "${DATA_READER_ROLE}" TO <app user>';
          end;
        end if;
      end $$`);
    this.addSql(`grant usage on schema "data" to "${DATA_READER_ROLE}"`);
    this.addSql(`grant select on all tables in schema "data" to "${DATA_READER_ROLE}"`);
    this.addSql(`alter default privileges in schema "data" grant select on tables to "${DATA_READER_ROLE}"`);
  }

  override down(): void {
    this.addSql(`alter default privileges in schema "data" revoke select on tables from "${DATA_READER_ROLE}"`);
    this.addSql(`revoke select on all tables in schema "data" from "${DATA_READER_ROLE}"`);
    this.addSql(`revoke usage on schema "data" from "${DATA_READER_ROLE}"`);
    this.addSql(`alter table "chats" drop column "owner_key_id"`);
    this.addSql(`alter table "api_keys" drop column "attributes"`);
    this.addSql(`alter table "api_keys" drop column "policies"`);
    this.addSql(`drop table "access_policies"`);
  }
}
