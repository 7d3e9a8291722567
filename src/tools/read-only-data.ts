import { CompiledQuery } from 'kysely';
import { DomainError } from '../common/domain-error';
import type { DataPool, DataReadOptions, DataSession } from '../database/data-pool';
import { DATA_READER_ROLE } from '../database/database.constants';
import { DATA_EXCEPTION_CLASS, INSUFFICIENT_PRIVILEGE, READ_ONLY_SQL_TRANSACTION, sqlState } from '../common/pg-errors';

/**
 * Runs `fn` with a session of the data pool's reader connections (DataPool.readerSession): each
 * statement runs as the SELECT-only role DATA_READER_ROLE in a READ ONLY transaction of its own, with
 * the data engine's statement timeout, cancelled when `signal` aborts. Even a tool that tries to write
 * (or an engine bug) fails with `read_only_transaction`, twice over: the transaction is read-only, and
 * the role may not write anything; a slow query ends as `query_timeout`.
 * `options.background`: a durable chat's call, whose statements each take a slot of the pool's background share first;
 * `options.key`: the caller's API key, whose share of the pool its statements take.
 */
export async function withReadOnlyData<T>(
  pool: DataPool,
  options: DataReadOptions,
  fn: (session: DataSession) => Promise<T>,
): Promise<T> {
  try {
    return await fn(pool.readerSession(options));
  } catch (error) {
    throw translateReadOnlyError(error) ?? error;
  }
}

/**
 * At start: the app's database user must be able to switch to the reader role (a migration makes it,
 * which needs CREATEROLE once). Without it every data tool would fail, so the server does not start.
 */
export async function checkReaderRole(pool: DataPool): Promise<void> {
  try {
    await pool.readerSession().query(CompiledQuery.raw('select 1'));
  } catch (error) {
    throw new Error(
      `The data tools run under the Postgres role "${DATA_READER_ROLE}", which this database user cannot use ` +
        `(${error instanceof Error ? error.message : String(error)}). Give the user CREATEROLE for the first start, or ` +
        `have an administrator run: CREATE ROLE "${DATA_READER_ROLE}" NOLOGIN; GRANT "${DATA_READER_ROLE}" TO <app user>;`,
      { cause: error },
    );
  }
}

/** SQLSTATEs a read-only tool call can hit, turned into errors the model can act on. */
function translateReadOnlyError(error: unknown): DomainError | undefined {
  if (error instanceof DomainError) return undefined;
  const code = sqlState(error);
  if (code === READ_ONLY_SQL_TRANSACTION || code === INSUFFICIENT_PRIVILEGE) {
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
