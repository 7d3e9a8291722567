import { DATA_SCHEMA, objectTable, quoteIdent } from '../database/sql-identifier';
import { whereFieldNames } from './computed-fields';
import { LINK_SETTINGS } from './links-changes';
import { linkTableSql } from './links-fields';
import type { FieldMeta } from './object-metadata.types';
import {
  dollarQuoted,
  parentTriggerDdl,
  recomputeParentsSql,
  rowChangedSql,
  STORED_TRIGGER_DECLARE,
  type StoredGroup,
  storedNames,
} from './stored-fields';

/**
 * Stored rollups and counts through a links field (`stored: true`, `relation` a links field): kept up to date as
 * stored-fields.ts keeps those over a lookup (lock the parents in order of id, then recompute them in a new
 * statement, one `update` change per parent whose values changed), by statement triggers on
 *
 * - the join table (a link made or removed, by a links write or by a record's delete cascading to its links):
 *   the parents are the pairs' records on this side;
 * - the target's table, on update of a rolled-up field or a field of a filter: the parents are the records linked
 *   to the updated ones. A target's insert has no links yet; its delete removes its links (the join table's trigger).
 *
 * The change set and key of the parents' changes: those of the links write (LINK_SETTINGS, set for its
 * transaction), else of the newest change of the records on either side of the pairs (a delete, appended by its
 * own statement before the cascade).
 */

const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;

/**
 * The target's columns whose change can change a value of stored `fields` through links (one group's, or any):
 * the rolled-up fields and the filters' fields. Its update trigger follows them, and so do the locks a write of
 * a target record takes first (data/links.write.ts).
 */
export function linkStoredInputColumns(fields: readonly FieldMeta[]): string[] {
  const names = fields.flatMap((field) => {
    const meta = field.related!;
    return [...(meta.field ? [meta.field] : []), ...whereFieldNames(meta.filter)];
  });
  return [...new Set(names)];
}

/** The DDL that installs (or replaces) a links group's functions and triggers; with no field left, drops them. */
export function linkStoredGroupDdl(group: StoredGroup): string[] {
  const { self, target, fields } = group;
  const link = group.link!;
  const drop = dropLinkStoredGroupDdl(group);
  if (!fields.length) return drop;
  const names = storedNames(self, target.name, group.via);
  const fn = `${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.fn)}`;
  const join = linkTableSql(link.table);
  const selfColumn = quoteIdent(link.selfColumn);
  const targetColumn = quoteIdent(link.targetColumn);
  const inputs = linkStoredInputColumns(group.fields).map(quoteIdent);
  const changed = inputs.length ? rowChangedSql(inputs) : 'false';
  const body = `${STORED_TRIGGER_DECLARE}
  if TG_ARGV[0] = 'target' then
    select array_agg(n."id") into children from old_rows o join new_rows n on n."id" = o."id" where ${changed};
    if children is null then
      return null;
    end if;
    select array_agg(distinct j.${selfColumn} order by j.${selfColumn}) into parents from ${join} j where j.${targetColumn} = any(children);
  elsif TG_OP = 'INSERT' then
    select array_agg(distinct n.${selfColumn} order by n.${selfColumn}), array_agg(n.${targetColumn}) into parents, children from new_rows n;
  else
    select array_agg(distinct o.${selfColumn} order by o.${selfColumn}), array_agg(o.${targetColumn}) into parents, children from old_rows o;
  end if;
  if parents is null then
    return null;
  end if;
  perform 1 from ${objectTable(self)} where "id" = any(parents) order by "id" for no key update;
  set_id := nullif(current_setting(${literal(LINK_SETTINGS.changeSet)}, true), '')::uuid;
  set_key := nullif(current_setting(${literal(LINK_SETTINGS.key)}, true), '');
  if set_id is null or TG_ARGV[0] = 'target' then
    select c."change_set_id", c."key_id" into set_id, set_key from "record_changes" c
      where (c."object" = ${literal(target.name)} and c."record_id" = any(children))
         or (TG_ARGV[0] = 'join' and c."object" = ${literal(self)} and c."record_id" = any(parents))
      order by c."id" desc limit 1;
  end if;
  ${recomputeParentsSql(self, fields, target)};
  return null;
end`;
  const statements = [
    ...drop,
    `create function ${fn}() returns trigger language plpgsql volatile as ${dollarQuoted(body)}`,
    ...parentTriggerDdl(group),
    `create trigger ${quoteIdent(names.insert)} after insert on ${join} referencing new table as new_rows for each statement execute function ${fn}('join')`,
    `create trigger ${quoteIdent(names.del)} after delete on ${join} referencing old table as old_rows for each statement execute function ${fn}('join')`,
  ];
  if (inputs.length) {
    statements.push(
      `create trigger ${quoteIdent(names.update)} after update on ${objectTable(target.name)} referencing old table as old_rows new table as new_rows for each statement execute function ${fn}('target')`,
    );
  }
  return statements;
}

/** Drops a links group's triggers and functions (those on a join table already dropped go with it). */
function dropLinkStoredGroupDdl(group: StoredGroup): string[] {
  const { self, target } = group;
  const names = storedNames(self, target.name, group.via);
  const join = linkTableSql(group.link!.table);
  return [
    `drop trigger if exists ${quoteIdent(names.insert)} on ${join}`,
    `drop trigger if exists ${quoteIdent(names.del)} on ${join}`,
    `drop trigger if exists ${quoteIdent(names.update)} on ${objectTable(target.name)}`,
    `drop trigger if exists ${quoteIdent(names.parent)} on ${objectTable(self)}`,
    `drop function if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.fn)}()`,
    `drop function if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.parentFn)}()`,
  ];
}
