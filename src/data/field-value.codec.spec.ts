import fc from 'fast-check';
import { DomainError } from '../common/domain-error';
import { FieldMeta, MAX_INDEXED_TEXT_BYTES, ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { MAX_JSON_LENGTH, MAX_PATTERN_LENGTH, MAX_TEXT_LENGTH, parseTextArray } from '../metadata/field-values';
import { bindCast, decodeRow, decodeRowsInPlace, encodeFieldValue, fieldDecoder } from './field-value.codec';
import { domainError, field } from '../../test/support/metadata-fixtures';

const f = {
  name: field('name', 'text'),
  notes: field('notes', 'textarea'),
  phone: field('phone', 'phone'),
  email: field('contact_email', 'email'),
  website: field('website', 'url'),
  stage: field('stage', 'select', { options: ['lead', 'won', 'lost'] }),
  tags: field('tags', 'multiselect', { options: ['vip', 'renewal', 'partner'] }),
  score: field('score', 'number'),
  amount: field('amount', 'currency'),
  probability: field('probability', 'percent'),
  quantity: field('quantity', 'integer'),
  closed: field('is_closed', 'boolean'),
  closeDate: field('close_date', 'date'),
  closedAt: field('closed_at', 'datetime'),
  account: field('account_id', 'lookup', { reference: 'account' }),
  meta: field('meta', 'json'),
};

const deal: ObjectMeta = { name: 'deal', label: 'Deal', fields: [...Object.values(f), ...SYSTEM_FIELDS] };

function expectInvalid(fieldMeta: FieldMeta, value: unknown, operator?: string): DomainError {
  const error = domainError(() => encodeFieldValue(fieldMeta, value, operator ? { operator } : undefined));
  expect(error.code).toBe('invalid_value');
  expect(error.details).toMatchObject({ field: fieldMeta.name, type: fieldMeta.type });
  expect(error.message).toMatch(new RegExp(`^Field "${fieldMeta.name}" expects `));
  return error;
}

describe('encodeFieldValue', () => {
  it('keeps null as null for every type', () => {
    for (const meta of Object.values(f)) expect(encodeFieldValue(meta, null)).toBeNull();
  });

  it('refuses undefined, which is not a JSON value', () => {
    expectInvalid(f.name, undefined);
    expectInvalid(f.amount, undefined);
  });

  describe('text-like fields', () => {
    it('returns strings unchanged, empty string included', () => {
      expect(encodeFieldValue(f.name, 'Acme renewal')).toBe('Acme renewal');
      expect(encodeFieldValue(f.notes, '')).toBe('');
      expect(encodeFieldValue(f.phone, '+1 (555) 010-9999')).toBe('+1 (555) 010-9999');
    });

    it('refuses non-strings with an actionable message', () => {
      const error = expectInvalid(f.name, 42);
      expect(error.message).toBe('Field "name" expects a string, got number 42');
      expectInvalid(f.notes, ['a']);
      expectInvalid(f.phone, { number: '1' });
    });

    it(`caps strings at ${MAX_TEXT_LENGTH} characters and cuts the echo in the message`, () => {
      expect(encodeFieldValue(f.notes, 'x'.repeat(MAX_TEXT_LENGTH))).toHaveLength(MAX_TEXT_LENGTH);
      const error = expectInvalid(f.notes, 'x'.repeat(MAX_TEXT_LENGTH + 1));
      expect(error.details).toMatchObject({ maxLength: MAX_TEXT_LENGTH });
      expect(error.message.length).toBeLessThan(300);
      expectInvalid(f.name, 'y'.repeat(MAX_TEXT_LENGTH + 1), '$contains');
    });

    it('refuses NUL characters, which Postgres text cannot store', () => {
      expectInvalid(f.name, 'a\u0000b');
    });

    it.each(['$contains', '$notContains', '$startsWith', '$endsWith'])(
      `caps the operand of %s at ${MAX_PATTERN_LENGTH} characters, naming the field and the limit`,
      (operator) => {
        expect(encodeFieldValue(f.notes, 'x'.repeat(MAX_PATTERN_LENGTH), { operator })).toHaveLength(MAX_PATTERN_LENGTH);
        const error = expectInvalid(f.notes, 'x'.repeat(MAX_PATTERN_LENGTH + 1), operator);
        expect(error.details).toMatchObject({ field: 'notes', operator, maxLength: MAX_PATTERN_LENGTH });
        expect(error.message).toContain(`at most ${MAX_PATTERN_LENGTH} characters`);
      },
    );

    it('leaves long operands of equality and ranges alone (they cost no more than the value)', () => {
      const long = 'x'.repeat(MAX_PATTERN_LENGTH + 1);
      for (const operator of ['$eq', '$gt', '$in']) expect(encodeFieldValue(f.notes, long, { operator })).toBe(long);
    });

    it('checks email shape on writes and equality but not for substring operands', () => {
      expect(encodeFieldValue(f.email, 'ann@example.com')).toBe('ann@example.com');
      expectInvalid(f.email, 'ann@example');
      expectInvalid(f.email, 'ann example.com');
      expectInvalid(f.email, 'not-an-email', '$eq');
      expectInvalid(f.email, 'not-an-email', '$in');
      expect(encodeFieldValue(f.email, '@example', { operator: '$contains' })).toBe('@example');
      expect(encodeFieldValue(f.email, 'ann', { operator: '$gte' })).toBe('ann');
    });

    it('accepts only http(s) URLs on writes and equality', () => {
      expect(encodeFieldValue(f.website, 'https://example.com/a?b=1')).toBe('https://example.com/a?b=1');
      expect(encodeFieldValue(f.website, 'http://localhost:3000')).toBe('http://localhost:3000');
      expectInvalid(f.website, 'ftp://example.com');
      expectInvalid(f.website, 'javascript:alert(1)');
      expectInvalid(f.website, 'example.com');
      expectInvalid(f.website, 'example.com', '$ne');
      expect(encodeFieldValue(f.website, 'https://', { operator: '$startsWith' })).toBe('https://');
    });

    it('requires select values to be options on writes, equality and $in, listing the options', () => {
      expect(encodeFieldValue(f.stage, 'won')).toBe('won');
      expect(encodeFieldValue(f.stage, 'lost', { operator: '$in' })).toBe('lost');
      const error = expectInvalid(f.stage, 'Won');
      expect(error.details).toMatchObject({ options: ['lead', 'won', 'lost'] });
      expect(error.message).toContain('["lead","won","lost"]');
      expect(expectInvalid(f.stage, 'maybe', '$eq').details).toMatchObject({ operator: '$eq' });
      expectInvalid(f.stage, 'maybe', '$nin');
      expect(encodeFieldValue(f.stage, 'wo', { operator: '$contains' })).toBe('wo');
    });
  });

  describe('indexed and unique text-like fields', () => {
    const indexed = field('code', 'text', { indexed: true });
    const unique = field('email', 'email', { unique: true });
    const tags = field('tags', 'multiselect', { indexed: true, options: ['short', 'x'.repeat(MAX_INDEXED_TEXT_BYTES + 1)] });

    it(`takes at most ${MAX_INDEXED_TEXT_BYTES} bytes of UTF-8 on writes, naming the field and the limit`, () => {
      expect(encodeFieldValue(indexed, 'x'.repeat(MAX_INDEXED_TEXT_BYTES))).toHaveLength(MAX_INDEXED_TEXT_BYTES);
      const error = expectInvalid(indexed, 'x'.repeat(MAX_INDEXED_TEXT_BYTES + 1));
      expect(error.details).toMatchObject({ field: 'code', maxBytes: MAX_INDEXED_TEXT_BYTES });
      expect(error.message).toContain(`at most ${MAX_INDEXED_TEXT_BYTES} bytes`);
      expect(error.message).toContain('indexed');
      expect(expectInvalid(unique, `${'a'.repeat(MAX_INDEXED_TEXT_BYTES)}@example.com`).message).toContain('unique');
    });

    it('counts bytes, not characters', () => {
      // 700 three-byte characters: 700 characters, 2,100 bytes.
      expectInvalid(indexed, '€'.repeat(700));
      expect(encodeFieldValue(indexed, '€'.repeat(666))).toHaveLength(666);
    });

    it('checks each option of an indexed multiselect', () => {
      expect(encodeFieldValue(tags, ['short'])).toEqual(['short']);
      expectInvalid(tags, ['short', 'x'.repeat(MAX_INDEXED_TEXT_BYTES + 1)]);
    });

    it('leaves fields without an index, and where operands, alone', () => {
      const long = 'x'.repeat(MAX_INDEXED_TEXT_BYTES + 1);
      expect(encodeFieldValue(f.name, long)).toBe(long);
      expect(encodeFieldValue(indexed, long, { operator: '$eq' })).toBe(long);
    });
  });

  describe('multiselect', () => {
    it('writes an array of options, duplicates dropped, order kept', () => {
      expect(encodeFieldValue(f.tags, ['vip', 'partner', 'vip'])).toEqual(['vip', 'partner']);
      expect(encodeFieldValue(f.tags, [])).toEqual([]);
    });

    it('refuses non-arrays and values outside the options', () => {
      expect(expectInvalid(f.tags, 'vip').details).toMatchObject({ options: ['vip', 'renewal', 'partner'] });
      expectInvalid(f.tags, ['vip', 'gold']);
      expectInvalid(f.tags, ['vip', 1]);
    });

    it('hints at $contains when $eq gets a single option', () => {
      expect(expectInvalid(f.tags, 'vip', '$eq').message).toContain('use $contains');
    });

    it('returns one option for $in items and an array for $contains', () => {
      expect(encodeFieldValue(f.tags, 'vip', { operator: '$in' })).toBe('vip');
      expectInvalid(f.tags, ['vip'], '$in');
      expect(encodeFieldValue(f.tags, 'vip', { operator: '$contains' })).toEqual(['vip']);
      expect(encodeFieldValue(f.tags, ['vip', 'renewal'], { operator: '$notContains' })).toEqual(['vip', 'renewal']);
      expectInvalid(f.tags, [], '$contains');
      expectInvalid(f.tags, 'gold', '$contains');
    });
  });

  describe('numbers', () => {
    it('accepts finite JSON numbers only', () => {
      expect(encodeFieldValue(f.amount, 1250.5)).toBe(1250.5);
      expect(encodeFieldValue(f.score, -0.001)).toBe(-0.001);
      expect(Object.is(encodeFieldValue(f.score, -0), 0)).toBe(true);
      const error = expectInvalid(f.amount, '1250.5');
      expect(error.message).toMatch(/^Field "amount" expects a number/);
      expectInvalid(f.score, Number.NaN);
      expectInvalid(f.score, Number.POSITIVE_INFINITY);
      expectInvalid(f.probability, true);
    });

    it('checks the exact-decimal column range on writes only', () => {
      expect(encodeFieldValue(f.amount, 9_999_999_999_999.99)).toBe(9_999_999_999_999.99);
      expect(expectInvalid(f.amount, 1e16).details).toMatchObject({ max: 1e16 });
      expectInvalid(f.probability, -100_000);
      expect(encodeFieldValue(f.probability, 99_999.9999)).toBe(99_999.9999);
      expect(encodeFieldValue(f.amount, 1e20, { operator: '$gt' })).toBe(1e20);
      expect(encodeFieldValue(f.score, 1e300)).toBe(1e300);
    });

    it('requires safe integers for integer fields', () => {
      expect(encodeFieldValue(f.quantity, 12)).toBe(12);
      expect(encodeFieldValue(f.quantity, -9_007_199_254_740_991)).toBe(-9_007_199_254_740_991);
      expectInvalid(f.quantity, 2.5);
      expectInvalid(f.quantity, 2 ** 53);
      expectInvalid(f.quantity, '12', '$gt');
    });
  });

  it('accepts booleans only for boolean fields', () => {
    expect(encodeFieldValue(f.closed, false)).toBe(false);
    expectInvalid(f.closed, 'true');
    expectInvalid(f.closed, 1);
  });

  describe('date', () => {
    it('accepts real calendar dates as YYYY-MM-DD', () => {
      expect(encodeFieldValue(f.closeDate, '2024-02-29')).toBe('2024-02-29');
      expect(encodeFieldValue(f.closeDate, '0001-01-01', { operator: '$gte' })).toBe('0001-01-01');
    });

    it.each(['2023-02-29', '2024-13-01', '2024-04-31', '2024-1-5', '0000-06-01', '2024-03-31T10:00:00Z', 'today', ''])(
      'refuses %j',
      (value) => {
        expectInvalid(f.closeDate, value);
      },
    );

    it('refuses non-strings', () => {
      expectInvalid(f.closeDate, 20240101);
    });
  });

  describe('datetime', () => {
    it.each([
      ['2024-03-31T14:30:00Z', '2024-03-31T14:30:00Z'],
      ['2024-03-31T14:30:00.123456+05:30', '2024-03-31T14:30:00.123456+05:30'],
      ['2024-03-31T14:30:00-0800', '2024-03-31T14:30:00-08:00'],
      ['2024-03-31T14:30+02', '2024-03-31T14:30:00+02:00'],
      ['2024-03-31 14:30:00', '2024-03-31T14:30:00Z'],
      ['2024-03-31t14:30:00z', '2024-03-31T14:30:00Z'],
      ['2024-03-31', '2024-03-31T00:00:00Z'],
    ])('normalises %j to %j (missing offset means UTC)', (input, output) => {
      expect(encodeFieldValue(f.closedAt, input)).toBe(output);
    });

    it.each([
      '2024-03-31T24:00:00Z',
      '2024-02-30T10:00:00Z',
      '2024-03-31T10:60:00Z',
      '2024-03-31T10:00:00+16:00',
      'yesterday',
      '31/03/2024',
    ])('refuses %j', (value) => {
      expectInvalid(f.closedAt, value);
    });

    it.each(['0001-01-01T00:30:00+01:00', '9999-12-31T23:30:00-05:00'])(
      'refuses %j, outside years 1..9999 once in UTC',
      (value) => {
        expectInvalid(f.closedAt, value);
      },
    );

    it('accepts the first and last instants of years 1..9999', () => {
      expect(encodeFieldValue(f.closedAt, '0001-01-01T00:00:00Z')).toBe('0001-01-01T00:00:00Z');
      expect(encodeFieldValue(f.closedAt, '0001-01-01T01:00:00+01:00')).toBe('0001-01-01T01:00:00+01:00');
      expect(encodeFieldValue(f.closedAt, '9999-12-31T23:59:59.999999Z')).toBe('9999-12-31T23:59:59.999999Z');
    });

    it('refuses epoch numbers but accepts valid Date objects', () => {
      expectInvalid(f.closedAt, 1_711_891_800_000);
      expect(encodeFieldValue(f.closedAt, new Date('2024-03-31T14:30:00.000Z'))).toBe('2024-03-31T14:30:00.000Z');
      expectInvalid(f.closedAt, new Date('nope'));
    });
  });

  describe('uuid and lookup', () => {
    it('accepts any UUID version, case-insensitively, and lower-cases it', () => {
      expect(encodeFieldValue(f.account, '3F2B8C1E-6A4D-4F7E-9B21-0C5D8E7A9F10')).toBe('3f2b8c1e-6a4d-4f7e-9b21-0c5d8e7a9f10');
      const id = SYSTEM_FIELDS[0];
      expect(encodeFieldValue(id, '00000000-0000-0000-0000-000000000000', { operator: '$eq' })).toBe(
        '00000000-0000-0000-0000-000000000000',
      );
    });

    it('refuses anything else', () => {
      expectInvalid(f.account, '3f2b8c1e6a4d4f7e9b210c5d8e7a9f10');
      expectInvalid(f.account, "3f2b8c1e-6a4d-4f7e-9b21-0c5d8e7a9f10' OR '1'='1");
      expectInvalid(SYSTEM_FIELDS[0], 12);
    });
  });

  describe('json', () => {
    it('returns JSON text for the caller to bind as jsonb', () => {
      expect(encodeFieldValue(f.meta, { a: [1, 'two', null, true] })).toBe('{"a":[1,"two",null,true]}');
      expect(encodeFieldValue(f.meta, [1, 2])).toBe('[1,2]');
      expect(encodeFieldValue(f.meta, 'text')).toBe('"text"');
      expect(encodeFieldValue(f.meta, 0)).toBe('0');
      expect(encodeFieldValue(f.meta, false)).toBe('false');
    });

    it('refuses values that JSON or jsonb cannot represent', () => {
      expectInvalid(f.meta, { a: Number.NaN });
      expectInvalid(f.meta, { a: undefined });
      expectInvalid(f.meta, { when: new Date() });
      expectInvalid(f.meta, { 'k\u0000': 1 });
      expectInvalid(f.meta, ['a\u0000']);
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      expectInvalid(f.meta, cyclic);
    });

    it('bounds nesting depth and size', () => {
      let deep: unknown = 1;
      for (let i = 0; i < 100; i++) deep = [deep];
      expectInvalid(f.meta, deep);
      const error = expectInvalid(f.meta, { text: 'x'.repeat(MAX_JSON_LENGTH) });
      expect(error.details).toMatchObject({ maxLength: MAX_JSON_LENGTH });
    });
  });
});

describe('bindCast', () => {
  it.each([
    { meta: f.name, cast: 'text' },
    { meta: f.stage, cast: 'text' },
    { meta: f.score, cast: 'double precision' },
    { meta: f.amount, cast: 'numeric' },
    { meta: f.probability, cast: 'numeric' },
    { meta: f.quantity, cast: 'bigint' },
    { meta: f.closed, cast: 'boolean' },
    { meta: f.closeDate, cast: 'date' },
    { meta: f.closedAt, cast: 'timestamptz' },
    { meta: f.account, cast: 'uuid' },
    { meta: SYSTEM_FIELDS[0], cast: 'uuid' },
    { meta: f.tags, cast: 'text[]' },
    { meta: f.meta, cast: 'jsonb' },
  ])('binds $meta.type field $meta.name as ::$cast', ({ meta, cast }) => {
    expect(bindCast(meta)).toBe(cast);
  });
});

describe('decodeRow', () => {
  it('turns pg strings into JSON numbers and keeps nulls', () => {
    const row = decodeRow(deal, { amount: '1250.50', probability: '0.2500', score: 3.5, quantity: '42', name: null, meta: null });
    expect(row).toEqual({ amount: 1250.5, probability: 0.25, score: 3.5, quantity: 42, name: null, meta: null });
  });

  it('keeps bigints beyond 2^53 as strings rather than rounding them', () => {
    expect(decodeRow(deal, { quantity: '9007199254740993' })).toEqual({ quantity: '9007199254740993' });
    expect(decodeRow(deal, { quantity: BigInt(7) })).toEqual({ quantity: 7 });
    expect(decodeRow(deal, { quantity: BigInt('9007199254740993') })).toEqual({ quantity: '9007199254740993' });
  });

  it('formats dates as YYYY-MM-DD from a local-midnight Date (pg default) or a string', () => {
    expect(decodeRow(deal, { close_date: new Date(2024, 1, 29) })).toEqual({ close_date: '2024-02-29' });
    expect(decodeRow(deal, { close_date: '2024-02-29' })).toEqual({ close_date: '2024-02-29' });
    expect(decodeRow(deal, { close_date: 'infinity' })).toEqual({ close_date: 'infinity' });
  });

  it('formats timestamps as ISO strings from Dates or Postgres text output', () => {
    const when = new Date('2024-01-15T10:30:00.123Z');
    expect(decodeRow(deal, { closed_at: when, created_at: '2024-01-15 10:30:00.123456+05:30' })).toEqual({
      closed_at: '2024-01-15T10:30:00.123Z',
      created_at: '2024-01-15T05:00:00.123Z',
    });
    expect(decodeRow(deal, { updated_at: '2024-01-15 10:30:00+00' })).toEqual({ updated_at: '2024-01-15T10:30:00.000Z' });
    expect(decodeRow(deal, { updated_at: 'infinity' })).toEqual({ updated_at: 'infinity' });
  });

  it('parses booleans, arrays and leaves json, uuid and unknown columns alone', () => {
    const meta = { nested: [1, { a: 'b' }] };
    const row = decodeRow(deal, {
      is_closed: 't',
      tags: '{vip,"two words","quote\\"d",NULL}',
      meta,
      id: '3f2b8c1e-6a4d-4f7e-9b21-0c5d8e7a9f10',
      total: '17',
    });
    expect(row).toEqual({
      is_closed: true,
      tags: ['vip', 'two words', 'quote"d', null],
      meta,
      id: '3f2b8c1e-6a4d-4f7e-9b21-0c5d8e7a9f10',
      total: '17',
    });
    expect(decodeRow(deal, { tags: ['vip'], is_closed: false })).toEqual({ tags: ['vip'], is_closed: false });
  });

  it('cannot be used to pollute prototypes', () => {
    const row = decodeRow(deal, JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>);
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('decodes a whole result in place, each row as decodeRow would, and sees a field list change', () => {
    const rows = [
      { amount: '10.50', close_date: '2024-02-29', name: 'a', total: '3' },
      { amount: null, close_date: new Date(2024, 0, 5), name: 'b', total: '4' },
    ];
    const expected = rows.map((row) => decodeRow(deal, { ...row }));
    const first = rows[0];
    expect(decodeRowsInPlace(deal, rows)).toBe(rows);
    expect(rows[0]).toBe(first);
    expect(rows).toEqual(expected);
    expect(rows[0]).toEqual({ amount: 10.5, close_date: '2024-02-29', name: 'a', total: '3' });
    // Another list of fields (a view without amount): its own decoders, not the last list's.
    const view = { ...deal, fields: deal.fields.filter((field) => field.name !== 'amount') };
    expect(decodeRowsInPlace(view, [{ amount: '7' }])).toEqual([{ amount: '7' }]);
    expect(decodeRowsInPlace(deal, [])).toEqual([]);
  });
});

describe('fieldDecoder', () => {
  it('decodes one column exactly as decodeRow does, null and undefined passing through', () => {
    const columns: Array<[FieldMeta, unknown]> = [
      [f.amount, '1250.50'],
      [f.quantity, '42'],
      [f.quantity, '9007199254740993'],
      [f.closed, 't'],
      [f.tags, '{vip,"two words",NULL}'],
      [f.closeDate, '2024-02-29'],
      [f.closeDate, 'infinity'],
      [f.closedAt, '2024-01-15 10:30:00.5+05:30'],
      [f.closedAt, '2024-01-15 10:30:00.123456+00'],
      [f.meta, { nested: [1] }],
      [f.name, 'Acme'],
    ];
    for (const [column, value] of columns) {
      const decode = fieldDecoder(column);
      expect(decode(value)).toEqual(decodeRow(deal, { [column.name]: value })[column.name]);
      expect(decode(null)).toBeNull();
      expect(decode(undefined)).toBeUndefined();
    }
  });

  it('turns any timestamp text of a UTC session into the ISO string a Date gives (milliseconds, the rest cut off)', () => {
    const decode = fieldDecoder(f.closedAt);
    fc.assert(
      fc.property(
        fc.date({ min: new Date('0001-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 0, max: 6 }),
        (date, micros, decimals) => {
          // As Postgres writes it: "YYYY-MM-DD HH:MM:SS", up to six decimals without trailing zeros, "+00".
          const iso = date.toISOString();
          const fraction = `${iso.slice(20, 23)}${String(micros).padStart(3, '0')}`.slice(0, decimals).replace(/0+$/, '');
          const text = `${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction ? `.${fraction}` : ''}+00`;
          expect(decode(text)).toBe(new Date(`${text.slice(0, -3).replace(' ', 'T')}+00:00`).toISOString());
        },
      ),
      { seed: 15, numRuns: 2_000 },
    );
  });

  it('leaves what is not such a text to the general path: other offsets, BC dates, infinity', () => {
    const decode = fieldDecoder(f.closedAt);
    expect(decode('2024-01-15 10:30:00.123456-02')).toBe('2024-01-15T12:30:00.123Z');
    expect(decode('0044-03-15 12:00:00+00 BC')).toBe('0044-03-15 12:00:00+00 BC');
    expect(decode('infinity')).toBe('infinity');
    expect(fieldDecoder(f.closeDate)('0044-03-15 BC')).toBe('0044-03-15 BC');
  });
});

describe('parseTextArray', () => {
  it('handles empty arrays, escapes and commas inside quotes', () => {
    expect(parseTextArray('{}')).toEqual([]);
    expect(parseTextArray('{"a,b","c\\\\d",""}')).toEqual(['a,b', 'c\\d', '']);
    expect(parseTextArray('not an array')).toBe('not an array');
  });
});
