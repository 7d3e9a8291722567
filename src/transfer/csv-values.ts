import { fieldTypeOf } from '../metadata/field-types';
import type { FieldMeta } from '../metadata/object-metadata.types';

/**
 * One CSV cell as the JSON value a write of `field` takes: its type's cell reader (metadata/field-types.ts;
 * the cell's text for most types), and the field codec then checks it exactly as it checks a JSON write.
 * An empty cell is no value (the field is left unset). A cell that does not read as its type passes
 * through as text, so that the codec's error names the field and the type.
 */
export function cellToValue(field: FieldMeta, cell: string): unknown {
  if (cell === '') return undefined;
  const read = fieldTypeOf(field.type).fromCell;
  return read ? read(field, cell) : cell;
}

/**
 * One value of a decoded record as a CSV cell: null is empty, numbers plain, booleans true/false,
 * dates and datetimes as the ISO text the records API returns, multiselect `a;b` (a JSON array when an
 * option holds a semicolon, starts with "[" or has spaces at its ends), a type whose entry says so (json)
 * as JSON text.
 */
export function valueToCell(field: FieldMeta | undefined, value: unknown): string {
  if (value === null || value === undefined) return '';
  if (field && fieldTypeOf(field.type).cellAsJson) return JSON.stringify(value);
  if (Array.isArray(value)) {
    const items = value.map((item) => (typeof item === 'string' ? item : JSON.stringify(item)));
    const plain = items.every((item) => item !== '' && !item.includes(';') && item.trim() === item) && !items[0]?.startsWith('[');
    return plain ? items.join(';') : JSON.stringify(value);
  }
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return JSON.stringify(value);
}

/** What makes a cell need quotes: the delimiter, the quote, and either line-break character. */
const NEEDS_QUOTES = /[",\r\n]/;

/**
 * One cell of a CSV line (RFC 4180): in quotes, its quotes doubled, when it holds a comma, a double
 * quote, CR or LF; as it is otherwise. The text csv-stringify writes with its defaults, except that a
 * lone CR is quoted too (csv-stringify leaves it bare, and readers take it for a line break).
 */
export function csvCell(text: string): string {
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** One CSV line of cells, ending with LF. */
export function csvLine(cells: readonly string[]): string {
  return `${cells.map(csvCell).join(',')}\n`;
}

/** Writes one value of `field` as a CSV cell. */
export type CellWriter = (value: unknown) => string;

/**
 * `csvCell(valueToCell(field, value))` as a function chosen once per column, with a short path for
 * the values most cells hold (strings and numbers) outside json fields (whose strings are JSON text).
 */
export function cellWriter(field: FieldMeta): CellWriter {
  if (fieldTypeOf(field.type).cellAsJson) return (value) => csvCell(valueToCell(field, value));
  return (value) =>
    typeof value === 'string' ? csvCell(value) : typeof value === 'number' ? String(value) : csvCell(valueToCell(field, value));
}

/**
 * The CSV lines of a batch of rows (arrays of values): the values at `columns`, each written by the
 * writer at the same position. Each line is joined flat on its own, so a big batch never becomes a
 * rope of millions of small strings for the garbage collector to copy.
 */
export function csvLines(rows: readonly unknown[][], columns: readonly number[], writers: readonly CellWriter[]): string {
  const lines = new Array<string>(rows.length);
  const cells = new Array<string>(columns.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r];
    for (let i = 0; i < columns.length; i++) cells[i] = writers[i](row[columns[i]]);
    lines[r] = cells.join(',');
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}
