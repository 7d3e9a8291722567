import { DomainError } from '../common/domain-error';
import type { DataPool, DataSession } from '../database/data-pool';
import { DATA_EXCEPTION_CLASS, READ_ONLY_SQL_TRANSACTION, sqlState } from '../database/pg-errors';

/**
 * Runs `fn` in a READ ONLY transaction of the data pool, whose statements have the data engine's
 * statement timeout and are cancelled when `signal` aborts. Even a tool that tries to write (or an
 * engine bug) fails with `read_only_transaction`; a slow query ends as `query_timeout`. `background`:
 * a durable chat's call, which takes a slot of the pool's background share first.
 */
export async function withReadOnlyTransaction<T>(
  pool: DataPool,
  signal: AbortSignal | undefined,
  fn: (session: DataSession) => Promise<T>,
  background = false,
): Promise<T> {
  try {
    return await pool.transaction(fn, { readOnly: true, signal, ...(background ? { background } : {}) });
  } catch (error) {
    throw translateReadOnlyError(error) ?? error;
  }
}

/** SQLSTATEs a read-only tool call can hit, turned into errors the model can act on. */
function translateReadOnlyError(error: unknown): DomainError | undefined {
  if (error instanceof DomainError) return undefined;
  const code = sqlState(error);
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
