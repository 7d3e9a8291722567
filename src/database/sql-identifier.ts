import { DomainError } from '../common/domain-error';

/** Names that metadata accepts for objects and fields: snake_case, at most 63 bytes (Postgres' limit). */
export const IDENTIFIER_PATTERN = /^[a-z][a-z0-9_]{0,62}$/;

/**
 * The only function that turns a name into SQL. It quotes, and refuses anything that is not a
 * metadata-shaped identifier, so even a bug upstream cannot smuggle SQL through a name.
 */
export function quoteIdent(name: string): string {
  if (typeof name !== 'string' || !IDENTIFIER_PATTERN.test(name)) {
    throw new DomainError('invalid_identifier', `Invalid identifier "${String(name)}"`);
  }
  return `"${name}"`;
}

/** Schema that holds one table per object. */
export const DATA_SCHEMA = 'data';

/** `"data"."<object>"`: the physical table of an object. */
export function objectTable(objectName: string): string {
  return `${quoteIdent(DATA_SCHEMA)}.${quoteIdent(objectName)}`;
}

/**
 * `expression` folded for search: lower case, accents removed (the `search_fold` function of the views
 * and search migration). Trigram indexes are built over it, so a search must use the same expression.
 */
export function searchFold(expression: string): string {
  return `public.search_fold(${expression})`;
}
