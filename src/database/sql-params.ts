import { CompiledQuery } from 'kysely';

/**
 * Collects bound values while SQL text is built: `params.add(v)` returns the `$n` placeholder.
 * Values never enter SQL text; they travel to Postgres as bind parameters.
 */
export class SqlParams {
  readonly values: unknown[] = [];

  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }

  /** The finished statement: `sql` with the values collected for it. */
  query<T = Record<string, unknown>>(sql: string): CompiledQuery<T> {
    return CompiledQuery.raw(sql, [...this.values]);
  }
}
