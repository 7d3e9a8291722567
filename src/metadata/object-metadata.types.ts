import type { FormulaNode, FormulaResultType } from './formula.types';

/** Field types an object may have. Each maps to one Postgres column type (see FIELD_COLUMN_TYPES). */
export const FIELD_TYPES = [
  'text',
  'textarea',
  'email',
  'url',
  'phone',
  'number',
  'currency',
  'percent',
  'integer',
  'boolean',
  'date',
  'datetime',
  'select',
  'multiselect',
  'lookup',
  'json',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

/** Fields per object: far below Postgres' 1,600 columns, far above any sane spreadsheet. */
export const MAX_FIELDS = 500;

/** Postgres column type of each field type. Money and percentages are exact decimals, never floats. */
export const FIELD_COLUMN_TYPES: Record<FieldType, string> = {
  text: 'text',
  textarea: 'text',
  email: 'text',
  url: 'text',
  phone: 'text',
  number: 'double precision',
  currency: 'numeric(18,2)',
  percent: 'numeric(9,4)',
  integer: 'bigint',
  boolean: 'boolean',
  date: 'date',
  datetime: 'timestamptz',
  select: 'text',
  multiselect: 'text[]',
  lookup: 'uuid',
  json: 'jsonb',
};

/**
 * Longest value, in UTF-8 bytes, of a text-like (or multiselect option) field that is indexed or unique.
 * An index entry must fit in a third of a page (about 2,700 bytes); a longer one fails with SQLSTATE 54000.
 */
export const MAX_INDEXED_TEXT_BYTES = 2_000;

export const TEXT_TYPES: readonly FieldType[] = ['text', 'textarea', 'email', 'url', 'phone', 'select'];
export const NUMERIC_TYPES: readonly FieldType[] = ['number', 'currency', 'percent', 'integer'];
export const TEMPORAL_TYPES: readonly FieldType[] = ['date', 'datetime'];

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

/**
 * The index a field's column gets (MetadataRepository.createIndexes), which an order by the field can
 * read: `unique`, a unique B-tree on the field and a partial one on (field, id) over its empty rows;
 * `field-id`, a B-tree on (field, id) (`indexed` and lookup fields), the records API's order with its
 * tiebreaker; `gin` for an indexed multiselect or json (no order); none.
 */
export function fieldIndex(field: Pick<FieldMeta, 'type' | 'unique' | 'indexed'>): 'unique' | 'field-id' | 'gin' | undefined {
  if (field.unique) return 'unique';
  if (!field.indexed && field.type !== 'lookup') return undefined;
  return field.type === 'multiselect' || field.type === 'json' ? 'gin' : 'field-id';
}

/** System columns every object table has. */
export const SYSTEM_FIELDS: FieldMeta[] = [
  { name: 'id', label: 'ID', type: 'uuid', required: true, unique: true, indexed: true, system: true },
  { name: 'created_at', label: 'Created at', type: 'datetime', required: true, unique: false, indexed: false, system: true },
  { name: 'updated_at', label: 'Updated at', type: 'datetime', required: true, unique: false, indexed: false, system: true },
];
