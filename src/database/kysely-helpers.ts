import type { ComparisonOperatorExpression, Expression, ExpressionBuilder, Kysely, ReferenceExpression, SqlBool } from 'kysely';
import { sql } from 'kysely';

/** A filter of a list query: column, operator, value; `undefined` as the value means "no filter". */
export type OptionalFilter<DB, TB extends keyof DB> = readonly [
  ReferenceExpression<DB, TB>,
  ComparisonOperatorExpression,
  unknown,
];

/**
 * The AND of the filters whose value is given (a query-string parameter that was sent), `true` when none
 * is: the one way list routes (audit trail, usage report) turn optional parameters into a WHERE.
 */
export function givenFilters<DB, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  filters: readonly OptionalFilter<DB, TB>[],
): Expression<SqlBool> {
  return eb.and(
    filters.filter(([, , value]) => value !== undefined).map(([column, op, value]) => eb(column, op, value as never)),
  );
}

/** Postgres types of the columns a recordset insert writes (`integer`, `text`, `jsonb`, `timestamptz`, ...). */
export type ColumnTypes<Row> = { readonly [Column in keyof Row & string]?: string };

/**
 * One INSERT of many rows, sent as a single jsonb parameter (jsonb_to_recordset): one round trip and one
 * bind parameter whatever the number of rows, for batched writers (usage rows, audited tool calls).
 * `columns` names the columns written, with their Postgres types; each row gives a JSON value per column.
 */
export async function insertRecordset<DB, Table extends keyof DB & string>(
  db: Kysely<DB>,
  table: Table,
  columns: ColumnTypes<DB[Table]>,
  rows: readonly { readonly [Column in keyof DB[Table] & string]?: unknown }[],
): Promise<void> {
  const names = Object.keys(columns) as (keyof DB[Table] & string)[];
  const list = sql.join(names.map((name) => sql.ref(name)));
  const definition = sql.join(names.map((name) => sql`${sql.ref(name)} ${sql.raw(columns[name] ?? 'text')}`));
  // NUL cannot be stored in jsonb or text: a model or a provider may well send one.
  const json = JSON.stringify(rows).replaceAll('\\u0000', '');
  await sql`insert into ${sql.table(table)} (${list}) select ${list} from jsonb_to_recordset(${json}::jsonb) as x(${definition})`.execute(
    db,
  );
}
