import { bindCastOf, fieldTypeOf } from '../metadata/field-types';
import { type EncodeContext, roleOf } from '../metadata/field-values';
import { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import { encodeLinkOperand } from './links.values';

/**
 * Converts JSON values to the values bound to Postgres (encode) and pg results back to JSON (decode),
 * through the codec of each field's type (metadata/field-types.ts; the table of what each returns is in
 * metadata/field-values.ts). Bind every value with the cast from `bindCast(field)`, so Postgres never
 * has to guess a type.
 */

/** Cast for a bound value of this field: its column type without the typmod (`numeric(18,2)` binds as `numeric`). */
export function bindCast(field: Pick<FieldMeta, 'type'>): string {
  return bindCastOf(field.type);
}

/** Validates one JSON value for `field` and returns what to bind (null is SQL NULL). */
export function encodeFieldValue(field: FieldMeta, value: unknown, context: EncodeContext = {}): unknown {
  if (value === null) return null;
  // A links field reads as a set of ids (metadata/links-fields.ts), not of options.
  if (field.related?.kind === 'links') return encodeLinkOperand(field, value, context.operator);
  return fieldTypeOf(field.type).encode(field, value, context, roleOf(context.operator));
}

/**
 * Turns one pg result row into JSON-friendly values. Works whether or not pg's type parsers are active:
 * numeric/bigint may arrive as strings, date/timestamptz as strings or Dates. Columns that are not
 * fields of the object (aggregates, aliases) pass through untouched, as do null and undefined.
 */
export function decodeRow(object: ObjectMeta, row: Record<string, unknown>): Record<string, unknown> {
  const decoders = decodersOf(object.fields);
  const out: Record<string, unknown> = {};
  for (const key in row) {
    if (!Object.hasOwn(row, key)) continue;
    const value = row[key];
    const decode = decoders.get(key);
    const decoded = decode && value !== null && value !== undefined ? decode(value) : value;
    // Defined, not assigned, so that even a column named __proto__ cannot touch the prototype.
    if (key === '__proto__')
      Object.defineProperty(out, key, { value: decoded, enumerable: true, writable: true, configurable: true });
    else out[key] = decoded;
  }
  return out;
}

/**
 * decodeRow for the rows of one result, in place: the driver's rows are the caller's to change, and a page
 * of them decoded into copies would allocate each row twice. Every row of a result has the same columns.
 */
export function decodeRowsInPlace(object: ObjectMeta, rows: Record<string, unknown>[]): Record<string, unknown>[] {
  if (!rows.length) return rows;
  const decoders = decodersOf(object.fields);
  const columns: Array<[string, (value: unknown) => unknown]> = [];
  for (const key of Object.keys(rows[0])) {
    const decode = decoders.get(key);
    if (decode && decode !== passThrough) columns.push([key, decode]);
  }
  for (const row of rows) {
    for (const [key, decode] of columns) {
      const value = row[key];
      if (value !== null && value !== undefined) row[key] = decode(value);
    }
  }
  return rows;
}

/**
 * The decoder of each field by name, per list of fields: an object's cached definition (or a caller's
 * view of it) decodes every row of every request with one lookup per column, not a map per row.
 */
const decodersByFields = new WeakMap<readonly FieldMeta[], Map<string, (value: unknown) => unknown>>();

function decodersOf(fields: readonly FieldMeta[]): Map<string, (value: unknown) => unknown> {
  let decoders = decodersByFields.get(fields);
  if (!decoders) {
    decoders = new Map(fields.map((field) => [field.name, decoderOf(field.type)]));
    decodersByFields.set(fields, decoders);
  }
  return decoders;
}

/**
 * What decodeRow does to one column of `field`, as a function chosen once: for callers that decode
 * many rows of the same columns (a streamed export) without a lookup per value. Null and undefined
 * pass through.
 */
export function fieldDecoder(field: FieldMeta): (value: unknown) => unknown {
  const decode = decoderOf(field.type);
  return (value) => (value === null || value === undefined ? value : decode(value));
}

const passThrough = (value: unknown): unknown => value;

function decoderOf(type: FieldMeta['type']): (value: unknown) => unknown {
  return fieldTypeOf(type).decode ?? passThrough;
}
