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
}
