import { DomainError } from '../common/domain-error';
import {
  bindCastOf,
  decimalScale,
  FIELD_COLUMN_TYPES,
  FIELD_OPERATORS,
  FIELD_TYPE_REGISTRY,
  FIELD_TYPES,
  type FieldTypeEntry,
  fieldIndex,
  fieldSummary,
  fieldTypeOf,
  isFieldType,
  listTypes,
  NUMERIC_TYPES,
  TEMPORAL_TYPES,
  TEXT_TYPES,
} from './field-types';

const entries = Object.entries(FIELD_TYPE_REGISTRY) as Array<[string, FieldTypeEntry]>;
const field = (type: string, extra: { options?: string[] } = {}) => ({
  name: 'f',
  type,
  indexed: false,
  unique: false,
  ...extra,
});

describe('the field type registry', () => {
  it('lists the sixteen stored types in the order the API shows them', () => {
    expect(FIELD_TYPES).toEqual([
      'text',
      'textarea',
      'email',
      'url',
      'phone',
      'number',
      'currency',
      'percent',
      'integer',
      'boolean',
      'date',
      'datetime',
      'select',
      'multiselect',
      'lookup',
      'json',
    ]);
  });

  it.each(entries)('%s has every part an entry needs', (_type, entry) => {
    expect(['text', 'numeric', 'temporal', 'boolean', 'options', 'reference', 'document']).toContain(entry.family);
    expect(['scalar', 'set', 'document']).toContain(entry.shape);
    expect(['btree', 'gin']).toContain(entry.index);
    expect(typeof entry.encode).toBe('function');
    for (const flag of [entry.unique, entry.indexBytes, entry.searchable, entry.sorts, entry.groups]) {
      expect(typeof flag).toBe('boolean');
    }
    expect(entry.operators.length).toBeGreaterThan(0);
    for (const operator of entry.operators) expect(FIELD_OPERATORS).toContain(operator);
    expect(entry.operators).toContain('$null');
    // The words the data tools show: one clause, so the list of types reads as one sentence.
    expect(entry.hint).toMatch(/^[^;()]{3,90}$/);
  });

  it('derives the families as they were listed by hand', () => {
    expect(TEXT_TYPES).toEqual(['text', 'textarea', 'email', 'url', 'phone', 'select']);
    expect(NUMERIC_TYPES).toEqual(['number', 'currency', 'percent', 'integer']);
    expect(TEMPORAL_TYPES).toEqual(['date', 'datetime']);
  });

  it('keeps each column type', () => {
    expect(FIELD_COLUMN_TYPES).toEqual({
      text: 'text',
      textarea: 'text',
      email: 'text',
      url: 'text',
      phone: 'text',
      number: 'double precision',
      currency: 'numeric(18,2)',
      percent: 'numeric(9,4)',
      integer: 'bigint',
      boolean: 'boolean',
      date: 'date',
      datetime: 'timestamptz',
      select: 'text',
      multiselect: 'text[]',
      lookup: 'uuid',
      json: 'jsonb',
    });
  });

  it('binds values with the column type without its typmod, the system id as a uuid', () => {
    expect(bindCastOf('currency')).toBe('numeric');
    expect(bindCastOf('multiselect')).toBe('text[]');
    expect(bindCastOf('uuid')).toBe('uuid');
  });

  it('says which definition properties and rules each type has', () => {
    const where = (test: (entry: FieldTypeEntry) => boolean) => entries.filter(([, entry]) => test(entry)).map(([type]) => type);
    expect(where((entry) => entry.takes.options === true)).toEqual(['select', 'multiselect']);
    expect(where((entry) => entry.takes.reference === true)).toEqual(['lookup']);
    expect(where((entry) => !entry.unique)).toEqual(['boolean', 'multiselect', 'json']);
    expect(where((entry) => entry.searchable)).toEqual(TEXT_TYPES);
    expect(where((entry) => entry.indexBytes)).toEqual([...TEXT_TYPES, 'multiselect']);
    expect(where((entry) => !entry.sorts)).toEqual(['multiselect', 'json']);
    expect(where((entry) => !entry.groups)).toEqual(['textarea', 'json']);
    expect(where((entry) => entry.measures.includes('sum'))).toEqual(NUMERIC_TYPES);
    expect(where((entry) => entry.measures.includes('min'))).toEqual([
      'text',
      'textarea',
      'email',
      'url',
      'phone',
      'number',
      'currency',
      'percent',
      'integer',
      'date',
      'datetime',
      'select',
    ]);
  });

  it('gives each field its index: unique first, lookups always, GIN for sets and documents', () => {
    expect(fieldIndex({ type: 'text', unique: true, indexed: false })).toBe('unique');
    expect(fieldIndex({ type: 'text', unique: false, indexed: false })).toBeUndefined();
    expect(fieldIndex({ type: 'lookup', unique: false, indexed: false })).toBe('field-id');
    expect(fieldIndex({ type: 'integer', unique: false, indexed: true })).toBe('field-id');
    expect(fieldIndex({ type: 'multiselect', unique: false, indexed: true })).toBe('gin');
    expect(fieldIndex({ type: 'json', unique: false, indexed: true })).toBe('gin');
    expect(fieldIndex({ type: 'uuid', unique: false, indexed: false })).toBeUndefined();
  });

  it('reads a field type for formulas as before', () => {
    const read = Object.fromEntries([...FIELD_TYPES, 'uuid' as const].map((type) => [type, fieldTypeOf(type).formula]));
    expect(read).toMatchObject({ integer: 'number', select: 'text', lookup: 'text', uuid: 'text', date: 'date' });
    expect(read.multiselect).toBeUndefined();
    expect(read.json).toBeUndefined();
  });

  it('encodes and decodes through the entry', () => {
    const { currency, multiselect, integer, boolean } = FIELD_TYPE_REGISTRY;
    expect(currency.encode(field('currency'), 12.5, {}, 'write')).toBe(12.5);
    expect(() => currency.encode(field('currency'), 1e16, {}, 'write')).toThrow(DomainError);
    expect(multiselect.encode(field('multiselect', { options: ['a', 'b'] }), ['b', 'b', 'a'], {}, 'write')).toEqual(['b', 'a']);
    expect(integer.decode('9007199254740993')).toBe('9007199254740993');
    expect(boolean.fromCell(field('boolean'), 'Yes')).toBe(true);
    expect(FIELD_TYPE_REGISTRY.text).not.toHaveProperty('fromCell');
  });

  it('says what an average reads as and what its numbers are', () => {
    const averages = Object.fromEntries(NUMERIC_TYPES.map((type) => [type, fieldTypeOf(type).averageType ?? type]));
    expect(averages).toEqual({ number: 'number', currency: 'currency', percent: 'percent', integer: 'number' });
    const figures = Object.fromEntries(NUMERIC_TYPES.map((type) => [type, fieldTypeOf(type).figure]));
    expect(figures).toEqual({ number: 'number', currency: 'money', percent: 'percent', integer: 'count' });
    expect(fieldTypeOf('date').figure).toBeUndefined();
    expect([decimalScale('currency'), decimalScale('percent'), decimalScale('number')]).toEqual([2, 4, undefined]);
  });

  it('sums a field up in a few words for the agents', () => {
    expect(fieldSummary({ type: 'lookup', reference: 'account' })).toBe('lookup → account');
    expect(fieldSummary({ type: 'select', options: ['open', 'won'] })).toBe('select: open | won');
    expect(fieldSummary({ type: 'currency' })).toBe('currency');
  });

  it('knows its own types and nothing else', () => {
    expect(isFieldType('currency')).toBe(true);
    expect(isFieldType('formula')).toBe(false);
    expect(isFieldType('toString')).toBe(false);
    expect(listTypes(['select', 'multiselect'])).toBe('select and multiselect');
    expect(listTypes(['a', 'b', 'c'])).toBe('a, b and c');
  });
});
