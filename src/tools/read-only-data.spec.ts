import { CompiledQuery } from 'kysely';
import type { DataPool, DataSession } from '../database/data-pool';
import { checkReaderRole, withReadOnlyTransaction } from './read-only-data';

/** A pool whose transactions record their statements and fail with `error` on the first one, if given. */
function fakePool(error?: Error): { pool: DataPool; statements: string[]; options: unknown[] } {
  const statements: string[] = [];
  const options: unknown[] = [];
  const session: DataSession = {
    inTransaction: true,
    query: <T>(query: { sql: string }) => {
      statements.push(query.sql);
      return error ? Promise.reject(error) : Promise.resolve([] as T[]);
    },
  };
  const pool = {
    transaction: <T>(work: (tx: DataSession) => Promise<T>, opts: unknown) => {
      options.push(opts);
      return work(session);
    },
  };
  return { pool: pool as unknown as DataPool, statements, options };
}

describe('read-only data transactions', () => {
  it('switch to the SELECT-only role before the work runs', async () => {
    const { pool, statements, options } = fakePool();
    await withReadOnlyTransaction(pool, undefined, (session) => session.query(CompiledQuery.raw('select 1')));
    expect(statements).toEqual(['set local role "data_copilot_reader"', 'select 1']);
    expect(options).toEqual([{ readOnly: true, signal: undefined }]);
  });

  it('turn a write refused by the role (42501) into read_only_transaction', async () => {
    const { pool } = fakePool(Object.assign(new Error('permission denied for table deal'), { code: '42501' }));
    await expect(withReadOnlyTransaction(pool, undefined, () => Promise.resolve(1))).rejects.toMatchObject({
      code: 'read_only_transaction',
    });
  });

  it('refuse to start, saying what to grant, when the role cannot be used', async () => {
    const { pool } = fakePool(Object.assign(new Error('permission denied to set role "data_copilot_reader"'), { code: '42501' }));
    await expect(checkReaderRole(pool)).rejects.toThrow(/GRANT "data_copilot_reader" TO <app user>/);
  });
});
