import { DomainError } from '../common/domain-error';
import { SqlParams } from '../database/sql-params';
import { FieldMeta, ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import {
  MAX_IN_VALUES,
  MAX_WHERE_CONDITIONS,
  MAX_WHERE_DEPTH,
  UnresolvedPlaceholder,
  compileRowFilter,
  compileScopedWhere,
  compileSearch,
  compileWhere,
  MAX_SEARCH_LENGTH,
  operatorsForField,
} from './where.compiler';
import { domainError, field } from '../../test/support/metadata-fixtures';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    field('name', 'text', { required: true }),
    field('stage', 'select', { options: ['lead', 'won', 'lost'] }),
    field('amount', 'currency'),
    field('quantity', 'integer'),
    field('score', 'number'),
    field('is_closed', 'boolean'),
    field('close_date', 'date'),
    field('closed_at', 'datetime'),
    field('account_id', 'lookup', { reference: 'account' }),
    field('tags', 'multiselect', { options: ['vip', 'renewal', 'partner'] }),
    field('meta', 'json'),
    field('contact_email', 'email'),
    ...SYSTEM_FIELDS,
  ],
};
const fieldNames = deal.fields.map((f) => f.name);
const byName = (name: string): FieldMeta => deal.fields.find((f) => f.name === name)!;

/** Compiles with fresh params and returns both, so each case can assert exact SQL and bound values. */
function compile(where: unknown, options?: { tableAlias?: string }): { sql: string; values: unknown[] } {
  const params = new SqlParams();
  const sql = compileWhere(deal, where, params, options);
  return { sql, values: params.values };
}

function compileError(where: unknown): DomainError {
  return domainError(() => compile(where));
}

describe('compileWhere', () => {
  describe('basics', () => {
    it.each([undefined, null, {}])('compiles %p to TRUE without parameters', (where) => {
      expect(compile(where)).toEqual({ sql: 'TRUE', values: [] });
    });

    it('compiles shorthand equality with a typed parameter', () => {
      expect(compile({ stage: 'won' })).toEqual({ sql: '"stage" = $1::text', values: ['won'] });
    });

    it('ANDs several keys and several operators on one field, in key order', () => {
      expect(compile({ stage: 'won', amount: { $gt: 100, $lte: 5000 } })).toEqual({
        sql: '("stage" = $1::text AND ("amount" > $2::numeric AND "amount" <= $3::numeric))',
        values: ['won', 100, 5000],
      });
    });

    it('prefixes columns with the table alias', () => {
      expect(compile({ stage: 'won', tags: { $contains: 'vip' } }, { tableAlias: 'd' }).sql).toBe(
        '("d"."stage" = $1::text AND "d"."tags" @> $2::text[])',
      );
    });

    it('continues the numbering of parameters already collected', () => {
      const params = new SqlParams();
      params.add('tenant');
      expect(compileWhere(deal, { quantity: 3 }, params)).toBe('"quantity" = $2::bigint');
      expect(params.values).toEqual(['tenant', 3]);
    });

    it.each([
      ['amount', { $gte: 10 }, '"amount" >= $1::numeric', [10]],
      ['score', { $lt: 0.5 }, '"score" < $1::double precision', [0.5]],
      ['quantity', { $gt: 2 }, '"quantity" > $1::bigint', [2]],
      ['close_date', { $lt: '2024-04-01' }, '"close_date" < $1::date', ['2024-04-01']],
      ['created_at', { $gte: '2024-01-01' }, '"created_at" >= $1::timestamptz', ['2024-01-01T00:00:00Z']],
      ['closed_at', { $lte: '2024-01-01T10:00:00+0200' }, '"closed_at" <= $1::timestamptz', ['2024-01-01T10:00:00+02:00']],
      ['name', { $gte: 'M' }, '"name" >= $1::text', ['M']],
      ['is_closed', true, '"is_closed" = $1::boolean', [true]],
      ['id', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '"id" = $1::uuid', ['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11']],
      [
        'account_id',
        { $ne: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' },
        '"account_id" IS DISTINCT FROM $1::uuid',
        ['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'],
      ],
      ['meta', { $eq: { plan: 'pro' } }, '"meta" = $1::jsonb', ['{"plan":"pro"}']],
      ['meta', [1, 2], '"meta" = $1::jsonb', ['[1,2]']],
    ])('casts operands of %s by column type: %j', (name, condition, sql, values) => {
      expect(compile({ [name]: condition })).toEqual({ sql, values });
    });
  });

  describe('null handling', () => {
    it('turns null equality into IS NULL / IS NOT NULL without parameters', () => {
      expect(compile({ stage: null })).toEqual({ sql: '"stage" IS NULL', values: [] });
      expect(compile({ stage: { $eq: null } })).toEqual({ sql: '"stage" IS NULL', values: [] });
      expect(compile({ stage: { $ne: null } })).toEqual({ sql: '"stage" IS NOT NULL', values: [] });
    });

    it('keeps NULL rows for $ne by using IS DISTINCT FROM', () => {
      expect(compile({ stage: { $ne: 'won' } })).toEqual({ sql: '"stage" IS DISTINCT FROM $1::text', values: ['won'] });
    });

    it('compiles $null true/false and refuses non-booleans', () => {
      expect(compile({ closed_at: { $null: true } }).sql).toBe('"closed_at" IS NULL');
      expect(compile({ meta: { $null: false } }).sql).toBe('"meta" IS NOT NULL');
      const error = compileError({ closed_at: { $null: 'yes' } });
      expect(error.code).toBe('invalid_value');
      expect(error.details).toMatchObject({ field: 'closed_at', operator: '$null' });
    });

    it('refuses null for ordering operators', () => {
      const error = compileError({ amount: { $gt: null } });
      expect(error.code).toBe('invalid_value');
      expect(error.message).toContain('$null');
    });
  });

  describe('$in / $nin', () => {
    it('binds one array parameter cast to the column array type', () => {
      expect(compile({ stage: { $in: ['won', 'lost'] } })).toEqual({
        sql: '"stage" = ANY($1::text[])',
        values: [['won', 'lost']],
      });
      expect(compile({ amount: { $in: [1, 2.5] } })).toEqual({ sql: '"amount" = ANY($1::numeric[])', values: [[1, 2.5]] });
      expect(compile({ id: { $in: ['A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'] } })).toEqual({
        sql: '"id" = ANY($1::uuid[])',
        values: [['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11']],
      });
    });

    it('keeps NULL rows for $nin and turns null items into IS NULL', () => {
      expect(compile({ stage: { $nin: ['won'] } }).sql).toBe('("stage" IS NULL OR NOT ("stage" = ANY($1::text[])))');
      expect(compile({ stage: { $in: ['won', null] } })).toEqual({
        sql: '("stage" = ANY($1::text[]) OR "stage" IS NULL)',
        values: [['won']],
      });
      expect(compile({ stage: { $nin: [null, 'lost'] } }).sql).toBe('("stage" IS NOT NULL AND NOT ("stage" = ANY($1::text[])))');
      expect(compile({ stage: { $in: [null] } })).toEqual({ sql: '"stage" IS NULL', values: [] });
    });

    it('encodes every item with the field codec', () => {
      const error = compileError({ stage: { $in: ['won', 'maybe'] } });
      expect(error.code).toBe('invalid_value');
      expect(error.details).toMatchObject({ field: 'stage', operator: '$in', options: ['lead', 'won', 'lost'] });
      expect(compileError({ quantity: { $nin: [1, '2'] } }).code).toBe('invalid_value');
    });

    it.each([[[]], ['won'], [{ a: 1 }]])('requires a non-empty array, not %j', (operand) => {
      const error = compileError({ stage: { $in: operand } });
      expect(error.code).toBe('invalid_value');
      expect(error.details).toMatchObject({ field: 'stage', operator: '$in' });
    });

    it(`accepts ${MAX_IN_VALUES} values and refuses one more with too_many_values`, () => {
      const ok = Array.from({ length: MAX_IN_VALUES }, (_, i) => i);
      expect(compile({ quantity: { $in: ok } })).toEqual({ sql: '"quantity" = ANY($1::bigint[])', values: [ok] });
      const error = compileError({ quantity: { $nin: [...ok, MAX_IN_VALUES] } });
      expect(error.code).toBe('too_many_values');
      expect(error.details).toEqual({ operator: '$nin', field: 'quantity', count: MAX_IN_VALUES + 1, max: MAX_IN_VALUES });
    });

    it('suggests $in when $eq gets an array', () => {
      const error = compileError({ stage: ['won', 'lost'] });
      expect(error.code).toBe('invalid_value');
      expect(error.message).toContain('$in');
    });
  });

  describe('$between', () => {
    it('binds low and high with the column cast', () => {
      expect(compile({ close_date: { $between: ['2024-01-01', '2024-03-31'] } })).toEqual({
        sql: '"close_date" BETWEEN $1::date AND $2::date',
        values: ['2024-01-01', '2024-03-31'],
      });
    });

    it.each([[[1]], [[1, 2, 3]], [5], [[1, null]]])('refuses %j', (operand) => {
      const error = compileError({ amount: { $between: operand } });
      expect(error.code).toBe('invalid_value');
      expect(error.details).toMatchObject({ field: 'amount', operator: '$between' });
    });
  });

  describe('string operators', () => {
    it('uses ILIKE with an explicit escape character', () => {
      expect(compile({ name: { $contains: 'acme' } })).toEqual({
        sql: `"name" ILIKE $1::text ESCAPE E'\\\\'`,
        values: ['%acme%'],
      });
      expect(compile({ name: { $startsWith: 'Ac' } }).values).toEqual(['Ac%']);
      expect(compile({ contact_email: { $endsWith: '@example.com' } }).values).toEqual(['%@example.com']);
    });

    it('escapes %, _ and backslash so they match literally', () => {
      expect(compile({ name: { $contains: '50%_off\\now' } }).values).toEqual(['%50\\%\\_off\\\\now%']);
      expect(compile({ name: { $startsWith: '%' } }).values).toEqual(['\\%%']);
    });

    it('keeps NULL rows for $notContains', () => {
      expect(compile({ name: { $notContains: 'test' } })).toEqual({
        sql: `("name" IS NULL OR "name" NOT ILIKE $1::text ESCAPE E'\\\\')`,
        values: ['%test%'],
      });
    });

    it('accepts any substring on select fields but refuses non-strings', () => {
      expect(compile({ stage: { $contains: 'wo' } }).values).toEqual(['%wo%']);
      const error = compileError({ name: { $contains: 5 } });
      expect(error.code).toBe('invalid_value');
      expect(error.details).toMatchObject({ field: 'name', operator: '$contains' });
    });
  });

  describe('multiselect', () => {
    it('$contains means the record has the option(s)', () => {
      expect(compile({ tags: { $contains: 'vip' } })).toEqual({ sql: '"tags" @> $1::text[]', values: [['vip']] });
      expect(compile({ tags: { $contains: ['vip', 'partner'] } }).values).toEqual([['vip', 'partner']]);
      expect(compile({ tags: { $notContains: 'vip' } }).sql).toBe('("tags" IS NULL OR NOT ("tags" @> $1::text[]))');
    });

    it('$in means any of the options, $nin none of them', () => {
      expect(compile({ tags: { $in: ['vip', 'renewal'] } })).toEqual({
        sql: '"tags" && $1::text[]',
        values: [['vip', 'renewal']],
      });
      expect(compile({ tags: { $nin: ['vip'] } }).sql).toBe('("tags" IS NULL OR NOT ("tags" && $1::text[]))');
    });

    it('$eq compares the set of options, ignoring order', () => {
      expect(compile({ tags: ['renewal', 'vip'] })).toEqual({
        sql: '("tags" @> $1::text[] AND "tags" <@ $1::text[])',
        values: [['renewal', 'vip']],
      });
      expect(compile({ tags: { $ne: [] } }).sql).toBe('NOT COALESCE(("tags" @> $1::text[] AND "tags" <@ $1::text[]), FALSE)');
    });

    it('refuses options the field does not have and ILIKE-only operators', () => {
      expect(compileError({ tags: { $contains: 'gold' } }).code).toBe('invalid_value');
      const error = compileError({ tags: { $startsWith: 'v' } });
      expect(error.code).toBe('invalid_operator');
      expect(error.details).toMatchObject({
        availableOperators: ['$eq', '$ne', '$in', '$nin', '$contains', '$notContains', '$null'],
      });
    });
  });

  describe('combinators', () => {
    it('compiles $or and $and with nesting', () => {
      expect(
        compile({
          $or: [{ stage: 'won' }, { amount: { $gt: 1000 }, is_closed: false }],
          $and: [{ quantity: { $gte: 1 } }],
        }),
      ).toEqual({
        sql: '(("stage" = $1::text OR ("amount" > $2::numeric AND "is_closed" = $3::boolean)) AND "quantity" >= $4::bigint)',
        values: ['won', 1000, false, 1],
      });
    });

    it('compiles $not as an exact complement that keeps NULL rows', () => {
      expect(compile({ $not: { stage: 'won', amount: { $lt: 10 } } })).toEqual({
        sql: 'NOT COALESCE(("stage" = $1::text AND "amount" < $2::numeric), FALSE)',
        values: ['won', 10],
      });
    });

    it.each([
      [{ $and: { stage: 'won' } }, '$and'],
      [{ $or: [] }, '$or'],
      [{ $or: 'stage' }, '$or'],
      [{ $not: [{ stage: 'won' }] }, '$not'],
      [{ $not: {} }, '$not'],
      [{ $and: [{ stage: 'won' }, 'x'] }, '$and'],
      [{ amount: {} }, 'amount'],
    ])('refuses malformed structure %j', (where, mentioned) => {
      const error = compileError(where);
      expect(error.code).toBe('invalid_where');
      expect(error.message).toContain(mentioned);
    });

    it.each([[[{ stage: 'won' }]], ['stage = won'], [42], [true]])('refuses a where that is not an object: %j', (where) => {
      expect(compileError(where).code).toBe('invalid_where');
    });

    it(`accepts ${MAX_WHERE_DEPTH} levels of nesting and refuses deeper`, () => {
      const nest = (levels: number): unknown => {
        let where: unknown = { stage: 'won' };
        for (let i = 1; i < levels; i++) where = i % 2 ? { $and: [where] } : { $not: where };
        return where;
      };
      expect(compile(nest(MAX_WHERE_DEPTH)).sql).toContain('"stage" = $1::text');
      const error = compileError(nest(MAX_WHERE_DEPTH + 1));
      expect(error.code).toBe('invalid_where');
      expect(error.details).toMatchObject({ maxDepth: MAX_WHERE_DEPTH });
    });

    it(`accepts ${MAX_WHERE_CONDITIONS} conditions and refuses more`, () => {
      const conditions = (n: number) => Array.from({ length: n }, (_, i) => ({ quantity: { $ne: i } }));
      const ok = compile({ $or: conditions(MAX_WHERE_CONDITIONS) });
      expect(ok.values).toHaveLength(MAX_WHERE_CONDITIONS);
      // Spread across combinators so the per-array cap is not what trips.
      const tooMany = { $and: [{ $or: conditions(150) }, { $or: conditions(51) }] };
      const error = compileError(tooMany);
      expect(error.code).toBe('invalid_where');
      expect(error.details).toMatchObject({ maxConditions: MAX_WHERE_CONDITIONS });
      expect(compileError({ $and: conditions(MAX_WHERE_CONDITIONS + 1) }).code).toBe('invalid_where');
    });
  });

  describe('field and operator errors', () => {
    it('refuses unknown fields, listing every field including system fields', () => {
      const error = compileError({ $or: [{ stage: 'won' }, { amout: 5 }] });
      expect(error.code).toBe('unknown_field');
      expect(error.message).toBe('Unknown field "amout" on object "deal"');
      expect(error.details).toEqual({ field: 'amout', object: 'deal', availableFields: fieldNames });
      expect(fieldNames).toEqual(expect.arrayContaining(['id', 'created_at', 'updated_at']));
    });

    it('treats __proto__ as an unknown field', () => {
      expect(compileError(JSON.parse('{"__proto__": {"$eq": 1}}')).code).toBe('unknown_field');
      expect(compileError({ constructor: 1 }).code).toBe('unknown_field');
    });

    it('refuses unknown operators with the operators valid for the field', () => {
      const error = compileError({ amount: { $gt: 1, $like: '%1' } });
      expect(error.code).toBe('unknown_field');
      expect(error.details).toEqual({
        operator: '$like',
        field: 'amount',
        availableOperators: ['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$between', '$null'],
        availableFields: deal.fields.map((f) => f.name),
      });
      expect(compileError({ amount: { gt: 1 } }).details).toMatchObject({ operator: 'gt', field: 'amount' });
    });

    it('explains how to compare a json field with an object', () => {
      const error = compileError({ meta: { plan: 'pro' } });
      expect(error.code).toBe('unknown_field');
      expect(error.message).toContain('{"meta": {"$eq": {...}}}');
    });

    it('refuses field operators and unknown $ keys at the combinator level', () => {
      const misplaced = compileError({ $gt: 5 });
      expect(misplaced.code).toBe('unknown_field');
      expect(misplaced.details).toEqual({
        operator: '$gt',
        field: null,
        availableOperators: ['$and', '$or', '$not'],
        availableFields: deal.fields.map((f) => f.name),
      });
      expect(compileError({ $nor: [{ stage: 'won' }] }).code).toBe('unknown_field');
    });

    it.each([
      ['is_closed', '$gt', true],
      ['is_closed', '$contains', 'x'],
      ['account_id', '$lt', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'],
      ['amount', '$startsWith', '1'],
      ['close_date', '$contains', '2024'],
      ['meta', '$in', [{}]],
      ['meta', '$gt', 1],
    ])('refuses %s %s as invalid_operator', (name, operator, operand) => {
      const error = compileError({ [name]: { [operator]: operand } });
      expect(error.code).toBe('invalid_operator');
      expect(error.details).toEqual({
        operator,
        field: name,
        type: byName(name).type,
        availableOperators: operatorsForField(byName(name)),
      });
    });

    it('words invalid_operator so a caller can act on it', () => {
      expect(compileError({ is_closed: { $gt: true } }).message).toBe(
        'Operator "$gt" is not allowed on boolean field "is_closed"; use one of $eq, $ne, $in, $nin, $null',
      );
    });

    it.each([
      [{ amount: { $gt: '100' } }, 'amount'],
      [{ is_closed: 'yes' }, 'is_closed'],
      [{ close_date: '2024-02-30' }, 'close_date'],
      [{ account_id: 'not-a-uuid' }, 'account_id'],
      [{ stage: 'maybe' }, 'stage'],
      [{ contact_email: { $eq: 'nobody' } }, 'contact_email'],
    ])('reports a wrong operand type as invalid_value: %j', (where, name) => {
      const error = compileError(where);
      expect(error.code).toBe('invalid_value');
      expect(error.details).toMatchObject({ field: name, type: byName(name).type });
    });
  });

  describe('injection attempts', () => {
    it('never lets a hostile field name reach SQL', () => {
      const name = 'amount"; DROP TABLE x; --';
      const error = compileError({ [name]: 1 });
      expect(error.code).toBe('unknown_field');
      expect(error.details).toMatchObject({ field: name, availableFields: fieldNames });
    });

    it('never lets a hostile operator reach SQL', () => {
      const error = compileError({ amount: { '$gt; DROP TABLE deal; --': 1 } });
      expect(error.code).toBe('unknown_field');
      expect(error.details).toMatchObject({ operator: '$gt; DROP TABLE deal; --', field: 'amount' });
    });

    it('refuses a hostile table alias', () => {
      expect(domainError(() => compile({ stage: 'won' }, { tableAlias: 'd"; DROP' })).code).toBe('invalid_identifier');
    });

    it('keeps hostile values in parameters only', () => {
      const hostile = "x'); DROP TABLE deal; --";
      const { sql, values } = compile({
        name: hostile,
        $or: [{ name: { $contains: hostile } }, { name: { $in: [hostile, `"${hostile}"`] } }],
        $not: { name: { $between: [hostile, `${hostile}\\`] } },
      });
      expect(sql).not.toContain('DROP');
      // The only quote character in the SQL text is the ESCAPE literal of the ILIKE.
      expect(sql.replaceAll(`ESCAPE E'\\\\'`, '')).not.toContain("'");
      expect(values).toEqual([hostile, `%${hostile}%`, [hostile, `"${hostile}"`], hostile, `${hostile}\\`]);
    });

    it('caps echoed names in error messages', () => {
      const error = compileError({ ['x'.repeat(10_000)]: 1 });
      expect(error.message.length).toBeLessThan(200);
    });
  });
});

describe('row filters: placeholders and scoping', () => {
  const caller = { subject: "alice'; drop table x; --", attributes: { region: 'emea', level: 3 } };

  it('binds $subject and $attr.<name> as parameters, never as SQL text', () => {
    const params = new SqlParams();
    const sql = compileWhere(deal, { name: '$subject', quantity: { $gte: '$attr.level' } }, params, { placeholders: caller });
    expect(sql).toBe('("name" = $1::text AND "quantity" >= $2::bigint)');
    expect(params.values).toEqual([caller.subject, 3]);
  });

  it('resolves placeholders inside $in lists', () => {
    const params = new SqlParams();
    expect(compileWhere(deal, { name: { $in: ['$attr.region', 'won'] } }, params, { placeholders: caller })).toBe(
      '"name" = ANY($1::text[])',
    );
    expect(params.values).toEqual([['emea', 'won']]);
  });

  it('leaves "$subject" a plain string in a where without placeholders (a caller cannot use them)', () => {
    expect(compile({ name: '$subject' })).toEqual({ sql: '"name" = $1::text', values: ['$subject'] });
  });

  it('throws UnresolvedPlaceholder for a missing attribute or a value its field cannot hold', () => {
    const params = new SqlParams();
    expect(() => compileWhere(deal, { name: '$attr.team' }, params, { placeholders: caller })).toThrow(UnresolvedPlaceholder);
    expect(() => compileWhere(deal, { quantity: '$attr.region' }, params, { placeholders: caller })).toThrow(
      UnresolvedPlaceholder,
    );
  });

  it('checks fields and operators of a policy filter without a caller (validate)', () => {
    expect(compileWhere(deal, { name: '$subject' }, new SqlParams(), { placeholders: 'validate' })).toBe('TRUE');
    expect(domainError(() => compileWhere(deal, { nope: '$subject' }, new SqlParams(), { placeholders: 'validate' })).code).toBe(
      'unknown_field',
    );
  });

  it('ORs the filters of several policies and ANDs them with the caller’s where', () => {
    const scoped: ObjectMeta = {
      ...deal,
      rowFilter: { object: deal, filters: [{ name: '$subject' }, { stage: 'won' }], ...caller },
    };
    const params = new SqlParams();
    expect(compileScopedWhere(scoped, { amount: { $gt: 1 } }, params)).toBe(
      '(("name" = $1::text OR "stage" = $2::text) AND "amount" > $3::numeric)',
    );
    expect(params.values).toEqual([caller.subject, 'won', 1]);
  });

  it('turns a filter it cannot resolve into FALSE, dropping that filter’s parameters', () => {
    const scoped: ObjectMeta = {
      ...deal,
      rowFilter: { object: deal, filters: [{ stage: 'won', name: '$attr.team' }, { name: '$subject' }], ...caller },
    };
    const params = new SqlParams();
    expect(compileRowFilter(scoped, params)).toBe('(FALSE OR "name" = $1::text)');
    expect(compileRowFilter(scoped, new SqlParams(), { asValue: true })).toBe('COALESCE((FALSE OR "name" = $1::text), FALSE)');
    expect(params.values).toEqual([caller.subject]);
  });

  it('is FALSE when no filter grants anything, and absent without a row filter', () => {
    expect(compileRowFilter({ ...deal, rowFilter: { object: deal, filters: [], ...caller } }, new SqlParams())).toBe('FALSE');
    expect(compileRowFilter(deal, new SqlParams())).toBeUndefined();
  });
});

describe('operatorsForField', () => {
  it.each([
    [
      'name',
      [
        '$eq',
        '$ne',
        '$gt',
        '$gte',
        '$lt',
        '$lte',
        '$in',
        '$nin',
        '$between',
        '$contains',
        '$notContains',
        '$startsWith',
        '$endsWith',
        '$null',
      ],
    ],
    ['closed_at', ['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$between', '$null']],
    ['is_closed', ['$eq', '$ne', '$in', '$nin', '$null']],
    ['id', ['$eq', '$ne', '$in', '$nin', '$null']],
    ['meta', ['$eq', '$ne', '$null']],
  ])('lists the operators of %s', (name, operators) => {
    expect(operatorsForField(byName(name))).toEqual(operators);
  });
});

describe('compileSearch (?q=)', () => {
  const searchable: ObjectMeta = {
    ...deal,
    fields: deal.fields.map((f) => (f.name === 'name' || f.name === 'contact_email' ? { ...f, searchable: true } : f)),
  };

  it('ORs a folded ILIKE over every searchable field, the text bound once with % and _ escaped', () => {
    const params = new SqlParams();
    expect(compileSearch(searchable, '50%_off', params)).toBe(
      `(public.search_fold("name") ILIKE public.search_fold($1::text) ESCAPE E'\\\\' OR ` +
        `public.search_fold("contact_email") ILIKE public.search_fold($1::text) ESCAPE E'\\\\')`,
    );
    expect(params.values).toEqual(['%50\\%\\_off%']);
  });

  it('is ANDed into the scoped where', () => {
    const params = new SqlParams();
    expect(compileScopedWhere(searchable, { stage: 'won' }, params, 'acme')).toBe(
      `("stage" = $1::text AND (public.search_fold("name") ILIKE public.search_fold($2::text) ESCAPE E'\\\\' OR ` +
        `public.search_fold("contact_email") ILIKE public.search_fold($2::text) ESCAPE E'\\\\'))`,
    );
  });

  it('refuses an object without searchable fields, overlong text and NUL', () => {
    expect(domainError(() => compileSearch(deal, 'x', new SqlParams())).code).toBe('search_not_available');
    expect(domainError(() => compileSearch(searchable, 'x'.repeat(MAX_SEARCH_LENGTH + 1), new SqlParams())).code).toBe(
      'invalid_value',
    );
    expect(domainError(() => compileSearch(searchable, 'a\u0000', new SqlParams())).code).toBe('invalid_value');
  });
});
