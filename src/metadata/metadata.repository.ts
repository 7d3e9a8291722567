import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { runSql } from '../database/sql';
import { DATA_SCHEMA, objectTable, quoteIdent, searchFold } from '../database/sql-identifier';
import { indexName } from './metadata.naming';
import { fieldTypeOf } from './field-types';
import { FieldMeta, fieldIndex, FieldType } from './object-metadata.types';
import { dropStoredFormulaDdl, StoredGroup, storedFormulaDdl, storedGroupDdl } from './stored-fields';
import { dropLinkTableDdl, linkTableDdl } from './links-fields';
import { linkStoredGroupDdl } from './links-stored';
import { dropLinkChangesDdl, linkChangesDdl } from './links-changes';

export interface ObjectSummary {
  name: string;
  label: string;
  description: string | null;
  fieldCount: number;
}

/**
 * Every SQL statement about metadata: the DDL of object tables and the queries the ORM does not
 * express. Identifiers come from validated metadata names through quoteIdent; values are bound.
 * Each method runs on `em`, so DDL commits or rolls back with the metadata rows of its transaction.
 */
@Injectable()
export class MetadataRepository {
  /** Every object with its number of fields, by name. */
  async summaries(em: EntityManager): Promise<ObjectSummary[]> {
    const rows = await runSql<{ name: string; label: string; description: string | null; field_count: string }>(
      em,
      `select o.name, o.label, o.description, count(f.id) as field_count
         from object_definitions o left join field_definitions f on f.object_id = o.id
        group by o.id order by o.name`,
    );
    return rows.map((r) => ({ name: r.name, label: r.label, description: r.description, fieldCount: Number(r.field_count) }));
  }

  /** Lookup fields of other objects that point at `objectName`, ordered by object and field. */
  async referencingFields(
    em: EntityManager,
    objectName: string,
    objectId: string,
  ): Promise<Array<{ object: string; field: string }>> {
    const rows = await runSql<{ object_name: string; field_name: string }>(
      em,
      `select o.name as object_name, f.name as field_name
         from field_definitions f join object_definitions o on o.id = f.object_id
        where f.type = 'lookup' and f.reference = $1 and o.id <> $2 order by 1, 2`,
      [objectName, objectId],
    );
    return rows.map((r) => ({ object: r.object_name, field: r.field_name }));
  }

  /**
   * In one read: every lookup field that points at `objectName` (its own object's included), and every links
   * field on it or whose target it is (an inverse is one of them too).
   */
  async referringFields(
    em: EntityManager,
    objectName: string,
  ): Promise<Array<{ object: string; field: string; type: 'lookup' | 'links' }>> {
    const rows = await runSql<{ object_name: string; field_name: string; type: 'lookup' | 'links' }>(
      em,
      `select o.name as object_name, f.name as field_name, f.type
         from field_definitions f join object_definitions o on o.id = f.object_id
        where (f.type = 'lookup' and f.reference = $1)
           or (f.type = 'links' and (o.name = $1 or f.computed->>'target' = $1))
        order by 1, 2`,
      [objectName],
    );
    return rows.map((r) => ({ object: r.object_name, field: r.field_name, type: r.type }));
  }

  /** A links field's join table (links-fields.ts). */
  async createLinkTable(
    em: EntityManager,
    table: string,
    source: { object: string; field: string },
    target: { object: string; inverse?: string },
  ): Promise<void> {
    const statements = [
      ...linkTableDdl(table, source.object, target.object),
      ...linkChangesDdl(table, source.object, source.field, target.object, target.inverse),
    ];
    for (const statement of statements) await runSql(em, statement);
  }

  async dropLinkTable(em: EntityManager, table: string): Promise<void> {
    await runSql(em, dropLinkTableDdl(table));
    await runSql(em, dropLinkChangesDdl(table));
  }

  /** The object's table with its system columns. */
  async createTable(em: EntityManager, objectName: string): Promise<void> {
    await runSql(
      em,
      `create table ${objectTable(objectName)} (
         "id" uuid primary key default gen_random_uuid(),
         "created_at" timestamptz not null default now(),
         "updated_at" timestamptz not null default now()
       )`,
    );
  }

  /**
   * Drops the object's table with its records, and its change feed: an object created later under
   * the same name starts a feed of its own, and a cursor of the old one is expired there (410). With
   * changes not numbered yet among them, every cursor given out so far is expired.
   */
  async dropTable(em: EntityManager, objectName: string): Promise<void> {
    await runSql(em, `drop table ${objectTable(objectName)}`);
    await runSql(
      em,
      `with d as (delete from "record_changes" where "object" = $1 returning "cursor")
       insert into "record_change_horizons" ("object", "pruned_through")
       select $1, case when bool_or("cursor" is null) then nextval('record_changes_cursor_seq') else max("cursor") end
       from d having count(*) > 0
       on conflict ("object") do update set "pruned_through" = greatest("record_change_horizons"."pruned_through", excluded."pruned_through")`,
      [objectName],
    );
  }

  /** Adds one field: the column, its foreign key, its indexes. */
  async addColumn(em: EntityManager, objectName: string, field: FieldMeta): Promise<void> {
    const type = fieldTypeOf(field.type).column;
    // A type without a column of its own keeps its values elsewhere (its own tables).
    if (type === undefined) return;
    await runSql(
      em,
      `alter table ${objectTable(objectName)} add column ${quoteIdent(field.name)} ${type}${field.required ? ' not null' : ''}`,
    );
    if (fieldTypeOf(field.type).takes.reference && field.reference) {
      await runSql(
        em,
        `alter table ${objectTable(objectName)} add constraint ${quoteIdent(indexName(objectName, field.name, 'fk'))} ` +
          `foreign key (${quoteIdent(field.name)}) references ${objectTable(field.reference)} ("id") on delete restrict`,
      );
    }
    await this.createIndexes(em, objectName, field);
  }

  /** A group of stored fields' triggers (stored-fields.ts), replacing those it had; none without a field left. */
  async installStoredTriggers(em: EntityManager, group: StoredGroup): Promise<void> {
    for (const statement of this.storedTriggerDdl(group)) await runSql(em, statement);
  }

  /** A stored formula's row trigger (stored-fields.ts), replacing the one it had. */
  async installStoredFormula(em: EntityManager, objectName: string, field: FieldMeta): Promise<void> {
    for (const statement of storedFormulaDdl(objectName, field)) await runSql(em, statement);
  }

  async dropStoredFormula(em: EntityManager, objectName: string, fieldName: string): Promise<void> {
    for (const statement of dropStoredFormulaDdl(objectName, fieldName)) await runSql(em, statement);
  }

  /** The DDL of a group of stored fields: over a lookup (stored-fields.ts) or a links field (links-stored.ts). */
  storedTriggerDdl(group: StoredGroup): string[] {
    return group.link ? linkStoredGroupDdl(group) : storedGroupDdl(group);
  }

  /**
   * What the database holds of stored-field triggers: the body of each of `functions` that exists (in the data
   * schema), and which of `triggers` exist.
   */
  async storedTriggerState(
    em: EntityManager,
    functions: string[],
    triggers: string[],
  ): Promise<{ bodies: Map<string, string>; triggers: Set<string> }> {
    const bodies = await runSql<{ name: string; body: string }>(
      em,
      `select p.proname as "name", p.prosrc as "body" from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = $1 and p.proname = any($2)`,
      [DATA_SCHEMA, functions],
    );
    const found = await runSql<{ name: string }>(
      em,
      `select t.tgname as "name" from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = $1 and not t.tgisinternal and t.tgname = any($2)`,
      [DATA_SCHEMA, triggers],
    );
    return { bodies: new Map(bodies.map((r) => [r.name, r.body])), triggers: new Set(found.map((r) => r.name)) };
  }

  /** Holds off the table's writers until this transaction ends (what creating its triggers takes anyway). */
  async lockForTriggers(em: EntityManager, objectName: string): Promise<void> {
    await runSql(em, `lock table ${objectTable(objectName)} in share row exclusive mode`);
  }

  /** Drops a field's column (its indexes and foreign key go with it). */
  async dropColumn(em: EntityManager, objectName: string, fieldName: string): Promise<void> {
    await runSql(em, `alter table ${objectTable(objectName)} drop column ${quoteIdent(fieldName)}`);
    // The feed reads its snapshots back as rows of the table: an old value must not meet a new field of that name.
    await runSql(
      em,
      `update "record_changes" set "record" = "record" - $2, "changed_fields" = array_remove("changed_fields", $2)
       where "object" = $1 and jsonb_exists("record", $2)`,
      [objectName, fieldName],
    );
  }

  /** Adds or drops the column's NOT NULL. */
  async setRequired(em: EntityManager, objectName: string, fieldName: string, required: boolean): Promise<void> {
    await runSql(
      em,
      `alter table ${objectTable(objectName)} alter column ${quoteIdent(fieldName)} ${required ? 'set' : 'drop'} not null`,
    );
  }

  /**
   * The field's indexes (see fieldIndex). A B-tree on (field, id) is the records API's order by the
   * field (id breaks ties), so that a page, first or after a cursor, reads only its own rows at any
   * depth, ties and empty values included. A unique field's index is on the field alone (it has no
   * ties) but its empty rows are many ties: a partial index on (field, id) over them reads those in
   * order too.
   */
  async createIndexes(em: EntityManager, objectName: string, field: FieldMeta): Promise<void> {
    const column = quoteIdent(field.name);
    const table = objectTable(objectName);
    switch (fieldIndex(field)) {
      case 'unique':
        await runSql(em, `create unique index ${quoteIdent(indexName(objectName, field.name, 'key'))} on ${table} (${column})`);
        await runSql(
          em,
          `create index ${quoteIdent(indexName(objectName, field.name, 'nul'))} on ${table} (${column}, "id") where ${column} is null`,
        );
        break;
      case 'field-id':
        await runSql(em, `create index ${quoteIdent(indexName(objectName, field.name, 'idx'))} on ${table} (${column}, "id")`);
        break;
      case 'gin':
        await runSql(
          em,
          `create index ${quoteIdent(indexName(objectName, field.name, 'idx'))} on ${table} using gin (${column})`,
        );
        break;
    }
  }

  /** The trigram index `?q=` searches through: over the folded text (searchFold), so ILIKE on it can use it. */
  async createSearchIndex(em: EntityManager, objectName: string, fieldName: string): Promise<void> {
    await runSql(
      em,
      `create index ${quoteIdent(indexName(objectName, fieldName, 'trg'))} on ${objectTable(objectName)} using gin (${searchFold(quoteIdent(fieldName))} gin_trgm_ops)`,
    );
  }

  async dropSearchIndex(em: EntityManager, objectName: string, fieldName: string): Promise<void> {
    await runSql(em, `drop index if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(indexName(objectName, fieldName, 'trg'))}`);
  }

  /** Drops the field's unique, empty-rows and plain index, whichever exist. */
  async dropIndexes(em: EntityManager, objectName: string, fieldName: string): Promise<void> {
    for (const kind of ['key', 'nul', 'idx'] as const) {
      await runSql(em, `drop index if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(indexName(objectName, fieldName, kind))}`);
    }
  }

  /** True when the object's table has no records. */
  async isEmpty(em: EntityManager, objectName: string): Promise<boolean> {
    return (await runSql(em, `select 1 from ${objectTable(objectName)} limit 1`)).length === 0;
  }

  /** True when some record has no value in `fieldName` (a column known to metadata). */
  async hasNulls(em: EntityManager, objectName: string, fieldName: string): Promise<boolean> {
    return (
      (await runSql(em, `select 1 from ${objectTable(objectName)} where ${quoteIdent(fieldName)} is null limit 1`)).length > 0
    );
  }

  /** True when some record holds a value (a multiselect: an option) longer than `maxBytes` of UTF-8 in `fieldName`. */
  async hasValueLongerThan(
    em: EntityManager,
    objectName: string,
    field: { name: string; type: FieldType },
    maxBytes: number,
  ): Promise<boolean> {
    const column = quoteIdent(field.name);
    const sql =
      fieldTypeOf(field.type).shape === 'set'
        ? `select 1 from ${objectTable(objectName)} t, unnest(t.${column}) as o(option) where octet_length(o.option) > $1 limit 1`
        : `select 1 from ${objectTable(objectName)} t where octet_length(t.${column}) > $1 limit 1`;
    return (await runSql(em, sql, [maxBytes])).length > 0;
  }

  /** How many records hold each of `options` in a select (text) or multiselect (text[]) column; unused ones are absent. */
  async optionUse(
    em: EntityManager,
    objectName: string,
    field: { name: string; type: FieldType },
    options: string[],
  ): Promise<Record<string, number>> {
    const column = quoteIdent(field.name);
    const sql =
      fieldTypeOf(field.type).shape === 'set'
        ? `select o.option, count(*) as n from ${objectTable(objectName)} t, unnest(t.${column}) as o(option)
            where o.option = any($1::text[]) group by o.option`
        : `select t.${column} as option, count(*) as n from ${objectTable(objectName)} t where t.${column} = any($1::text[]) group by 1`;
    const rows = await runSql<{ option: string; n: string }>(em, sql, [options]);
    return Object.fromEntries(rows.map((r) => [r.option, Number(r.n)]));
  }
}
