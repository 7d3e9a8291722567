import { DATA_SCHEMA, objectTable, quoteIdent } from '../database/sql-identifier';
import { FIELD_COLUMN_TYPES, FieldMeta, FieldType } from './object-metadata.types';
import { indexName } from './metadata.naming';

/**
 * DDL for object tables. Every statement is built from validated metadata names through
 * quoteIdent; nothing here takes user values.
 */
export const ObjectTableDdl = {
  createTable(objectName: string): string {
    return `create table ${objectTable(objectName)} (
      "id" uuid primary key default gen_random_uuid(),
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now()
    )`;
  },

  dropTable(objectName: string): string {
    return `drop table ${objectTable(objectName)}`;
  },

  /** Statements that add one field: the column, its foreign key, its indexes. */
  addField(objectName: string, field: FieldMeta): string[] {
    const type = FIELD_COLUMN_TYPES[field.type as FieldType];
    const statements = [
      `alter table ${objectTable(objectName)} add column ${quoteIdent(field.name)} ${type}${field.required ? ' not null' : ''}`,
    ];
    if (field.type === 'lookup' && field.reference) {
      statements.push(
        `alter table ${objectTable(objectName)} add constraint ${quoteIdent(indexName(objectName, field.name, 'fk'))} ` +
          `foreign key (${quoteIdent(field.name)}) references ${objectTable(field.reference)} ("id") on delete restrict`,
      );
    }
    return [...statements, ...ObjectTableDdl.indexes(objectName, field)];
  },

  dropField(objectName: string, fieldName: string): string {
    return `alter table ${objectTable(objectName)} drop column ${quoteIdent(fieldName)}`;
  },

  /** Unique index when unique; plain (GIN for arrays) index when indexed or a lookup. */
  indexes(objectName: string, field: FieldMeta): string[] {
    const statements: string[] = [];
    if (field.unique) {
      statements.push(
        `create unique index ${quoteIdent(indexName(objectName, field.name, 'key'))} on ${objectTable(objectName)} (${quoteIdent(field.name)})`,
      );
    } else if (field.indexed || field.type === 'lookup') {
      const using = field.type === 'multiselect' || field.type === 'json' ? ' using gin' : '';
      statements.push(
        `create index ${quoteIdent(indexName(objectName, field.name, 'idx'))} on ${objectTable(objectName)}${using} (${quoteIdent(field.name)})`,
      );
    }
    return statements;
  },

  dropIndexes(objectName: string, fieldName: string): string[] {
    return (['key', 'idx'] as const).map(
      (kind) => `drop index if exists ${quoteIdent(DATA_SCHEMA)}.${quoteIdent(indexName(objectName, fieldName, kind))}`,
    );
  },

  setRequired(objectName: string, fieldName: string, required: boolean): string {
    return `alter table ${objectTable(objectName)} alter column ${quoteIdent(fieldName)} ${required ? 'set' : 'drop'} not null`;
  },
};
