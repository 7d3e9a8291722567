import { DomainError } from '../common/domain-error';
import type { FieldMeta } from '../metadata/object-metadata.types';

const NUMBER_PATTERN = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const TRUE_WORDS = new Set(['true', 't', 'yes', 'y', '1']);
const FALSE_WORDS = new Set(['false', 'f', 'no', 'n', '0']);

/**
 * One CSV cell as the JSON value a write of `field` takes; the field codec then checks it exactly as
 * it checks a JSON write. An empty cell is no value (the field is left unset). A cell that does not
 * read as its type passes through as text, so that the codec's error names the field and the type.
 */
export function cellToValue(field: FieldMeta, cell: string): unknown {
  if (cell === '') return undefined;
  switch (field.type) {
    case 'number':
    case 'currency':
    case 'percent':
    case 'integer': {
      const text = cell.trim();
      return NUMBER_PATTERN.test(text) ? Number(text) : cell;
    }
    case 'boolean': {
      const word = cell.trim().toLowerCase();
      if (TRUE_WORDS.has(word)) return true;
      if (FALSE_WORDS.has(word)) return false;
      return cell;
    }
    case 'multiselect':
      return multiselectOf(cell);
    case 'json':
      try {
        return JSON.parse(cell) as unknown;
      } catch {
        throw new DomainError('invalid_value', `Field "${field.name}" expects JSON text; got a cell that is not JSON`, {
          field: field.name,
        });
      }
    default:
      return cell;
  }
}

/** `a;b;c`, or a JSON array of strings (for options that contain a semicolon). */
function multiselectOf(cell: string): unknown {
  const text = cell.trim();
  if (text.startsWith('[')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return cell;
    }
  }
  return text
    .split(';')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/**
 * One value of a decoded record as a CSV cell: null is empty, numbers plain, booleans true/false,
 * dates and datetimes as the ISO text the records API returns, multiselect `a;b` (a JSON array when an
 * option holds a semicolon, starts with "[" or has spaces at its ends), json as JSON text.
 */
export function valueToCell(field: FieldMeta | undefined, value: unknown): string {
  if (value === null || value === undefined) return '';
  if (field?.type === 'json') return JSON.stringify(value);
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
  if (field.type === 'json') return (value) => csvCell(valueToCell(field, value));
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
