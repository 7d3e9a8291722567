import {
  booleanCell,
  type CellReader,
  type Decoder,
  decodeBoolean,
  decodeDate,
  decodeDatetime,
  decodeInteger,
  decodeMultiselect,
  decodeNumber,
  encodeBoolean,
  encodeDate,
  encodeDatetime,
  encodeEmail,
  encodeInteger,
  encodeJson,
  encodeMultiselect,
  type Encoder,
  encodeSelect,
  encodeString,
  encodeUrl,
  encodeUuid,
  jsonCell,
  multiselectCell,
  numberCell,
  numberEncoder,
} from './field-values';
import type { FormulaValueType } from './formula.types';

/**
 * The registry of stored field types: one entry per type holds everything the engine asks of it (its
 * column, family, definition rules, index, value codec, CSV reading, where operators, aggregates,
 * sorting, grouping, search, formula and figure kind, and the words the data tools describe its values
 * with), and every caller asks the entry instead of
 * switching on type names.
 * Adding a type: this entry + 2 files (README.md's list of field types, and the playground's
 * src/playground/client/grid-values.ts, which runs in the browser and keeps its own list of numeric types).
 *
 * Layout: this file is the metadata layer, below the data engine, so an entry names what its SQL is like
 * (`shape`, `family`) and the data engine's compilers hold that SQL once per shape; the codec's functions
 * (field-values.ts) are pure and live beside the registry so that an entry can hold them. A type without
 * a column of its own (a link, kept in a join table) leaves `column` out; the computed kinds
 * (computed-fields.ts) are not stored types and keep their own registry.
 */

/** Every where operator, in canonical order (shown to callers in errors). */
export const FIELD_OPERATORS = [
  '$eq',
  '$ne',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$in',
  '$nin',
  '$between',
  '$contains',
  '$notContains',
  '$startsWith',
  '$endsWith',
  '$null',
] as const;
export type FieldOperator = (typeof FIELD_OPERATORS)[number];

const EQUALITY: readonly FieldOperator[] = ['$eq', '$ne', '$in', '$nin', '$null'];
const ORDERING: readonly FieldOperator[] = ['$gt', '$gte', '$lt', '$lte', '$between'];
const PATTERN: readonly FieldOperator[] = ['$contains', '$notContains', '$startsWith', '$endsWith'];

/** What a type's values are like: TEXT_TYPES, NUMERIC_TYPES and TEMPORAL_TYPES are its families. */
export type FieldFamily = 'text' | 'numeric' | 'temporal' | 'boolean' | 'options' | 'reference' | 'document';

/**
 * How the data engine's SQL treats a value: `scalar`, one comparable value in a column; `set`, an array
 * of options (`@>`, `&&`, unnest); `document`, a jsonb value (equality only, an array is one value).
 */
export type ValueShape = 'scalar' | 'set' | 'document';

/** Aggregate functions that depend on the type (count and count_distinct take any field). */
export type TypedMeasure = 'sum' | 'avg' | 'min' | 'max';

/** What a field's numbers are, for the unit an answer states them in (grounding). */
export type FigureKind = 'money' | 'percent' | 'count' | 'number';

export interface FieldTypeEntry {
  /** Postgres column type; absent for a type without a column of its own. */
  column?: string;
  family: FieldFamily;
  shape: ValueShape;
  /** The definition properties the type takes (and requires). */
  takes: { options?: true; reference?: true };
  /** May be unique. */
  unique: boolean;
  /** The index an `indexed` field gets: a B-tree on (field, id) or a GIN (no order). */
  index: 'btree' | 'gin';
  /** Indexed whatever `indexed` says (a lookup's joins and deletes read it). */
  alwaysIndexed?: true;
  /** Its values (a set: each option) must fit an index entry when indexed or unique (MAX_INDEXED_TEXT_BYTES). */
  indexBytes: boolean;
  /** Can be searchable (`?q=`: a trigram index over the folded text). */
  searchable: boolean;
  /** Can be sorted on (and so be a keyset's sort key). */
  sorts: boolean;
  /** Can be grouped by (aggregates, metric dimensions). */
  groups: boolean;
  /** Where operators it accepts. */
  operators: readonly FieldOperator[];
  /** Aggregate functions it accepts beyond count and count_distinct. */
  measures: readonly TypedMeasure[];
  /** The type an average of it reads as (an average of whole numbers is not one); absent: its own. */
  averageType?: 'number';
  /** What its numbers are; absent: not known. */
  figure?: FigureKind;
  /** The value type a formula reads it as; absent when an expression cannot read it. */
  formula?: FormulaValueType;
  /** Validates an input value (API, where operand, CSV cell read) and returns what to bind. */
  encode: Encoder;
  /** Turns a pg result's value into its JSON form; absent: returned as pg gives it. */
  decode?: Decoder;
  /** Reads a CSV cell as the JSON value a write takes; absent: the cell's text. */
  fromCell?: CellReader;
  /** Written to CSV as JSON text (a string value included). */
  cellAsJson?: true;
  /** How a value of it is written, in a few words: what the data tools tell the model (describe_object). */
  hint: string;
}

/** A float column: its sums and exact values need casts of their own (see FLOAT_COLUMN's readers). */
export const FLOAT_COLUMN = 'double precision';
const CURRENCY_COLUMN = 'numeric(18,2)';
const PERCENT_COLUMN = 'numeric(9,4)';

const text = {
  column: 'text',
  family: 'text',
  shape: 'scalar',
  takes: {},
  unique: true,
  index: 'btree',
  indexBytes: true,
  searchable: true,
  sorts: true,
  groups: true,
  operators: [...EQUALITY, ...ORDERING, ...PATTERN],
  measures: ['min', 'max'],
  formula: 'text',
  encode: encodeString,
  hint: 'a string',
} as const satisfies FieldTypeEntry;

const numeric = {
  family: 'numeric',
  shape: 'scalar',
  takes: {},
  unique: true,
  index: 'btree',
  indexBytes: false,
  searchable: false,
  sorts: true,
  groups: true,
  operators: [...EQUALITY, ...ORDERING],
  measures: ['sum', 'avg', 'min', 'max'],
  formula: 'number',
  decode: decodeNumber,
  fromCell: numberCell,
} as const satisfies Omit<FieldTypeEntry, 'encode' | 'hint'>;

const temporal = {
  family: 'temporal',
  shape: 'scalar',
  takes: {},
  unique: true,
  index: 'btree',
  indexBytes: false,
  searchable: false,
  sorts: true,
  groups: true,
  operators: [...EQUALITY, ...ORDERING],
  measures: ['min', 'max'],
} as const satisfies Omit<FieldTypeEntry, 'encode' | 'hint'>;

/** The stored field types, in the order the API lists them. */
export const FIELD_TYPE_REGISTRY = {
  text,
  // A long text: not a category to group by.
  textarea: { ...text, groups: false, hint: 'a long string, not grouped by' },
  email: { ...text, encode: encodeEmail, hint: 'an email address' },
  url: { ...text, encode: encodeUrl, hint: 'an http or https URL' },
  phone: { ...text, hint: 'a phone number as a string' },
  number: {
    ...numeric,
    column: FLOAT_COLUMN,
    averageType: 'number',
    figure: 'number',
    encode: numberEncoder(FLOAT_COLUMN),
    hint: 'a JSON number',
  },
  // Money and percentages are exact decimals, never floats.
  currency: {
    ...numeric,
    column: CURRENCY_COLUMN,
    figure: 'money',
    encode: numberEncoder(CURRENCY_COLUMN),
    hint: 'an amount of money, a JSON number exact to the cent',
  },
  percent: {
    ...numeric,
    column: PERCENT_COLUMN,
    figure: 'percent',
    encode: numberEncoder(PERCENT_COLUMN),
    hint: "a percentage as a JSON number to 4 decimals, its scale in the field's description",
  },
  // Whole numbers of things (employees, seats, minutes): no amount of money, no percentage.
  integer: {
    ...numeric,
    column: 'bigint',
    averageType: 'number',
    figure: 'count',
    encode: encodeInteger,
    decode: decodeInteger,
    hint: 'a whole number',
  },
  boolean: {
    column: 'boolean',
    family: 'boolean',
    shape: 'scalar',
    takes: {},
    unique: false,
    index: 'btree',
    indexBytes: false,
    searchable: false,
    sorts: true,
    groups: true,
    operators: EQUALITY,
    measures: [],
    formula: 'boolean',
    encode: encodeBoolean,
    decode: decodeBoolean,
    fromCell: booleanCell,
    hint: 'true or false',
  },
  date: { ...temporal, column: 'date', formula: 'date', encode: encodeDate, decode: decodeDate, hint: "'YYYY-MM-DD'" },
  datetime: {
    ...temporal,
    column: 'timestamptz',
    formula: 'datetime',
    encode: encodeDatetime,
    decode: decodeDatetime,
    hint: 'an ISO 8601 date and time with its offset',
  },
  select: { ...text, takes: { options: true }, encode: encodeSelect, hint: 'one of its options' },
  multiselect: {
    column: 'text[]',
    family: 'options',
    shape: 'set',
    takes: { options: true },
    unique: false,
    index: 'gin',
    indexBytes: true,
    searchable: false,
    // The order of arrays of options means nothing a user would expect.
    sorts: false,
    groups: true,
    operators: [...EQUALITY, '$contains', '$notContains'],
    measures: [],
    encode: encodeMultiselect,
    decode: decodeMultiselect,
    fromCell: multiselectCell,
    hint: 'an array of its options, $contains finds records holding them all',
  },
  lookup: {
    column: 'uuid',
    family: 'reference',
    shape: 'scalar',
    takes: { reference: true },
    unique: true,
    index: 'btree',
    alwaysIndexed: true,
    indexBytes: false,
    searchable: false,
    sorts: true,
    groups: true,
    operators: EQUALITY,
    measures: [],
    formula: 'text',
    encode: encodeUuid,
    hint: 'the id of a record of its reference object',
  },
  json: {
    column: 'jsonb',
    family: 'document',
    shape: 'document',
    takes: {},
    unique: false,
    index: 'gin',
    indexBytes: false,
    searchable: false,
    // Sorting or grouping by a document has no meaning a user would expect.
    sorts: false,
    groups: false,
    operators: ['$eq', '$ne', '$null'],
    measures: [],
    encode: encodeJson,
    // pg parses jsonb itself (a raw string cannot be told apart).
    fromCell: jsonCell,
    cellAsJson: true,
    hint: 'any JSON value, filtered with $eq, $ne and $null only',
  },
} as const satisfies Record<string, FieldTypeEntry>;

export type FieldType = keyof typeof FIELD_TYPE_REGISTRY;

/** Field types an object may have: the registry's entries. */
export const FIELD_TYPES: readonly FieldType[] = Object.keys(FIELD_TYPE_REGISTRY) as FieldType[];

/** The type of the system field `id`: a UUID that clients filter and sort on but never define. */
const SYSTEM_UUID: FieldTypeEntry = { ...FIELD_TYPE_REGISTRY.lookup, takes: {}, alwaysIndexed: undefined };

/** The entry of a field's type (the system `uuid` included). */
export function fieldTypeOf(type: FieldType | 'uuid'): FieldTypeEntry {
  return type === 'uuid' ? SYSTEM_UUID : FIELD_TYPE_REGISTRY[type];
}

/** True when `type` names a stored field type (a definable one). */
export function isFieldType(type: unknown): type is FieldType {
  return typeof type === 'string' && Object.hasOwn(FIELD_TYPE_REGISTRY, type);
}

/** The stored types whose entry passes `test`, in registry order. */
export function fieldTypesWhere(test: (entry: FieldTypeEntry) => boolean): FieldType[] {
  return FIELD_TYPES.filter((type) => test(FIELD_TYPE_REGISTRY[type]));
}

/** Postgres column type of each field type with a column. */
export const FIELD_COLUMN_TYPES = Object.fromEntries(
  FIELD_TYPES.flatMap((type) => {
    const column = (FIELD_TYPE_REGISTRY[type] as FieldTypeEntry).column;
    return column === undefined ? [] : [[type, column]];
  }),
) as Partial<Record<FieldType, string>>;

export const TEXT_TYPES: readonly FieldType[] = fieldTypesWhere((entry) => entry.family === 'text');
export const NUMERIC_TYPES: readonly FieldType[] = fieldTypesWhere((entry) => entry.family === 'numeric');
export const TEMPORAL_TYPES: readonly FieldType[] = fieldTypesWhere((entry) => entry.family === 'temporal');

/**
 * The index a field's column gets (MetadataRepository.createIndexes), which an order by the field can
 * read: `unique`, a unique B-tree on the field and a partial one on (field, id) over its empty rows;
 * `field-id`, a B-tree on (field, id) (`indexed` and lookup fields), the records API's order with its
 * tiebreaker; `gin` for an indexed multiselect or json (no order); none.
 */
export function fieldIndex(field: {
  type: FieldType | 'uuid';
  unique: boolean;
  indexed: boolean;
}): 'unique' | 'field-id' | 'gin' | undefined {
  if (field.unique) return 'unique';
  const entry = fieldTypeOf(field.type);
  if (!field.indexed && !entry.alwaysIndexed) return undefined;
  return entry.index === 'gin' ? 'gin' : 'field-id';
}

/**
 * Cast for a bound value of this type: the column type without its typmod, so `numeric(18,2)` becomes
 * `numeric` (an operand like 100.005 is compared as given, not rounded first).
 */
export function bindCastOf(type: FieldType | 'uuid'): string {
  const column = fieldTypeOf(type).column;
  if (column === undefined) throw new Error(`Field type ${type} has no column to bind a value of`);
  return column.replace(/\(.*\)$/, '');
}

/** The scale of an exact-decimal type's column (`numeric(18,2)`: 2), which its averages are rounded to. */
export function decimalScale(type: FieldType | 'uuid'): number | undefined {
  const match = /^numeric\(\d+,(\d+)\)$/.exec(fieldTypeOf(type).column ?? '');
  return match ? Number(match[1]) : undefined;
}

/**
 * A field in a few words, as the agents' context lists it: its type, with the options it takes or the
 * object it references.
 */
export function fieldSummary(field: { type: string; reference?: string; options?: string[] }): string {
  if (field.reference !== undefined && isFieldType(field.type) && fieldTypeOf(field.type).takes.reference) {
    return `${field.type} → ${field.reference}`;
  }
  return field.options ? `${field.type}: ${field.options.join(' | ')}` : field.type;
}

/** Each stored type and how its values are written, as the data tools tell the model: "text: a string; ...". */
export function fieldTypeHints(): string {
  return FIELD_TYPES.map((type) => `${type}: ${(FIELD_TYPE_REGISTRY[type] as FieldTypeEntry).hint}`).join('; ');
}

/** "a and b", "a, b and c": the types listed in a message. */
export function listTypes(types: readonly string[]): string {
  return types.length > 1 ? `${types.slice(0, -1).join(', ')} and ${types[types.length - 1]}` : (types[0] ?? '');
}
