import { Migration } from '@mikro-orm/migrations';

/**
 * Saved views, and search over fields marked searchable.
 *
 * A view belongs to one object and one owner (the caller's subject); a shared view has no owner. Names
 * are unique per object and owner, a shared view counting as one owner. `uses` lists every
 * "object.field" a view names, so dropping a field checks it like metric definitions.
 *
 * Search folds case and accents with `search_fold` (unaccent's default dictionary, then lower): the
 * function is declared immutable, as a trigram index expression must be, which holds as long as the
 * unaccent rules file does not change. pg_trgm and unaccent are trusted extensions: the database owner
 * may create them.
 */
export class MigrationViewsSearch extends Migration {
  override name = '20261127000002_views_search';

  override up(): void {
    this.addSql(`create table "views" (
      "id" uuid primary key,
      "object" varchar(63) not null,
      "name" varchar(63) not null,
      "owner" varchar(255) null,
      "label" varchar(255) not null,
      "description" text null,
      "where" jsonb null,
      "order_by" jsonb null,
      "fields" jsonb null,
      "group_by" jsonb null,
      "uses" jsonb not null default '[]',
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`);
    this.addSql(`create unique index "views_object_name_owner_key" on "views" ("object", "name", "owner") nulls not distinct`);
    this.addSql(`create index "views_uses_idx" on "views" using gin ("uses")`);
    this.addSql(`alter table "field_definitions" add column "searchable" boolean not null default false`);
    this.addSql(`create extension if not exists pg_trgm with schema public`);
    this.addSql(`create extension if not exists unaccent with schema public`);
    this.addSql(`create or replace function public.search_fold(text) returns text
      language sql immutable strict parallel safe
      as $$ select lower(public.unaccent('public.unaccent'::regdictionary, $1)) $$`);
  }

  override down(): void {
    this.addSql(`drop function if exists public.search_fold(text)`);
    this.addSql(`alter table "field_definitions" drop column "searchable"`);
    this.addSql(`drop table "views"`);
  }
}
