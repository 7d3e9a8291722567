import { CompiledQuery } from 'kysely';
import type { DataPool, DataReadOptions, DataSession } from '../database/data-pool';
import { checkReaderRole, withReadOnlyData } from './read-only-data';

/** A pool whose reader sessions record their statements and options, and fail with `error`, if given. */
function fakePool(error?: Error): { pool: DataPool; statements: string[]; options: DataReadOptions[] } {
  const statements: string[] = [];
  const options: DataReadOptions[] = [];
  const pool = {
    readerSession: (opts: DataReadOptions = {}): DataSession => {
      options.push(opts);
      return {
        inTransaction: false,
        query: <T>(query: { sql: string }) => {
          statements.push(query.sql);
          return error ? Promise.reject(error) : Promise.resolve([] as T[]);
        },
      };
    },
  };
  return { pool: pool as unknown as DataPool, statements, options };
}

describe('read-only data sessions', () => {
  it("run the work's statements on the reader session, with the call's signal and share", async () => {
    const { pool, statements, options } = fakePool();
    const signal = new AbortController().signal;
    await withReadOnlyData(pool, { signal, background: true, key: 'k1' }, (session) =>
      session.query(CompiledQuery.raw('select 1')),
    );
    expect(statements).toEqual(['select 1']);
    expect(options).toEqual([{ signal, background: true, key: 'k1' }]);
  });

  it.each([
    ['the role', '42501', 'permission denied for table deal'],
    ['the read-only transaction', '25006', 'cannot execute UPDATE in a read-only transaction'],
  ])('turn a write refused by %s (%s) into read_only_transaction', async (_by, code, message) => {
    const { pool } = fakePool(Object.assign(new Error(message), { code }));
    await expect(withReadOnlyData(pool, {}, (session) => session.query(CompiledQuery.raw('update x')))).rejects.toMatchObject({
      code: 'read_only_transaction',
    });
  });

  it('refuse to start, saying what to grant, when the role cannot be used', async () => {
    const { pool } = fakePool(Object.assign(new Error('permission denied to set role "data_copilot_reader"'), { code: '42501' }));
    await expect(checkReaderRole(pool)).rejects.toThrow(/GRANT "data_copilot_reader" TO <app user>/);
  });
});
