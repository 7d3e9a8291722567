import { quoteIdent } from './sql-identifier';

/**
 * The `SET` list of an UPDATE of the columns a patch names: each `set` binds its value after those already in
 * `values` (`"name" = $3`, with a cast such as `::jsonb` when given). Columns are the caller's own literals.
 */
export function columnSets(values: unknown[]): {
  sets: string[];
  set: (column: string, value: unknown, cast?: string) => void;
} {
  const sets: string[] = [];
  const set = (column: string, value: unknown, cast = '') => {
    values.push(value);
    sets.push(`${quoteIdent(column)} = $${values.length}${cast}`);
  };
  return { sets, set };
}
