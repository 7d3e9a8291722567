import { objectTable, quoteIdent } from '../database/sql-identifier';
import { LINKS_SCHEMA, linkTableSql } from './links-fields';
import { dollarQuoted } from './stored-fields';

/**
 * The change feed of links: a link made or removed changes the links field of the record on each side that has
 * one (the source's field; the target's when it has an inverse), so each such record gets an `update` change
 * naming its field. Statement triggers on the join table append them, whatever removed or made the link: a links
 * write (data/links.write.ts, whose own record's change its update statement already appended: that record is
 * skipped) or a record's delete cascading to its links (the deleted record is gone; the records it was linked to
 * get their change).
 *
 * The change set and key: those of the links write (set for its transaction), else those of the newest change of
 * the records on either side (a delete appends its own before the cascade runs).
 */

/** Settings a links write sets for its transaction, read by the join tables' triggers. */
export const LINK_SETTINGS = {
  changeSet: 'data_copilot.link_change_set',
  key: 'data_copilot.link_key',
  record: 'data_copilot.link_record',
} as const;

const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;

/** The function and triggers of a new join table between `source` (field `field`) and `target` (field `inverse`, if any). */
export function linkChangesDdl(table: string, source: string, field: string, target: string, inverse?: string): string[] {
  const fn = `${quoteIdent(LINKS_SCHEMA)}.${quoteIdent(`${table}_changes`)}`;
  const append = (object: string, name: string, ids: string) =>
    `insert into "record_changes" ("object", "op", "record_id", "changed_fields", "record", "key_id", "change_set_id", "before")
    select ${literal(object)}, 'update', r."id", array[${literal(name)}]::text[], to_jsonb(r), set_key, set_id, null
    from ${objectTable(object)} r where r."id" = any(${ids}) and r."id" is distinct from written order by r."id";`;
  const body = `
declare
  sources uuid[];
  targets uuid[];
  written uuid;
  set_id uuid;
  set_key text;
begin
  if TG_OP = 'INSERT' then
    select array_agg(distinct n."source_id"), array_agg(distinct n."target_id") into sources, targets from new_rows n;
  else
    select array_agg(distinct o."source_id"), array_agg(distinct o."target_id") into sources, targets from old_rows o;
  end if;
  if sources is null then
    return null;
  end if;
  written := nullif(current_setting(${literal(LINK_SETTINGS.record)}, true), '')::uuid;
  set_id := nullif(current_setting(${literal(LINK_SETTINGS.changeSet)}, true), '')::uuid;
  set_key := nullif(current_setting(${literal(LINK_SETTINGS.key)}, true), '');
  if set_id is null then
    select c."change_set_id", c."key_id" into set_id, set_key from "record_changes" c
      where (c."object" = ${literal(source)} and c."record_id" = any(sources))
         or (c."object" = ${literal(target)} and c."record_id" = any(targets))
      order by c."id" desc limit 1;
  end if;
  ${append(source, field, 'sources')}
  ${inverse ? append(target, inverse, 'targets') : ''}
  return null;
end`;
  const name = linkTableSql(table);
  return [
    `create function ${fn}() returns trigger language plpgsql volatile as ${dollarQuoted(body)}`,
    `create trigger ${quoteIdent(`${table}_ins`)} after insert on ${name} referencing new table as new_rows for each statement execute function ${fn}()`,
    `create trigger ${quoteIdent(`${table}_del`)} after delete on ${name} referencing old table as old_rows for each statement execute function ${fn}()`,
  ];
}

/** Drops the function of a join table being dropped (its triggers go with the table). */
export function dropLinkChangesDdl(table: string): string {
  return `drop function if exists ${quoteIdent(LINKS_SCHEMA)}.${quoteIdent(`${table}_changes`)}()`;
}
