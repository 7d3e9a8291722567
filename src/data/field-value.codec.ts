import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { isUuid } from '../common/uuid';
import { encodeLinkOperand } from './links.values';
import { FIELD_COLUMN_TYPES, FieldMeta, MAX_INDEXED_TEXT_BYTES, ObjectMeta } from '../metadata/object-metadata.types';

/**
 * Converts JSON values to the values bound to Postgres (encode) and pg results back to JSON (decode).
 *
 * What `encodeFieldValue` returns, per field type (null is always returned as null = SQL NULL):
 *   text, textarea, email, url, phone, select  -> string
 *   number, currency, percent, integer         -> number (JSON numbers only; numeric strings are refused)
 *   boolean                                    -> boolean
 *   date                                       -> 'YYYY-MM-DD' string
 *   datetime                                   -> ISO 8601 string with an explicit offset, fraction kept
 *   lookup, uuid                               -> lower-case UUID string
 *   multiselect                                -> string[] (deduplicated), except one string for $in/$nin items
 *   json                                       -> JSON text (string): the caller binds it as `$n::jsonb`
 * Bind every value with the cast from `bindCast(field)`, so Postgres never has to guess a type.
 *
 * `context.operator` says where the value is used:
 *   undefined (a write)      -> every check: formats, select options, column range of exact decimals;
 *   $eq $ne $in $nin         -> formats and options (a value that can never be stored can never match, so
 *                               an error helps more than an empty result); no range checks (the operand is
 *                               cast to plain numeric);
 *   $gt $gte $lt $lte $between, $contains $notContains $startsWith $endsWith
 *                            -> text-like fields take any string (a prefix of an email is not an email);
 *                               the four pattern operators at most MAX_PATTERN_LENGTH characters.
 * Writes to an indexed or unique text-like field take at most MAX_INDEXED_TEXT_BYTES.
 */

/** Longest string accepted for a text-like field; the cap stops abuse, not legitimate notes. */
export const MAX_TEXT_LENGTH = 100_000;
/** Longest operand of $contains, $notContains, $startsWith and $endsWith: an ILIKE's cost grows with it, no search needs more. */
export const MAX_PATTERN_LENGTH = 200;
/** Longest JSON text accepted for a json field. */
export const MAX_JSON_LENGTH = 1_000_000;
/** Deepest nesting accepted inside a json value (keeps validation recursion bounded). */
export const MAX_JSON_DEPTH = 64;
/** Most options one multiselect value may hold. */
export const MAX_MULTISELECT_ITEMS = 1000;

export interface EncodeContext {
  /** The where operator the value is an operand of; absent for writes. */
  operator?: string;
}

type ValueRole = 'write' | 'equality' | 'member' | 'range' | 'pattern';

const RANGE_OPERATORS = new Set(['$gt', '$gte', '$lt', '$lte', '$between']);
const PATTERN_OPERATORS = new Set(['$contains', '$notContains', '$startsWith', '$endsWith']);

/** Loose on purpose: one @, no spaces, a dot in the domain. Deliverability is not our business. */
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;
/** Date, optional time (T or space), optional fraction, optional offset (Z, ±HH, ±HHMM, ±HH:MM). */
const DATETIME_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

/**
 * Largest magnitude (exclusive) each exact-decimal column can store: numeric(p,s) holds p-s integer digits.
 * Checked on writes so the caller gets invalid_value instead of a Postgres overflow error.
 */
const DECIMAL_LIMITS: Partial<Record<FieldMeta['type'], number>> = {
  currency: decimalLimit(FIELD_COLUMN_TYPES.currency),
  percent: decimalLimit(FIELD_COLUMN_TYPES.percent),
};

function decimalLimit(columnType: string): number {
  const match = /^numeric\((\d+),(\d+)\)$/.exec(columnType);
  return match ? 10 ** (Number(match[1]) - Number(match[2])) : Number.POSITIVE_INFINITY;
}

/**
 * Cast for a bound value of this field: the column type without its typmod, so `numeric(18,2)` becomes
 * `numeric` (an operand like 100.005 is compared as given, not rounded first).
 */
export function bindCast(field: Pick<FieldMeta, 'type'>): string {
  if (field.type === 'uuid') return 'uuid';
  return FIELD_COLUMN_TYPES[field.type].replace(/\(.*\)$/, '');
}

/** Validates one JSON value for `field` and returns what to bind (see the table at the top of this file). */
export function encodeFieldValue(field: FieldMeta, value: unknown, context: EncodeContext = {}): unknown {
  if (value === null) return null;
  const role = roleOf(context.operator);
  const strict = role === 'write' || role === 'equality' || role === 'member';

  switch (field.type) {
    case 'text':
    case 'textarea':
    case 'phone':
      return encodeString(field, value, context, role);
    case 'email': {
      const text = encodeString(field, value, context, role);
      if (strict && !EMAIL_PATTERN.test(text)) fail(field, context, 'an email address like "ann@example.com"', value);
      return text;
    }
    case 'url': {
      const text = encodeString(field, value, context, role);
      if (strict && !isHttpUrl(text)) fail(field, context, 'an http(s) URL like "https://example.com"', value);
      return text;
    }
    case 'select': {
      const text = encodeString(field, value, context, role);
      const options = field.options ?? [];
      if (strict && !options.includes(text)) {
        fail(field, context, `one of the options ${JSON.stringify(options)}`, value, { options });
      }
      return text;
    }
    case 'multiselect':
      // A links field reads as a set of ids (metadata/links-fields.ts).
      if (field.related?.kind === 'links') return encodeLinkOperand(field, value, context.operator);
      return encodeMultiselect(field, value, context, role);
    case 'number':
    case 'currency':
    case 'percent':
      return encodeNumber(field, value, context, role);
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
        fail(field, context, 'an integer (a JSON number without fraction, within ±9007199254740991)', value);
      }
      return value === 0 ? 0 : value; // -0 becomes 0
    case 'boolean':
      if (typeof value !== 'boolean') fail(field, context, 'a boolean (true or false)', value);
      return value;
    case 'date':
      return encodeDate(field, value, context);
    case 'datetime':
      return encodeDatetime(field, value, context);
    case 'lookup':
    case 'uuid':
      if (!isUuid(value)) {
        fail(field, context, 'a UUID like "3f2b8c1e-6a4d-4f7e-9b21-0c5d8e7a9f10"', value);
      }
      return value.toLowerCase();
    case 'json':
      return encodeJson(field, value, context);
    default:
      return assertNever(field.type);
  }
}

function roleOf(operator: string | undefined): ValueRole {
  if (operator === undefined) return 'write';
  if (RANGE_OPERATORS.has(operator)) return 'range';
  if (PATTERN_OPERATORS.has(operator)) return 'pattern';
  if (operator === '$in' || operator === '$nin') return 'member';
  return 'equality';
}

function encodeString(field: FieldMeta, value: unknown, context: EncodeContext, role: ValueRole): string {
  if (typeof value !== 'string') return fail(field, context, 'a string', value);
  if (value.length > MAX_TEXT_LENGTH) {
    fail(field, context, `a string of at most ${MAX_TEXT_LENGTH} characters`, value, { maxLength: MAX_TEXT_LENGTH });
  }
  if (role === 'pattern' && value.length > MAX_PATTERN_LENGTH) {
    fail(field, context, `a search text of at most ${MAX_PATTERN_LENGTH} characters`, value, { maxLength: MAX_PATTERN_LENGTH });
  }
  // Postgres text cannot hold NUL; refusing here beats a driver error later.
  if (value.includes('\u0000')) fail(field, context, 'a string without NUL (\\u0000) characters', value);
  if (role === 'write') checkIndexedLength(field, value);
  return value;
}

/** Refuses a value an index of the field could not hold (see MAX_INDEXED_TEXT_BYTES). */
function checkIndexedLength(field: FieldMeta, text: string): void {
  if ((field.indexed || field.unique) && Buffer.byteLength(text, 'utf8') > MAX_INDEXED_TEXT_BYTES) {
    throw indexedValueLimitError(field, text);
  }
}

/** invalid_value for a value too long for the field's index, naming the field and the limit. */
export function indexedValueLimitError(field: Pick<FieldMeta, 'name' | 'type' | 'unique'>, received?: string): DomainError {
  const got = received === undefined ? '' : `, got ${describeValue(received)} of ${Buffer.byteLength(received, 'utf8')} bytes`;
  return new DomainError(
    'invalid_value',
    `Field "${field.name}" expects at most ${MAX_INDEXED_TEXT_BYTES} bytes of UTF-8 (it is ${field.unique ? 'unique' : 'indexed'}, ` +
      `and an index entry cannot hold more)${got}`,
    { field: field.name, type: field.type, maxBytes: MAX_INDEXED_TEXT_BYTES },
  );
}

function isHttpUrl(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const { protocol, hostname } = new URL(text);
  return (protocol === 'http:' || protocol === 'https:') && hostname.length > 0;
}

/**
 * Writes and $eq/$ne take an array of options (a set: duplicates dropped, order kept).
 * $contains/$notContains take one option or a non-empty array of them, always returned as an array (`@>`).
 * $in/$nin items are single options (the compiler collects them into one array for `&&`).
 */
function encodeMultiselect(field: FieldMeta, value: unknown, context: EncodeContext, role: ValueRole): unknown {
  const options = field.options ?? [];
  const checkOption = (item: unknown): string => {
    if (typeof item !== 'string' || !options.includes(item)) {
      fail(field, context, `options from ${JSON.stringify(options)}`, item, { options });
    }
    return item;
  };
  if (role === 'member') return checkOption(value);
  if (role === 'pattern' && !Array.isArray(value)) return [checkOption(value)];
  if (!Array.isArray(value)) {
    const hint = role === 'equality' ? ' (use $contains to match records having one option)' : '';
    return fail(field, context, `an array of options from ${JSON.stringify(options)}${hint}`, value, { options });
  }
  if (value.length > MAX_MULTISELECT_ITEMS) {
    fail(field, context, `at most ${MAX_MULTISELECT_ITEMS} options`, value, { options });
  }
  if (role === 'pattern' && value.length === 0) {
    fail(field, context, 'at least one option', value, { options });
  }
  const items = [...new Set(value.map(checkOption))];
  if (role === 'write') for (const item of items) checkIndexedLength(field, item);
  return items;
}

function encodeNumber(field: FieldMeta, value: unknown, context: EncodeContext, role: ValueRole): number {
  // Strict: "12" is refused so a caller's type confusion surfaces instead of being guessed around.
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return fail(field, context, 'a number (a JSON number, not a string)', value);
  }
  const limit = DECIMAL_LIMITS[field.type];
  if (role === 'write' && limit !== undefined && Math.abs(value) >= limit) {
    fail(field, context, `a number whose magnitude is below ${limit}`, value, { max: limit });
  }
  return value === 0 ? 0 : value; // -0 becomes 0
}

function encodeDate(field: FieldMeta, value: unknown, context: EncodeContext): string {
  const match = typeof value === 'string' ? DATE_PATTERN.exec(value) : null;
  if (!match || !isCalendarDate(+match[1], +match[2], +match[3])) {
    return fail(field, context, 'a date "YYYY-MM-DD" like "2024-03-31"', value);
  }
  return match[0];
}

/**
 * Accepts ISO 8601 date-times (and a bare date, meaning midnight). A missing offset means UTC: it is
 * made explicit so the result never depends on the database session's time zone. The fraction is kept
 * as written because Postgres stores microseconds and JS Dates only milliseconds.
 */
function encodeDatetime(field: FieldMeta, value: unknown, context: EncodeContext): string {
  const expected = 'an ISO 8601 date-time like "2024-03-31T14:30:00Z" (or a date "2024-03-31" for midnight UTC)';
  if (value instanceof Date) {
    const time = value.getTime();
    if (Number.isNaN(time) || time < FIRST_INSTANT_MS || time >= AFTER_LAST_INSTANT_MS) fail(field, context, expected, value);
    return value.toISOString();
  }
  const match = typeof value === 'string' ? DATETIME_PATTERN.exec(value) : null;
  if (!match) return fail(field, context, expected, value);
  const [, year, month, day, hour = '00', minute = '00', second = '00', fraction = '', offset] = match;
  const validOffset = offset === undefined || /^[Zz]$/.test(offset) || isValidOffset(offset);
  if (!isCalendarDate(+year, +month, +day) || +hour > 23 || +minute > 59 || +second > 59 || !validOffset) {
    return fail(field, context, expected, value);
  }
  const normalised = normaliseOffset(offset);
  // An offset can carry a date in years 1..9999 out of them in UTC, which reads back as "… BC" or a 5-digit year.
  const instant = utcMillis(+year, +month, +day, +hour, +minute, +second) - offsetMinutes(normalised) * 60_000;
  if (instant < FIRST_INSTANT_MS || instant >= AFTER_LAST_INSTANT_MS) {
    return fail(field, context, 'a date-time from year 1 to 9999 (in UTC)', value);
  }
  return `${year}-${month}-${day}T${hour}:${minute}:${second}${fraction}${normalised}`;
}

/** Milliseconds since the epoch; years below 100 are taken literally (Date.UTC would add 1900). */
function utcMillis(year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number {
  const date = new Date(Date.UTC(2000, month - 1, day, hour, minute, second));
  date.setUTCFullYear(year);
  return date.getTime();
}

/** The range a datetime field holds: ISO 8601 with four-digit years, which is what it reads back as. */
const FIRST_INSTANT_MS = utcMillis(1, 1, 1);
const AFTER_LAST_INSTANT_MS = utcMillis(10000, 1, 1);

/** `Z` → 0, `+05:30` → 330, `-03:00` → -180. */
function offsetMinutes(offset: string): number {
  if (offset === 'Z') return 0;
  const minutes = Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4, 6));
  return offset[0] === '-' ? -minutes : minutes;
}

function isValidOffset(offset: string): boolean {
  const digits = offset.slice(1).replace(':', '');
  return Number(digits.slice(0, 2)) <= 15 && Number(digits.slice(2) || '0') <= 59;
}

function normaliseOffset(offset: string | undefined): string {
  if (offset === undefined || /^[Zz]$/.test(offset)) return 'Z';
  const digits = offset.slice(1).replace(':', '');
  return `${offset[0]}${digits.slice(0, 2)}:${digits.slice(2) || '00'}`;
}

function isCalendarDate(year: number, month: number, day: number): boolean {
  // Postgres has no year 0; Date.UTC round-trips only real calendar days.
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const date = new Date(Date.UTC(2000, month - 1, day));
  date.setUTCFullYear(year);
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/**
 * Returns JSON text: node-pg would turn a JS array into a Postgres array literal, so the caller binds
 * this string with `::jsonb`. A top-level null was already returned as SQL NULL.
 */
function encodeJson(field: FieldMeta, value: unknown, context: EncodeContext): string {
  const expected = 'a JSON value (object, array, string, finite number, boolean or null)';
  if (!isJsonValue(value, 0)) return fail(field, context, expected, value);
  const text = JSON.stringify(value);
  if (text.length > MAX_JSON_LENGTH) {
    fail(field, context, `JSON of at most ${MAX_JSON_LENGTH} characters`, value, { maxLength: MAX_JSON_LENGTH });
  }
  return text;
}

/** True when `value` survives JSON.stringify unchanged and jsonb accepts it (no NUL in strings). */
function isJsonValue(value: unknown, depth: number): boolean {
  if (depth > MAX_JSON_DEPTH) return false;
  if (value === null || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value === 'string') return !value.includes('\u0000');
  if (Array.isArray(value)) return value.every((item) => isJsonValue(item, depth + 1));
  if (isPlainObject(value)) {
    return Object.entries(value).every(([key, item]) => !key.includes('\u0000') && isJsonValue(item, depth + 1));
  }
  return false;
}

/** Throws the invalid_value error; the message names the field, what it expects and what it got. */
function fail(
  field: FieldMeta,
  context: EncodeContext,
  expected: string,
  received: unknown,
  extra: Record<string, unknown> = {},
): never {
  const usage = context.operator ? ` for ${context.operator}` : '';
  throw new DomainError('invalid_value', `Field "${field.name}" expects ${expected}${usage}, got ${describeValue(received)}`, {
    field: field.name,
    type: field.type,
    ...(context.operator ? { operator: context.operator } : {}),
    expected,
    ...extra,
  });
}

/** Short, safe description of a received value for error messages (long strings are cut). */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') {
    const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
    return `string ${JSON.stringify(shown)}${value.length > 40 ? ` (${value.length} characters)` : ''}`;
  }
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (value instanceof Date) return 'a Date';
  return typeof value === 'object' ? 'an object' : typeof value;
}

function assertNever(type: never): never {
  throw new Error(`Unhandled field type ${String(type)}`);
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
  switch (type) {
    case 'number':
    case 'currency':
    case 'percent':
      return decodeNumber;
    case 'integer':
      return decodeInteger;
    case 'boolean':
      return decodeBoolean;
    case 'date':
      return decodeDate;
    case 'datetime':
      return decodeDatetime;
    case 'multiselect':
      return decodeMultiselect;
    default:
      // text, uuid: already strings; json: pg parses jsonb itself (a raw string cannot be told apart).
      return passThrough;
  }
}

function decodeNumber(value: unknown): unknown {
  return typeof value === 'string' || typeof value === 'bigint' ? Number(value) : value;
}

function decodeBoolean(value: unknown): unknown {
  if (value === 't' || value === 'true') return true;
  if (value === 'f' || value === 'false') return false;
  return value;
}

function decodeMultiselect(value: unknown): unknown {
  return typeof value === 'string' ? parseTextArray(value) : value;
}

/** bigint beyond 2^53 stays a string: a silently rounded number would be wrong data. */
function decodeInteger(value: unknown): unknown {
  if (typeof value === 'string' && /^-?\d+$/.test(value)) {
    const parsed = Number(value);
    return Number.isSafeInteger(parsed) ? parsed : value;
  }
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : String(value);
  }
  return value;
}

/**
 * pg's default parser builds a date at local midnight, so the local calendar fields are the stored date.
 * Strings keep their first ten characters; 'infinity' and BC dates pass through as text.
 */
function decodeDate(value: unknown): unknown {
  // Postgres' "2024-01-15": ten characters come out unchanged below anyway, so skip the checks (exports decode millions).
  if (typeof value === 'string' && value.length === 10) return value;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) return null;
    const pad = (n: number, width = 2) => String(n).padStart(width, '0');
    return `${pad(value.getFullYear(), 4)}-${pad(value.getMonth() + 1)}-${pad(value.getDate())}`;
  }
  if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}(?!.*BC)/.test(value)) return value.slice(0, 10);
  return value;
}

/** Dates and Postgres' text form ("2024-01-15 10:30:00.123456+05:30", "+00") become ISO strings (UTC). */
function decodeDatetime(value: unknown): unknown {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (typeof value !== 'string') return value;
  // The usual case, many times cheaper than a Date: exports decode millions of these.
  if (isUtcTimestamp(value)) return utcTimestampIso(value);
  const iso = value
    .replace(' ', 'T')
    .replace(/([+-]\d{2})$/, '$1:00')
    .replace(/([+-]\d{2})(\d{2})$/, '$1:$2');
  const parsed = new Date(iso);
  return Number.isNaN(parsed.getTime()) ? value : parsed.toISOString();
}

/** Positions of the separators in "2024-01-15 10:30:00": the rest are digits. */
const TIMESTAMP_SEPARATORS: Readonly<Record<number, number>> = { 4: 45, 7: 45, 10: 32, 13: 58, 16: 58 };

/**
 * Postgres' text of a timestamptz in a UTC session, "2024-01-15 10:30:00+00" with up to six decimals
 * of seconds (".123456") before the "+00", and a 4-digit year of our era (BC dates end with " BC").
 */
function isUtcTimestamp(text: string): boolean {
  const length = text.length;
  if (length !== 22 && (length < 24 || length > 29)) return false;
  // "+00" at the end, "." before the decimals.
  if (text.charCodeAt(length - 3) !== 43 || text.charCodeAt(length - 2) !== 48 || text.charCodeAt(length - 1) !== 48)
    return false;
  if (length > 22 && text.charCodeAt(19) !== 46) return false;
  for (let i = 0; i < length - 3; i++) {
    if (i === 19) continue;
    const code = text.charCodeAt(i);
    const separator = TIMESTAMP_SEPARATORS[i];
    if (separator === undefined ? code < 48 || code > 57 : code !== separator) return false;
  }
  return true;
}

/** The ISO string of an isUtcTimestamp text, as Date gives it: milliseconds, further decimals cut off. */
function utcTimestampIso(text: string): string {
  const decimals = text.length - 23;
  if (decimals >= 3) return `${text.slice(0, 10)}T${text.slice(11, 23)}Z`;
  const millis = decimals > 0 ? text.slice(20, 20 + decimals).padEnd(3, '0') : '000';
  return `${text.slice(0, 10)}T${text.slice(11, 19)}.${millis}Z`;
}

/** Parses a one-dimensional Postgres text[] literal such as {a,"b c","d\"e"}; anything else passes through. */
export function parseTextArray(literal: string): unknown {
  if (!literal.startsWith('{') || !literal.endsWith('}')) return literal;
  const body = literal.slice(1, -1);
  const items: (string | null)[] = [];
  let i = 0;
  while (i < body.length) {
    if (body[i] === '"') {
      let item = '';
      i++;
      while (i < body.length && body[i] !== '"') {
        if (body[i] === '\\') i++;
        item += body[i] ?? '';
        i++;
      }
      i++; // closing quote
      items.push(item);
    } else {
      const end = body.indexOf(',', i) === -1 ? body.length : body.indexOf(',', i);
      const raw = body.slice(i, end);
      items.push(raw === 'NULL' ? null : raw);
      i = end;
    }
    if (body[i] === ',') i++;
  }
  return items;
}
