import { CompiledQuery } from 'kysely';
import type { DataSession } from './data-pool';

/**
 * Runs `work` behind the savepoint `name` of `session`'s transaction: released when it returns, rolled
 * back to when it throws an error that `undo` accepts (every error by default), then rethrown.
 */
export async function inSavepoint<T>(
  session: DataSession,
  name: 'batch_attempt' | 'batch_operation' | 'link_locks',
  work: (session: DataSession) => Promise<T>,
  undo: (error: unknown) => boolean = () => true,
): Promise<T> {
  await session.query(CompiledQuery.raw(`savepoint ${name}`));
  try {
    const result = await work(session);
    await session.query(CompiledQuery.raw(`release savepoint ${name}`));
    return result;
  } catch (error) {
    if (undo(error)) await session.query(CompiledQuery.raw(`rollback to savepoint ${name}`));
    throw error;
  }
}
