import { CompiledQuery } from 'kysely';
import { DomainError } from '../../common/domain-error';
import { clampLimit, clampOffset } from '../../common/limits';
import { match } from '../../../test/support/matchers';
import { readData } from './data-tool.support';

describe('clampLimit (query_records: default 20, max 200)', () => {
  it.each([
    [undefined, 20],
    [null, 20],
    [0, 20],
    [-5, 20],
    ['abc', 20],
    ['NaN', 20],
    [Number.NaN, 20],
    ['', 20],
    [true, 20],
    [{}, 20],
    [7.9, 7],
    ['7.9', 7],
    [0.5, 20],
    [1, 1],
    [200, 200],
    [201, 200],
    [500, 200],
    ['500', 200],
    [Number.POSITIVE_INFINITY, 200],
    ['15', 15],
  ])('%p → %p', (input, expected) => {
    expect(clampLimit(input, 20, 200)).toBe(expected);
  });
});

describe('clampOffset', () => {
  it.each([
    [undefined, 0],
    [-3, 0],
    ['x', 0],
    ['NaN', 0],
    [null, 0],
    [2.7, 2],
    ['40', 40],
    [0, 0],
    [false, 0],
  ])('%p → %p', (input, expected) => {
    expect(clampOffset(input)).toBe(expected);
  });
});

describe('readData error shaping', () => {
  const deps = (error: DomainError) => ({
    data: {} as never,
    metadata: {} as never,
    // Each statement of the reader session fails with `error`.
    pool: { readerSession: () => ({ inTransaction: false, query: () => Promise.reject(error) }) } as never,
    access: {} as never,
    views: {} as never,
    history: {} as never,
  });

  it('caps the available fields of unknown_field at 40', async () => {
    const fields = Array.from({ length: 55 }, (_, i) => `field_${i}`);
    const error = new DomainError('unknown_field', 'Unknown field "nope" on object "wide"', {
      field: 'nope',
      object: 'wide',
      availableFields: fields,
    });
    await expect(
      readData(deps(error), { signal: new AbortController().signal }, (session) => session.query(CompiledQuery.raw('select 1'))),
    ).rejects.toMatchObject({
      code: 'unknown_field',
      details: { availableFields: fields.slice(0, 40), moreFields: 15 },
      message: match.stringContaining('(and 15 more)'),
    });
  });

  it("lists only the agent's objects when an object is not found", async () => {
    const error = new DomainError('object_not_found', 'Object "x" not found', {
      availableObjects: ['account', 'contact', 'deal'],
    });
    const agent = { name: 'a', tools: [], allowedObjects: ['deal'] };
    await expect(
      readData(deps(error), { signal: new AbortController().signal, agent }, (session) =>
        session.query(CompiledQuery.raw('select 1')),
      ),
    ).rejects.toMatchObject({
      details: { availableObjects: ['deal'] },
    });
  });
});
