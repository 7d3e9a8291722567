import { isComputed } from '../metadata/computed-fields';
import { hash } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { bindCast } from './field-value.codec';
import { fieldSql } from './formula.compiler';
import { type FieldMeta, fieldIndex } from '../metadata/object-metadata.types';
import { mayBeEmpty, orderBySql, type OrderTerm } from './order-by.compiler';

/**
 * Keyset paging. A cursor holds the sort-key values of the last record of a page, as PostgreSQL
 * wrote them as text (exact: timestamps keep their microseconds, numerics every digit), and a
 * signature of the query it belongs to. The next page is the records strictly after that position
 * in the same order, whatever was inserted or deleted meanwhile: nothing is skipped or repeated,
 * and no page scans the ones before it (with an index that serves the order).
 */

/** Cursors are opaque to clients; the version lets their format change later. */
const CURSOR_VERSION = 1;
/** The longest cursor accepted (five sort keys of long text values fit). */
export const MAX_CURSOR_LENGTH = 8_000;
/** Prefix of the sort-key columns a page selects besides the record's fields (for keys not among them). */
export const KEY_ALIAS = '__k';

interface CursorBody {
  v: number;
  /** The query's signature: the cursor only continues the query that made it. */
  q: string;
  k: (string | null)[];
}

/**
 * What a cursor is bound to: the object, the filter (a view's included: callers pass the where a view
 * resolved to), the search text and the sort keys (not the fields selected, nor the page size).
 */
export function querySignature(objectName: string, where: unknown, terms: readonly OrderTerm[], search?: string): string {
  const order = terms.map((t) => `${t.field.name}:${t.descending ? 'd' : 'a'}`);
  return hash(
    'sha256',
    JSON.stringify([objectName, where ?? null, order, ...(search === undefined ? [] : [search])]),
    'base64url',
  ).slice(0, 16);
}

export function encodeCursor(signature: string, keys: (string | null)[]): string {
  const body: CursorBody = { v: CURSOR_VERSION, q: signature, k: keys };
  return Buffer.from(JSON.stringify(body)).toString('base64url');
}

/** The sort-key values a cursor holds; invalid_cursor when it is not one, or belongs to another query. */
export function decodeCursor(raw: string, signature: string, keyCount: number): (string | null)[] {
  let body: Partial<CursorBody> | undefined;
  try {
    body =
      raw.length <= MAX_CURSOR_LENGTH ? (JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as CursorBody) : undefined;
  } catch {
    body = undefined;
  }
  const keys = body?.k;
  const valid =
    body?.v === CURSOR_VERSION &&
    Array.isArray(keys) &&
    keys.length === keyCount &&
    keys.every((key) => key === null || typeof key === 'string');
  if (!valid) throw new DomainError('invalid_cursor', 'cursor is not a cursor this API returned (nextCursor of a records page)');
  if (body!.q !== signature) {
    throw new DomainError(
      'invalid_cursor',
      'This cursor belongs to another query: send the same where and orderBy as the page that returned it',
    );
  }
  return keys;
}

/**
 * Where a page's rows hold each sort key: the selected field's own column, or `__k<i>` (the column
 * selected as is, for a key the caller did not ask for). `refs` name them in a statement over the
 * page's rows; `extra` is what the page selects besides the fields, as `aliases`.
 */
export function sortKeyColumns(
  terms: readonly OrderTerm[],
  fields: readonly FieldMeta[],
  params?: SqlParams,
): { refs: string[]; extra: string[]; aliases: string[] } {
  const selected = new Set(fields.map((f) => f.name));
  const refs: string[] = [];
  const extra: string[] = [];
  const aliases: string[] = [];
  terms.forEach((term, i) => {
    if (selected.has(term.field.name)) return refs.push(quoteIdent(term.field.name));
    const alias = `"${KEY_ALIAS}${i}"`;
    refs.push(alias);
    aliases.push(alias);
    // Without `params`, only refs and aliases are wanted: a formula's SQL would bind parameters no statement uses.
    if (params || !isComputed(term.field)) extra.push(`${fieldSql(term.field, params)} as ${alias}`);
  });
  return { refs, extra, aliases };
}

/**
 * The cursor keys of a row of a page (as the driver returned it, before decoding): each sort key as
 * PostgreSQL writes it as text. The driver hands dates, timestamps, numerics and bigints over as that
 * text already, and doubles and booleans parsed: their JavaScript text casts back to the same value.
 */
export function rowKeys(row: Record<string, unknown>, terms: readonly OrderTerm[]): (string | null)[] {
  return terms.map((term, i) => {
    const alias = `${KEY_ALIAS}${i}`;
    const value = alias in row ? row[alias] : row[term.field.name];
    if (value === null || value === undefined) return null;
    if (typeof value === 'string') return value;
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    throw new Error(`sort key "${term.field.name}" came back as ${typeof value}`);
  });
}

/** Removes the `__k<i>` columns sortKeyColumns added from each row. */
export function dropKeyColumns(rows: Record<string, unknown>[], terms: readonly OrderTerm[]): void {
  for (let i = 0; i < terms.length; i++) {
    const alias = `${KEY_ALIAS}${i}`;
    for (const row of rows) delete row[alias];
  }
}

/** One slice of the rows after a cursor's position: its condition, and the order that reads it off an index. */
export interface KeysetPart {
  condition: string;
  orderBy: string;
}

/**
 * The rows after position `keys` in the order of `terms` (nulls last in both directions, as
 * orderBySql sorts), as disjoint parts: for each term from the last to the first, the rows equal to
 * the position on the terms before it and after it on this one: its values beyond the key (`>`, or
 * `<` descending), then, on a field that may be empty, its nulls. After a null come only other nulls,
 * which the parts of the next terms hold.
 *
 * Each part is one range of an index on (term, id), which every indexed field has: a page reads at
 * most its limit from each part at any depth. A single condition (`a > $1 or a is null or (a = $1 and
 * id > $2)`) leaves PostgreSQL a filter over every row before the position, or a sort of all after it.
 * The parts' orders name the equal terms too (ascending, as indexes are built) and a strict range
 * without NULLS LAST (it holds no null), so that they are the order of an index or its backward scan.
 */
export function keysetParts(terms: readonly OrderTerm[], keys: readonly (string | null)[], params: SqlParams): KeysetPart[] {
  const columns = terms.map((t) => fieldSql(t.field, params));
  const values = keys.map((key, i) => (key === null ? null : `${params.add(key)}::${bindCast(terms[i].field)}`));
  const parts: KeysetPart[] = [];
  for (let i = terms.length - 1; i >= 0; i--) {
    const value = values[i];
    if (value === null) continue;
    const equal = values.slice(0, i).map((v, j) => (v === null ? `${columns[j]} is null` : `${columns[j]} = ${v}`));
    const order = (own: string) =>
      [
        ...columns.slice(0, i).map((c) => `${c} ASC`),
        own,
        ...(i + 1 < terms.length ? [orderBySql(terms.slice(i + 1), undefined, params)] : []),
      ].join(', ');
    const { field, descending } = terms[i];
    parts.push({
      condition: [...equal, `${columns[i]} ${descending ? '<' : '>'} ${value}`].join(' and '),
      orderBy: order(`${columns[i]} ${descending ? 'DESC' : 'ASC'}`),
    });
    if (mayBeEmpty(field))
      parts.push({ condition: [...equal, `${columns[i]} is null`].join(' and '), orderBy: order(`${columns[i]} ASC`) });
  }
  return parts;
}

/**
 * The whole order as disjoint parts (what keysetParts gives after a position, for a first page or an
 * offset): one part, the query's order, unless the first key is a field with an index that may be
 * empty and one scan of that index cannot give its values and then its empty rows in order: sorted
 * descending (a backward scan puts nulls first, and `DESC NULLS LAST, "id" ASC` is no index's order),
 * or a unique field (its unique index is on the field alone, its empty rows are ordered by id in a
 * partial index). Then its values in plain DESC (or ASC), and its empty rows. Without an index, one
 * part: two would be two scans of the table.
 */
export function leadingParts(terms: readonly OrderTerm[], params?: SqlParams): KeysetPart[] {
  const [first] = terms;
  const index = fieldIndex(first.field);
  const split = mayBeEmpty(first.field) && (index === 'unique' || (index === 'field-id' && first.descending));
  if (!split) return [{ condition: 'true', orderBy: orderBySql(terms, undefined, params) }];
  const column = fieldSql(first.field, params);
  const rest = terms.length > 1 ? `, ${orderBySql(terms.slice(1), undefined, params)}` : '';
  return [
    { condition: `${column} is not null`, orderBy: `${column} ${first.descending ? 'DESC' : 'ASC'}${rest}` },
    { condition: `${column} is null`, orderBy: `${column} ASC${rest}` },
  ];
}
