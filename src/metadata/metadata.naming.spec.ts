import { domainError } from '../../test/support/metadata-fixtures';
import { assertValidName, indexName } from './metadata.naming';

describe('assertValidName', () => {
  it.each(['deal', 'a', 'deal_stage_2', 'x'.repeat(63)])('accepts %s for every kind', (name) => {
    for (const kind of ['object', 'field', 'view'] as const) expect(() => assertValidName(kind, name)).not.toThrow();
  });

  it.each([
    ['an upper-case letter', 'Deal'],
    ['a leading digit', '2deals'],
    ['a leading underscore', '_deal'],
    ['a trailing underscore', 'deal_'],
    ['a double underscore', 'deal__stage'],
    ['a dash', 'deal-stage'],
    ['64 characters', 'x'.repeat(64)],
    ['the empty string', ''],
    ['a number', 42],
    ['null', null],
  ])('refuses %s with invalid_name', (_what, name) => {
    const error = domainError(() => assertValidName('object', name));
    expect(error.code).toBe('invalid_name');
    expect(error.message).toContain(`Invalid object name "${String(name)}"`);
  });

  it('refuses reserved words and pg_ names for objects and fields, and system columns for fields only', () => {
    for (const [kind, name] of [
      ['object', 'select'],
      ['field', 'user'],
      ['field', 'xmin'],
      ['object', 'pg_stats'],
      ['field', 'id'],
      ['field', 'ref'],
      ['field', 'created_at'],
    ] as const) {
      expect(domainError(() => assertValidName(kind, name)).code).toBe('reserved_name');
    }
    expect(() => assertValidName('object', 'updated_at')).not.toThrow();
  });

  it('lets a view take a reserved word: a view name is never an SQL identifier', () => {
    expect(() => assertValidName('view', 'select')).not.toThrow();
    expect(() => assertValidName('view', 'id')).not.toThrow();
  });
});

describe('indexName', () => {
  it('is stable, differs per field and kind, and fits in a Postgres identifier for the longest names', () => {
    const long = 'x'.repeat(63);
    const name = indexName(long, long, 'idx');
    expect(name).toBe(indexName(long, long, 'idx'));
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name).toMatch(/^idx_x{20}_x{20}_[0-9a-f]{10}$/);
    expect(indexName(long, `${long.slice(0, 62)}y`, 'idx')).not.toBe(name);
    expect(indexName('deal', 'stage', 'key')).toMatch(/^key_deal_stage_/);
  });

  it('tells apart names that share their first 20 characters', () => {
    const prefix = 'a'.repeat(20);
    expect(indexName('deal', `${prefix}_one`, 'idx')).not.toBe(indexName('deal', `${prefix}_two`, 'idx'));
  });

  it('never writes a double underscore where a cut name ends in one', () => {
    expect(indexName('deal_', 'x', 'fk')).not.toContain('__');
    expect(indexName(`${'a'.repeat(19)}_b`, 'c', 'trg')).toMatch(/^trg_a{19}_c_[0-9a-f]{10}$/);
  });
});
