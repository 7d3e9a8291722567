import { createHash, randomBytes } from 'node:crypto';
import { DATA_SCHEMA, objectTable, quoteIdent } from '../database/sql-identifier';
import { storedFormulaSql, storedValueSql, whereFieldNames } from './computed-fields';
import type { FieldMeta, LinkTable, ObjectMeta } from './object-metadata.types';

/**
 * Stored rollup and count fields (`stored: true`): the value is a column of the parent object (the one the
 * field is defined on), kept up to date by triggers on the related (child) object's table, generated from
 * metadata. The stored fields of one parent over one lookup of one child object share one set of triggers (a
 * group: one lock, one recompute and one change per parent for all of them); it is rebuilt whenever a field
 * joins or leaves the group, and dropped with its last field. Every write of a child (API, batch, import, delete,
 * restore from the trash) goes through them, in the writer's own transaction.
 *
 * A BEFORE INSERT row trigger on the parent's table gives a new parent (a create, an import, a restore from
 * the trash) its value. Three statement-level AFTER triggers (insert, update, delete; transition tables, so one run per statement
 * however many rows it wrote) collect the parents the statement touched: the lookup's value of each new and
 * old row (a move touches both parents); an update counts only when the lookup, the rolled-up field or a
 * field of the filter changed. For those parents, in order of id:
 *
 * 1. `select ... for no key update` locks them, in its own statement;
 * 2. a NEW statement recomputes each value over the related rows and writes those that changed.
 *
 * Why this is safe with concurrent writers of one parent (no lost update): under READ COMMITTED each
 * statement of a plpgsql function takes a fresh snapshot. Two writers of children of parent P both reach
 * step 1; one waits for the other's lock until it commits, and its step 2 then sees the other's committed
 * children as well as its own. A delta update (`set total = total + new.amount`) would be as safe but must
 * be right for every function (min, max, avg, count_distinct, concat cannot be kept by deltas); recomputing
 * is one index scan of the parent's children, and is exact by construction.
 *
 * `for no key update` and not `for update`: inserting a child takes a `for key share` lock on its parent (the
 * lookup's foreign key); `for update` would wait for every other writer's key share and two writers of one
 * parent would deadlock. Parents are locked in order of id, by the fill job too, so lockers never cross.
 *
 * The change feed: each parent whose values changed gets one `update` change (changed_fields = the fields
 * whose value changed, `before` their old values) in the same transaction, under the change set and key of the child's change that
 * the same statement appended (withChangeOutbox writes it before the triggers run; the child row is locked
 * by this transaction, so the newest change of it is this statement's). A write without a change of its own
 * (none today) gives a change without a set or key.
 */

/** The stored fields of `self` over one lookup (`via`) of one related object: what one set of triggers keeps. */
export interface StoredGroup {
  self: string;
  target: ObjectMeta;
  via: string;
  fields: FieldMeta[];
  /** A group over a links field (`via`): its join table, whose writes the triggers follow (links-stored.ts). */
  link?: LinkTable;
}

/** The group a stored field belongs to among `fields` (the parent's fields, the field itself included or not). */
export function storedGroupOf(self: string, field: FieldMeta, fields: FieldMeta[], target: ObjectMeta): StoredGroup {
  const meta = field.related!;
  const members = fields.filter(
    (f) => f.related?.stored && f.related.target === meta.target && f.related.via === meta.via && f.name !== field.name,
  );
  const group: StoredGroup = { self, target, via: meta.via, fields: [...members, field] };
  if (meta.link) group.link = meta.link;
  return group;
}

/** The names of a group's functions and triggers (short: Postgres names are at most 63 bytes). */
export function storedNames(
  self: string,
  target: string,
  via: string,
): { fn: string; insert: string; update: string; del: string; parentFn: string; parent: string } {
  const hash = createHash('sha1').update(`stored:${self}<-${target}.${via}`).digest('hex').slice(0, 12);
  return {
    fn: `stored_${hash}`,
    insert: `stored_${hash}_ins`,
    update: `stored_${hash}_upd`,
    del: `stored_${hash}_del`,
    parentFn: `stored_${hash}_new`,
    parent: `stored_${hash}_new`,
  };
}

/** The child columns whose change can change a value of the group: the lookup, the rolled-up fields, the filters' fields. */
export function storedInputColumns(fields: FieldMeta[]): string[] {
  return [
    ...new Set(
      fields.flatMap((field) => {
        const meta = field.related!;
        return [meta.via, ...(meta.field ? [meta.field] : []), ...whereFieldNames(meta.filter)];
      }),
    ),
  ];
}

/**
 * The statement that recomputes `fields` of the parents whose ids are in `ids` (a uuid[] expression) and writes
 * those whose values changed; each written row carries `"__o<i>"`, the old value of field i.
 */
export function recomputeSql(self: string, fields: FieldMeta[], target: ObjectMeta, ids: string): string {
  const columns = fields.map((f) => quoteIdent(f.name));
  const values = fields.map((f) => storedValueSql(f, target, '"__p"'));
  const computed = columns.map((c, i) => `"__p".${c} as "__o${i}", ${values[i]} as "__v${i}"`).join(', ');
  return (
    `update ${objectTable(self)} as "__t" set ${columns.map((c, i) => `${c} = "__x"."__v${i}"`).join(', ')} ` +
    `from (select "__p"."id", ${computed} from ${objectTable(self)} as "__p" where "__p"."id" = any(${ids})) as "__x" ` +
    `where "__t"."id" = "__x"."id" and row(${columns.map((c) => `"__t".${c}`).join(', ')}) is distinct from ` +
    `row(${columns.map((_c, i) => `"__x"."__v${i}"`).join(', ')})`
  );
}

const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;

/**
 * How every statement trigger of stored fields begins (over a lookup here, through links in links-stored.ts): the
 * parents to recompute, the rows that made them change, and the change set and key their changes are logged under.
 */
export const STORED_TRIGGER_DECLARE = `
declare
  parents uuid[];
  children uuid[];
  set_id uuid;
  set_key text;
begin`;

/** Whether any of `inputs` (quoted columns) differs between the old row `o` and the new row `n` of an update. */
export function rowChangedSql(inputs: readonly string[]): string {
  return `row(${inputs.map((c) => `o.${c}`).join(', ')}) is distinct from row(${inputs.map((c) => `n.${c}`).join(', ')})`;
}

/** The DDL that installs (or replaces) a group's functions and triggers; with no field left, drops them. */
export function storedGroupDdl(group: StoredGroup): string[] {
  const { self, target, via: viaName, fields } = group;
  if (!fields.length) return dropStoredGroupDdl(self, target.name, viaName);
  const names = storedNames(self, target.name, viaName);
  const via = quoteIdent(viaName);
  const fn = `${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.fn)}`;
  const childTable = objectTable(target.name);
  const parentTable = objectTable(self);
  const inputs = storedInputColumns(fields).map(quoteIdent);
  const changed = rowChangedSql(inputs);
  const body = `${STORED_TRIGGER_DECLARE}
  if TG_OP = 'INSERT' then
    select array_agg(distinct n.${via} order by n.${via}), array_agg(n."id") into parents, children from new_rows n where n.${via} is not null;
  elsif TG_OP = 'DELETE' then
    select array_agg(distinct o.${via} order by o.${via}), array_agg(o."id") into parents, children from old_rows o where o.${via} is not null;
  else
    select array_agg(distinct p order by p), array_agg(distinct c) into parents, children from (
      select unnest(array[o.${via}, n.${via}]) as p, n."id" as c
      from old_rows o join new_rows n on n."id" = o."id"
      where ${changed}
    ) moved where p is not null;
  end if;
  if parents is null then
    return null;
  end if;
  -- 1. Lock the parents (in order of id), in a statement of its own.
  perform 1 from ${parentTable} where "id" = any(parents) order by "id" for no key update;
  -- 2. A new statement, so a fresh snapshot: every child committed before the lock was granted is counted.
  select c."change_set_id", c."key_id" into set_id, set_key from "record_changes" c
    where c."object" = ${literal(target.name)} and c."record_id" = any(children) order by c."id" desc limit 1;
  ${recomputeParentsSql(self, fields, target)};
  return null;
end`;
  return [
    ...dropStoredGroupDdl(self, target.name, viaName),
    `create function ${fn}() returns trigger language plpgsql volatile as ${dollarQuoted(body)}`,
    ...parentTriggerDdl(group),
    `create trigger ${quoteIdent(names.insert)} after insert on ${childTable} referencing new table as new_rows for each statement execute function ${fn}()`,
    `create trigger ${quoteIdent(names.update)} after update on ${childTable} referencing old table as old_rows new table as new_rows for each statement execute function ${fn}()`,
    `create trigger ${quoteIdent(names.del)} after delete on ${childTable} referencing old table as old_rows for each statement execute function ${fn}()`,
  ];
}

/**
 * The statement of a trigger function that recomputes the group's `fields` of the parents in the plpgsql variable
 * `parents` (locked already) and appends an `update` change of each one whose values changed (`set_id`, `set_key`).
 */
export function recomputeParentsSql(self: string, fields: FieldMeta[], target: ObjectMeta): string {
  const differs = (i: number) => `w."__o${i}" is distinct from w.${quoteIdent(fields[i].name)}`;
  const changedFields = `array_remove(array[${fields.map((f, i) => `case when ${differs(i)} then ${literal(f.name)} end`).join(', ')}]::text[], null)`;
  const unchanged = `array_remove(array[${fields.map((f, i) => `case when not (${differs(i)}) then ${literal(f.name)} end`).join(', ')}]::text[], null)`;
  const before = `jsonb_build_object(${fields.map((f, i) => `${literal(f.name)}, w."__o${i}"`).join(', ')}) - ${unchanged}`;
  const helperColumns = `array[${fields.map((_f, i) => `'__o${i}'`).join(', ')}]::text[]`;
  return `with "__w" as (${recomputeSql(self, fields, target, 'parents')} returning "__t".*, ${fields.map((_f, i) => `"__x"."__o${i}"`).join(', ')})
  insert into "record_changes" ("object", "op", "record_id", "changed_fields", "record", "key_id", "change_set_id", "before")
  select ${literal(self)}, 'update', w."id", ${changedFields}, to_jsonb(w) - ${helperColumns}, set_key, set_id, ${before}
  from "__w" w order by w."id"`;
}

/**
 * A parent written as a new row (a create, a restore from the trash, an import) gets its values as it is
 * written: its related records may have changed since a snapshot of it was taken.
 */
export function parentTriggerDdl(group: StoredGroup): string[] {
  const { self, target, fields } = group;
  const names = storedNames(self, target.name, group.via);
  const parentFn = `${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.parentFn)}`;
  const parentBody = `
begin
  select ${fields.map((f) => storedValueSql(f, target, '"__p"')).join(', ')}
    into ${fields.map((f) => `NEW.${quoteIdent(f.name)}`).join(', ')} from (select NEW."id" as "id") as "__p";
  return NEW;
end`;
  return [
    `create function ${parentFn}() returns trigger language plpgsql volatile as ${dollarQuoted(parentBody)}`,
    `create trigger ${quoteIdent(names.parent)} before insert on ${objectTable(self)} for each row execute function ${parentFn}()`,
  ];
}

/** The DDL that drops a group's triggers and functions. */
export function dropStoredGroupDdl(self: string, targetName: string, via: string): string[] {
  const names = storedNames(self, targetName, via);
  const childTable = objectTable(targetName);
  return [
    `drop trigger if exists ${quoteIdent(names.insert)} on ${childTable}`,
    `drop trigger if exists ${quoteIdent(names.update)} on ${childTable}`,
    `drop trigger if exists ${quoteIdent(names.del)} on ${childTable}`,
    `drop trigger if exists ${quoteIdent(names.parent)} on ${objectTable(self)}`,
    `drop function if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.fn)}()`,
    `drop function if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.parentFn)}()`,
  ];
}

/**
 * A function body in dollar quotes whose tag the body does not contain: a filter value of the definition is written
 * into the body as a literal, and one holding a fixed tag (`$stored$`) would end the body early.
 */
export function dollarQuoted(body: string): string {
  for (;;) {
    const tag = `$stored_${randomBytes(6).toString('hex')}$`;
    if (!body.includes(tag)) return `${tag}${body}${tag}`;
  }
}

/**
 * What a group's DDL (storedGroupDdl, or links-stored.ts's for a group over a links field) leaves in the
 * database: the body of each function it creates, by name, and the names of the triggers it creates. A boot
 * compares them with pg_proc and pg_trigger (MetadataService.repairStoredTriggers).
 */
export function storedDdlExpectations(statements: string[]): { bodies: Map<string, string>; triggers: string[] } {
  const bodies = new Map<string, string>();
  const triggers: string[] = [];
  for (const statement of statements) {
    const fn = /^create function "[^"]+"\."([^"]+)"\(\) [^$]* as (\$stored_[0-9a-f]+\$)([\s\S]*)\2$/.exec(statement);
    if (fn) bodies.set(fn[1], fn[3]);
    const trigger = /^create trigger "([^"]+)"/.exec(statement);
    if (trigger) triggers.push(trigger[1]);
  }
  return { bodies, triggers };
}

/** The names of a stored formula's function and trigger (one each: the row trigger that sets its column). */
export function storedFormulaNames(self: string, field: string): { fn: string; trigger: string } {
  const hash = createHash('sha1').update(`stored:${self}.${field}=formula`).digest('hex').slice(0, 12);
  return { fn: `stored_${hash}_f`, trigger: `stored_${hash}_f` };
}

/**
 * A stored formula (FormulaMeta.stored): a BEFORE INSERT OR UPDATE row trigger sets its column from the row
 * being written, so every write (API, batch, import, restore, a revert) stores the value in its own statement;
 * it reads only the record's own plain fields, so no other write can change it.
 */
export function storedFormulaDdl(self: string, field: FieldMeta): string[] {
  const names = storedFormulaNames(self, field.name);
  const fn = `${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.fn)}`;
  const body = `
begin
  NEW.${quoteIdent(field.name)} := (select ${storedFormulaSql(field, '"__p"')} from (select NEW.*) as "__p");
  return NEW;
end`;
  return [
    ...dropStoredFormulaDdl(self, field.name),
    `create function ${fn}() returns trigger language plpgsql volatile as ${dollarQuoted(body)}`,
    `create trigger ${quoteIdent(names.trigger)} before insert or update on ${objectTable(self)} for each row execute function ${fn}()`,
  ];
}

export function dropStoredFormulaDdl(self: string, fieldName: string): string[] {
  const names = storedFormulaNames(self, fieldName);
  return [
    `drop trigger if exists ${quoteIdent(names.trigger)} on ${objectTable(self)}`,
    `drop function if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(names.fn)}()`,
  ];
}

/** The statement that stores a formula's value in the records of `ids` (a uuid[] expression) whose value differs. */
export function recomputeFormulaSql(self: string, field: FieldMeta, ids: string): string {
  const column = quoteIdent(field.name);
  const value = storedFormulaSql(field, '"__t"');
  return (
    `update ${objectTable(self)} as "__t" set ${column} = ${value} ` +
    `where "__t"."id" = any(${ids}) and "__t".${column} is distinct from ${value}`
  );
}
