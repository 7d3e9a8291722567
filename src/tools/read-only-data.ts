import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../common/domain-error';
import { DATA_EXCEPTION_CLASS, QUERY_CANCELED, READ_ONLY_SQL_TRANSACTION, sqlState } from '../database/pg-errors';
import { runSql } from '../database/sql';

/**
 * Runs `fn` in a transaction of its own (on a fork of `em`) that cannot write and whose statements
 * are cancelled after `statementTimeoutMs`. Even a tool that tries to write (or an engine bug) fails
 * with `read_only_transaction`; a slow query ends as `query_timeout`.
 */
export async function withReadOnlyTransaction<T>(
  em: EntityManager,
  statementTimeoutMs: number,
  fn: (em: EntityManager) => Promise<T>,
): Promise<T> {
  if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs < 1) {
    throw new Error(`statementTimeoutMs must be a positive integer, got ${statementTimeoutMs}`);
  }
  try {
    return await em.fork().transactional(async (tx) => {
      // Must be the first statement of the transaction; set_config(..., true) is local to it.
      await runSql(tx, 'SET TRANSACTION READ ONLY');
      await runSql(tx, `select set_config('statement_timeout', $1, true)`, [String(statementTimeoutMs)]);
      return fn(tx);
    });
  } catch (error) {
    throw translateReadOnlyError(error, statementTimeoutMs) ?? error;
  }
}

/** SQLSTATEs a read-only tool call can hit, turned into errors the model can act on. */
function translateReadOnlyError(error: unknown, statementTimeoutMs: number): DomainError | undefined {
  if (error instanceof DomainError) return undefined;
  const code = sqlState(error);
  if (code === QUERY_CANCELED) {
    return new DomainError(
      'query_timeout',
      `The query took longer than ${statementTimeoutMs} ms and was cancelled. Ask for less: add filters to where, ` +
        'request fewer fields, use a smaller limit, or aggregate instead of listing records.',
      { statementTimeoutMs },
    );
  }
  if (code === READ_ONLY_SQL_TRANSACTION) {
    return new DomainError('read_only_transaction', 'This tool can only read data; changing records is not possible here.');
  }
  if (code?.startsWith(DATA_EXCEPTION_CLASS)) {
    return new DomainError(
      'invalid_value',
      'A value in the query has the wrong format or is out of range for its field. Check the field types with describe_object.',
    );
  }
  return undefined;
}
