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
