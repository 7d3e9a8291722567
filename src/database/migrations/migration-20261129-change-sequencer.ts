import { Migration } from '@mikro-orm/migrations';

/**
 * Change cursors drawn after commit, by the feed's readers, instead of by writers holding a lock.
 *
 * A write now appends its outbox rows without a cursor (only `id`, an identity in insert order) and
 * takes no lock of its own. `record_changes_sequence(object, limit, lock_key)` numbers an object's
 * committed rows that have no cursor yet, in `id` order, from the cursor sequence: it takes the
 * transaction-scoped advisory lock (`lock_key`, hashtext(object)) first and commits with the
 * caller's statement, so one sequencer of an object draws and commits at a time, and every cursor it
 * draws is larger than any cursor of that object already visible. Rows of transactions still open
 * are not visible to it: they get their cursors when they commit and a reader next sequences, so
 * they can never appear below a cursor a reader has passed. Each of its statements sees the latest
 * committed rows (plpgsql, READ COMMITTED), the update the ones committed once the lock was granted.
 * With nothing to number it returns after one index probe, without the lock and without writing.
 *
 * `record_changes_page(object, after, limit, batch, lock_key)` is what a reader runs: it numbers first,
 * then returns the object's changes after `after` in cursor order, at most `limit`, in one statement
 * (its query sees the numbering, and the caller gets the rows once all of it committed).
 */
export class MigrationChangeSequencer extends Migration {
  override name = '20261129000009_change_sequencer';

  override up(): void {
    this.addSql(`alter table "record_changes" drop constraint "record_changes_pkey"`);
    this.addSql(`alter table "record_changes" add column "id" bigint generated always as identity`);
    this.addSql(`alter table "record_changes" add constraint "record_changes_pkey" primary key ("id")`);
    this.addSql(`alter table "record_changes" alter column "cursor" drop not null`);
    this.addSql(`create index "record_changes_unsequenced_idx" on "record_changes" ("object", "id") where "cursor" is null`);
    this.addSql(`create function "record_changes_sequence"(p_object varchar, p_limit integer, p_lock_key integer)
      returns integer language plpgsql as $$
      declare
        numbered integer;
      begin
        if not exists (select from "record_changes" where "object" = p_object and "cursor" is null) then
          return 0;
        end if;
        perform pg_advisory_xact_lock(p_lock_key, hashtext(p_object));
        -- Cursors drawn row by row over the rows in id order: increasing with id.
        update "record_changes" c set "cursor" = n."cursor"
          from (
            select p."id", nextval('record_changes_cursor_seq') as "cursor"
              from (
                select "id" from "record_changes" where "object" = p_object and "cursor" is null
                  order by "id" limit p_limit
              ) p
          ) n
          where c."id" = n."id";
        get diagnostics numbered = row_count;
        return numbered;
      end
    $$`);
    this.addSql(`create function "record_changes_page"(
        p_object varchar, p_after bigint, p_limit integer, p_batch integer, p_lock_key integer
      ) returns setof "record_changes" language plpgsql as $$
      begin
        perform "record_changes_sequence"(p_object, p_batch, p_lock_key);
        return query select * from "record_changes"
          where "object" = p_object and "cursor" > p_after order by "cursor" limit p_limit;
      end
    $$`);
  }

  override down(): void {
    this.addSql(`drop function "record_changes_page"(varchar, bigint, integer, integer, integer)`);
    this.addSql(`drop function "record_changes_sequence"(varchar, integer, integer)`);
    this.addSql(`update "record_changes" set "cursor" = nextval('record_changes_cursor_seq') where "cursor" is null`);
    this.addSql(`drop index "record_changes_unsequenced_idx"`);
    this.addSql(`alter table "record_changes" drop constraint "record_changes_pkey"`);
    this.addSql(`alter table "record_changes" drop column "id"`);
    this.addSql(`alter table "record_changes" add constraint "record_changes_pkey" primary key ("cursor")`);
  }
}
