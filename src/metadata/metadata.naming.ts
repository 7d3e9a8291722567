import { createHash } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';

/** Column names every object table has; a field may not take them. */
export const SYSTEM_COLUMN_NAMES = ['id', 'created_at', 'updated_at'];

/** Keys the server adds to every row a data tool returns (the row's figure reference): no field may take them. */
const ROW_KEYS = ['ref'];

/**
 * Postgres reserved words (and a few that confuse readers of generated SQL). Identifiers are always
 * quoted, so this is about clarity for people and models, not about injection.
 */
const RESERVED_WORDS = new Set(
  (
    'all analyse analyze and any array as asc asymmetric authorization binary both case cast check collate ' +
    'collation column concurrently constraint create cross current_catalog current_date current_role ' +
    'current_schema current_time current_timestamp current_user default deferrable desc distinct do else end ' +
    'except false fetch for foreign freeze from full grant group having ilike in initially inner intersect into ' +
    'is isnull join lateral leading left like limit localtime localtimestamp natural not notnull null offset on ' +
    'only or order outer overlaps placing primary references returning right select session_user similar some ' +
    'symmetric system_user table tablesample then to trailing true union unique user using variadic verbose ' +
    'when where window with oid ctid xmin xmax cmin cmax tableoid'
  ).split(' '),
);

/**
 * Checks an object, field or view name: snake_case, ≤ 63 characters; object and field names (SQL
 * identifiers) also not reserved. Throws a 400 domain error.
 */
export function assertValidName(kind: 'object' | 'field' | 'view', name: unknown): asserts name is string {
  if (typeof name !== 'string' || !IDENTIFIER_PATTERN.test(name) || name.endsWith('_') || name.includes('__')) {
    throw new DomainError(
      'invalid_name',
      `Invalid ${kind} name "${String(name)}": use snake_case (a-z, 0-9, single underscores), starting with a letter, at most 63 characters`,
    );
  }
  if (kind === 'view') return;
  if (
    RESERVED_WORDS.has(name) ||
    name.startsWith('pg_') ||
    (kind === 'field' && (SYSTEM_COLUMN_NAMES.includes(name) || ROW_KEYS.includes(name)))
  ) {
    throw new DomainError('reserved_name', `The ${kind} name "${name}" is reserved`);
  }
}

/** Short, stable, valid index name for (object, field, kind); Postgres truncates names past 63 bytes. */
export function indexName(objectName: string, fieldName: string, kind: 'idx' | 'key' | 'nul' | 'fk' | 'trg'): string {
  const hash = createHash('sha1').update(`${objectName}.${fieldName}`).digest('hex').slice(0, 10);
  return `${kind}_${objectName.slice(0, 20)}_${fieldName.slice(0, 20)}_${hash}`.replace(/__+/g, '_');
}
