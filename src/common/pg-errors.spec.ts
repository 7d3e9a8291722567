import { QUERY_CANCELED, UNIQUE_VIOLATION, sqlState } from './pg-errors';

/** An Error carrying a driver-style `code`, optionally wrapping another error. */
function pgError(code: unknown, cause?: unknown): Error {
  return Object.assign(new Error('boom', { cause }), { code });
}

describe('sqlState', () => {
  it('reads the code of a driver error', () => {
    expect(sqlState(pgError('23505'))).toBe(UNIQUE_VIOLATION);
  });

  it('finds the code through nested causes', () => {
    const wrapped = new Error('outer', { cause: new Error('middle', { cause: pgError('57014') }) });
    expect(sqlState(wrapped)).toBe(QUERY_CANCELED);
  });

  it('prefers the outermost valid code', () => {
    expect(sqlState(pgError('22P02', pgError('23505')))).toBe('22P02');
  });

  it('skips codes that are not SQLSTATEs and keeps looking in the cause', () => {
    expect(sqlState(pgError('ECONNREFUSED', pgError('25006')))).toBe('25006');
    expect(sqlState(pgError('23505x'))).toBeUndefined();
    expect(sqlState(pgError('2350'))).toBeUndefined();
    expect(sqlState(pgError('22p02'))).toBeUndefined();
    expect(sqlState(pgError(23505))).toBeUndefined();
    expect(sqlState(pgError('unique_violation'))).toBeUndefined();
  });

  it.each([undefined, null, 0, '', '23505', 23505, true, {}, []])('is undefined for %p', (value) => {
    expect(sqlState(value)).toBeUndefined();
  });

  it('reads plain objects too (not only Error instances)', () => {
    expect(sqlState({ code: '23503' })).toBe('23503');
    expect(sqlState({ cause: { code: '23001' } })).toBe('23001');
  });

  it('stops after a bounded number of causes, also on a cycle', () => {
    const cyclic: { code?: string; cause?: unknown } = {};
    cyclic.cause = cyclic;
    expect(sqlState(cyclic)).toBeUndefined();
    let deep: unknown = pgError('23505');
    for (let i = 0; i < 10; i++) deep = new Error(`level ${i}`, { cause: deep });
    expect(sqlState(deep)).toBeUndefined();
  });
});
