import { randomUUID } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { objectTable, quoteIdent } from '../database/sql-identifier';
import { assertValidName } from './metadata.naming';
import type { FieldMeta, LinkTable, ObjectMeta, RelatedMeta } from './object-metadata.types';

/**
 * `links` fields: many to many between two objects (or an object and itself), one join table per link in the
 * schema LINKS_SCHEMA with a row per linked pair. The field is a computed kind (computed-fields.ts): it has no
 * column, its value (an array of the linked records' ids, the join rows' order) is one SQL subquery over the
 * caller's view of the target object, so a target the caller may not read hides the field and a row filter on
 * the target hides the links to rows outside it. With `inverse`, the target object gets a links field of that
 * name reading the same join table the other way. Writes (array set, `$add`, `$remove`) are the data engine's
 * (data/links.write.ts). A rollup or count may have a links field of its own object as its `relation`.
 */

/** Schema of the join tables (created by its migration), apart from the one table per object of `data`. */
export const LINKS_SCHEMA = 'data_links';

/** Type the value of a links field reads as: a set of values (ids as text), filtered with multiselect's operators. */
export const LINKS_VALUE_TYPE = 'multiselect' as const;

/** `"data_links"."<table>"`. */
export function linkTableSql(table: string): string {
  return `${quoteIdent(LINKS_SCHEMA)}.${quoteIdent(table)}`;
}

/** A new join table's name: unique, whatever the names of the objects and fields (which may be long). */
export function newLinkTableName(): string {
  return `l_${randomUUID().replace(/-/g, '')}`;
}

/** The side of a new link defined on its source object, and the side its inverse reads. */
export function linkSides(table: string): { source: LinkTable; inverse: LinkTable } {
  return {
    source: { table, selfColumn: 'source_id', targetColumn: 'target_id' },
    inverse: { table, selfColumn: 'target_id', targetColumn: 'source_id' },
  };
}

/**
 * The join table: one row per pair, removed with either record (a deleted record has no links), `seq` the
 * order links were made in (the value's order). The second index serves the inverse side and the target's
 * deletes.
 */
export function linkTableDdl(table: string, source: string, target: string): string[] {
  const name = linkTableSql(table);
  return [
    `create table ${name} (
       "source_id" uuid not null references ${objectTable(source)} ("id") on delete cascade,
       "target_id" uuid not null references ${objectTable(target)} ("id") on delete cascade,
       "seq" bigint generated always as identity,
       primary key ("source_id", "target_id")
     )`,
    `create index ${quoteIdent(`${table}_target`)} on ${name} ("target_id", "source_id")`,
  ];
}

export function dropLinkTableDdl(table: string): string {
  return `drop table if exists ${linkTableSql(table)}`;
}

/** The definition of a links field as written. */
export interface LinksDefinition {
  name: string;
  reference?: string;
  inverse?: string;
}

/** A links definition checked against its target (`ctx.load`): the target, the table and its inverse's name. */
export async function defineLinks(
  def: LinksDefinition,
  self: ObjectMeta,
  load: (name: string) => Promise<ObjectMeta | undefined>,
): Promise<{ target: ObjectMeta; link: LinkTable; inverse?: string }> {
  if (typeof def.reference !== 'string' || !def.reference) {
    throw new DomainError('missing_reference', `Links field "${def.name}" needs a reference object`, { field: def.name });
  }
  const target = def.reference === self.name ? self : await load(def.reference);
  if (!target) {
    throw new DomainError('unknown_reference', `Links field "${def.name}" references "${def.reference}", which does not exist`, {
      field: def.name,
      reference: def.reference,
    });
  }
  if (def.inverse !== undefined) {
    assertValidName('field', def.inverse);
    const taken = target.fields.some((f) => f.name === def.inverse) || (target.name === self.name && def.inverse === def.name);
    if (taken) {
      throw new DomainError(
        'invalid_inverse',
        `"${def.inverse}" is already a field of "${target.name}"; choose another name for the inverse of "${def.name}"`,
        { field: def.name, inverse: def.inverse, object: target.name },
      );
    }
  }
  return { target, link: linkSides(newLinkTableName()).source, inverse: def.inverse };
}

/** The parts of a subquery over the target (RelatedSqlParts of computed-fields.ts) a link's SQL needs. */
interface LinkSqlParts {
  from: string;
  alias: string;
  outer(column: string): string;
  inner(column: string): string;
  conditions: string[];
}

/** The join table's alias inside the subquery over the target aliased `alias` (unique as that one is). */
function joinAlias(parts: LinkSqlParts): string {
  return quoteIdent(`${parts.alias}j`);
}

/**
 * The value of a links field: the ids of the linked target records the caller may read (its row filter among
 * `conditions`), as text in the order they were linked; an empty array without any.
 */
export function linksValueSql(meta: RelatedMeta, parts: LinkSqlParts): string {
  const link = meta.link!;
  const j = joinAlias(parts);
  const where = [`${j}.${quoteIdent(link.selfColumn)} = ${parts.outer('id')}`, ...parts.conditions].join(' and ');
  return (
    `(select coalesce(array_agg(${parts.inner('id')}::text order by ${j}."seq", ${parts.inner('id')}), '{}'::text[]) ` +
    `from ${linkTableSql(link.table)} as ${j} join ${parts.from} on ${parts.inner('id')} = ${j}.${quoteIdent(link.targetColumn)} ` +
    `where ${where})`
  );
}

/** The target record (aliased inside the subquery) is linked to the outer record: a rollup's or count's relation through links. */
export function linkedCondition(meta: RelatedMeta, parts: LinkSqlParts): string {
  const link = meta.link!;
  const j = joinAlias(parts);
  return (
    `exists (select from ${linkTableSql(link.table)} as ${j} where ${j}.${quoteIdent(link.selfColumn)} = ${parts.outer('id')} ` +
    `and ${j}.${quoteIdent(link.targetColumn)} = ${parts.inner('id')})`
  );
}

/** Whether a field is a links field. */
export function isLinks(field: Pick<FieldMeta, 'related'>): boolean {
  return field.related?.kind === 'links';
}

/** The type a field is named by in messages: `links` for a links field (whose values read as a multiselect of ids). */
export function typeName(field: Pick<FieldMeta, 'type' | 'related'>): string {
  return field.related?.kind === 'links' ? 'links' : field.type;
}
