import type { ComparisonOperatorExpression, Expression, ExpressionBuilder, Kysely, ReferenceExpression, SqlBool } from 'kysely';
import { CompiledQuery } from 'kysely';
import { quoteIdent } from './sql-identifier';

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
 * A compiled query, so that it runs on the ORM's connection as on a data transaction.
 */
export function recordsetInsert<DB, Table extends keyof DB & string>(
  table: Table,
  columns: ColumnTypes<DB[Table]>,
  rows: readonly { readonly [Column in keyof DB[Table] & string]?: unknown }[],
): CompiledQuery {
  const names = Object.keys(columns) as (keyof DB[Table] & string)[];
  const list = names.map(quoteIdent).join(', ');
  const definition = names.map((name) => `${quoteIdent(name)} ${columns[name] ?? 'text'}`).join(', ');
  // NUL cannot be stored in jsonb or text: a model or a provider may well send one.
  const json = JSON.stringify(rows).replaceAll('\\u0000', '');
  return CompiledQuery.raw(
    `insert into ${quoteIdent(table)} (${list}) select ${list} from jsonb_to_recordset($1::jsonb) as x(${definition})`,
    [json],
  );
}

/** `recordsetInsert`, run on `db`. */
export async function insertRecordset<DB, Table extends keyof DB & string>(
  db: Kysely<DB>,
  table: Table,
  columns: ColumnTypes<DB[Table]>,
  rows: readonly { readonly [Column in keyof DB[Table] & string]?: unknown }[],
): Promise<void> {
  await db.executeQuery(recordsetInsert(table, columns, rows));
}
