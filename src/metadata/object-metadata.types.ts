import type { FormulaNode, FormulaResultType } from './formula.types';

import type { FieldType } from './field-types';

export {
  FIELD_COLUMN_TYPES,
  FIELD_TYPES,
  fieldIndex,
  type FieldType,
  NUMERIC_TYPES,
  TEMPORAL_TYPES,
  TEXT_TYPES,
} from './field-types';
export { MAX_INDEXED_TEXT_BYTES } from './field-values';

/** Fields per object: far below Postgres' 1,600 columns, far above any sane spreadsheet. */
export const MAX_FIELDS = 500;

/**
 * A formula field (definition type `formula`): no column, its value computed when read from `expression`.
 * Its FieldMeta's `type` is its result type, so filters, sorts, aggregations and decoding treat it as a
 * field of that type; the engine reads it through `node` (compiled to SQL) instead of a column.
 */
export interface FormulaMeta {
  expression: string;
  resultType: FormulaResultType;
  /** The checked expression, formulas it reads inlined (absent while the definition is being checked). */
  node?: FormulaNode;
  /** Every field it reads at any depth (formulas it reads and their inputs): one hidden hides it. */
  inputs?: string[];
  /**
   * Set on a caller's view only (governance/caller-access.ts): the caller's view of each rollup, count or
   * lookup_value field the expression reads (at any depth), which the compiler reads them through.
   */
  related?: Record<string, FieldMeta>;
  /**
   * `stored: true` (an expression over the record's own plain fields, without TODAY or NOW): also a column of
   * the record, set by a row trigger on every insert and update (stored-fields.ts); read from it once `filled`.
   */
  stored?: boolean;
  filled?: boolean;
}

/** The functions of a rollup over the related records' values. */
export const ROLLUP_FUNCTIONS = ['count', 'sum', 'avg', 'min', 'max', 'count_distinct', 'concat'] as const;
export type RollupFunction = (typeof ROLLUP_FUNCTIONS)[number];

/** The computed kinds that read another object: each is one entry of metadata/computed-fields.ts. */
export const RELATED_KINDS = ['rollup', 'count', 'lookup_value', 'links'] as const;
export type RelatedKind = (typeof RELATED_KINDS)[number];

/**
 * A field computed when read from the records of another object (definition types `rollup`, `count` and
 * `lookup_value`): no column. Its FieldMeta's `type` is its result type. `rollup` and `count` read the
 * records of `target` whose lookup `via` points at this record; `lookup_value` reads `field` of the record
 * this record's lookup `via` points at.
 */
export interface RelatedMeta {
  kind: RelatedKind;
  /** The object the field is defined on. */
  self: string;
  /** The object whose records it reads. */
  target: string;
  /** rollup and count: the lookup field of `target` pointing here; lookup_value: this object's lookup field. */
  via: string;
  /** The field of `target` it reads (rollup: absent for `count`; lookup_value: always). */
  field?: string;
  /** rollup only. */
  function?: RollupFunction;
  /**
   * rollup and count with `stored: true`: the value is also kept in a column of `self` (same name), kept up to
   * date by triggers on `target`'s table. `filled` once every existing record's column holds its value (a job);
   * until then, and for a caller whose view of `target` is restricted, it is computed when read.
   */
  stored?: boolean;
  filled?: boolean;
  /** rollup and count: only the related records this `where` matches. */
  filter?: Record<string, unknown>;
  /**
   * Set on a caller's view only (governance/caller-access.ts): the caller's read view of `target`, with its
   * row filter and only the fields this one reads. Without it the field is never compiled (fails closed).
   */
  scope?: ObjectMeta;
  /**
   * A `links` field (many to many, metadata/links-fields.ts), and a rollup or count whose relation is one: the
   * join table and which of its columns holds this record's id and which the target's.
   */
  link?: LinkTable;
  /** A `links` field: the links field of `target` that reads the same pairs the other way, if any. */
  inverse?: string;
}

/** The join table of a `links` field as one side reads it. */
export interface LinkTable {
  table: string;
  selfColumn: 'source_id' | 'target_id';
  targetColumn: 'source_id' | 'target_id';
}

/** A join table as the records of one object are on it, and the object on its other side. */
export interface LinkSide extends LinkTable {
  other: string;
}

/**
 * What points at an object's records (MetadataService.referrers): the optional lookups a delete clears and the
 * join tables whose pairs go with it; a restore from the trash sets both back.
 */
export interface ObjectReferrers {
  lookups: Array<{ object: ObjectMeta; field: FieldMeta }>;
  links: LinkSide[];
}

/** One field of an object, as the data engine and tools see it (already validated metadata). */
export interface FieldMeta {
  name: string;
  label: string;
  type: FieldType | 'uuid';
  required: boolean;
  unique: boolean;
  indexed: boolean;
  /** Text-like fields only: searched by `?q=` (trigram index over the accent-folded, lower-cased value). */
  searchable?: boolean;
  description?: string | null;
  /** Allowed values of `select` / `multiselect`. */
  options?: string[];
  /** Target object name of a `lookup`. */
  reference?: string;
  /** true for id, created_at, updated_at: readable and filterable, never written by clients. */
  system?: boolean;
  /** A formula field: computed when read, never written (`type` is its result type). */
  formula?: FormulaMeta;
  /** A rollup, count or lookup_value field: computed when read, never written (`type` is its result type). */
  related?: RelatedMeta;
}

/** An object (one physical table) with its fields, system fields included. */
export interface ObjectMeta {
  name: string;
  label: string;
  description?: string | null;
  fields: FieldMeta[];
  /**
   * Set on a caller's view of an object (governance/caller-access.ts): the rows the caller may touch,
   * ANDed into every statement by the data compilers. Absent: every row.
   */
  rowFilter?: ObjectRowFilter;
}

/** The rows a caller may touch: any of `filters` (where objects with `$subject` / `$attr.<name>`) matches. */
export interface ObjectRowFilter {
  /** The whole object, hidden fields included: a filter may name a field the caller cannot see. */
  object: ObjectMeta;
  filters: Record<string, unknown>[];
  subject: string;
  attributes: Readonly<Record<string, string | number>>;
}

/** System columns every object table has. */
export const SYSTEM_FIELDS: FieldMeta[] = [
  { name: 'id', label: 'ID', type: 'uuid', required: true, unique: true, indexed: true, system: true },
  { name: 'created_at', label: 'Created at', type: 'datetime', required: true, unique: false, indexed: false, system: true },
  { name: 'updated_at', label: 'Updated at', type: 'datetime', required: true, unique: false, indexed: false, system: true },
];
