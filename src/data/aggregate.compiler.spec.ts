import { DomainError } from '../common/domain-error';
import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { compileAggregate, compileAggregatePlan, decodeAggregateRows } from './aggregate.compiler';
import { AGGREGATE_FUNCTIONS, AggregateQuery, MAX_ENGINE_LIMIT } from './data.types';
import { domainError, field } from '../../test/support/metadata-fixtures';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    field('name', 'text'),
    field('stage', 'select', { options: ['lead', 'won', 'lost'] }),
    field('amount', 'currency'),
    field('quantity', 'integer'),
    field('weight', 'number'),
    field('close_date', 'date'),
    field('notes', 'textarea'),
    field('meta', 'json'),
    ...SYSTEM_FIELDS,
  ],
};
const fieldNames = deal.fields.map((f) => f.name);

/** Compiles and returns the SQL text and the bound values, so each case can assert both exactly. */
function compile(query: Partial<AggregateQuery>): { sql: string; values: readonly unknown[] } {
  const { query: compiled } = compileAggregate(deal, { aggregations: [], limit: 100, ...query });
  return { sql: compiled.sql, values: compiled.parameters };
}

function compileError(query: Partial<AggregateQuery>): DomainError {
  return domainError(() => compile(query));
}

describe('compileAggregate', () => {
  describe('SQL', () => {
    it('counts records without grouping', () => {
      expect(compile({ aggregations: [{ function: 'count', alias: 'n' }], limit: 10 })).toEqual({
        sql: 'select count(*) as "n" from "data"."deal" where TRUE limit $1',
        values: [10],
      });
    });

    it('compiles every function on fields, grouped, ordered by the group-by fields by default', () => {
      expect(
        compile({
          groupBy: ['stage'],
          aggregations: [
            { function: 'sum', field: 'amount', alias: 'total' },
            { function: 'avg', field: 'amount', alias: 'average' },
            { function: 'min', field: 'close_date', alias: 'first_close' },
            { function: 'max', field: 'amount', alias: 'biggest' },
            { function: 'count_distinct', field: 'name', alias: 'names' },
            { function: 'count', field: 'stage', alias: 'staged' },
          ],
        }),
      ).toEqual({
        sql:
          'select "stage", sum("amount") as "total", avg("amount") as "average", min("close_date") as "first_close", ' +
          'max("amount") as "biggest", count(distinct "name") as "names", count("stage") as "staged" ' +
          'from "data"."deal" where TRUE group by "stage" order by "stage" asc limit $1',
        values: [100],
      });
    });

    it('groups by several fields (a single name is accepted too), duplicates dropped', () => {
      expect(compile({ groupBy: ['stage', 'quantity', 'stage'], aggregations: [{ function: 'count', alias: 'n' }] }).sql).toBe(
        'select "stage", "quantity", count(*) as "n" from "data"."deal" where TRUE group by "stage", "quantity" ' +
          'order by "stage" asc, "quantity" asc limit $1',
      );
      expect(compile({ groupBy: 'stage', aggregations: [{ function: 'count', alias: 'n' }] }).sql).toBe(
        'select "stage", count(*) as "n" from "data"."deal" where TRUE group by "stage" order by "stage" asc limit $1',
      );
    });

    it('orders by an alias (nulls last) before the group-by fields: top-N with limit', () => {
      expect(
        compile({
          groupBy: ['stage'],
          aggregations: [{ function: 'sum', field: 'amount', alias: 'total' }],
          orderBy: [{ field: 'total', order: 'DESC' }],
          limit: 3,
        }),
      ).toEqual({
        sql:
          'select "stage", sum("amount") as "total" from "data"."deal" where TRUE group by "stage" ' +
          'order by "total" desc nulls last, "stage" asc limit $1',
        values: [3],
      });
    });

    it('accepts one orderBy object, defaulting to asc, on an alias or a group-by field', () => {
      expect(compile({ aggregations: [{ function: 'count', alias: 'n' }], orderBy: { field: 'n' } }).sql).toBe(
        'select count(*) as "n" from "data"."deal" where TRUE order by "n" asc nulls last limit $1',
      );
      expect(
        compile({
          groupBy: ['stage'],
          aggregations: [{ function: 'count', alias: 'n' }],
          orderBy: { field: 'stage', order: 'desc' },
        }).sql,
      ).toBe(
        'select "stage", count(*) as "n" from "data"."deal" where TRUE group by "stage" order by "stage" desc nulls last, "stage" asc limit $1',
      );
    });

    it.each([
      [5000, MAX_ENGINE_LIMIT],
      [0, 1],
      [-3, 1],
      [2.9, 2],
    ])('binds limit %p as %p', (limit, bound) => {
      expect(compile({ aggregations: [{ function: 'count', alias: 'n' }], limit }).values).toEqual([bound]);
    });

    it('binds the where values first and the limit last', () => {
      expect(
        compile({
          where: { stage: 'won', amount: { $gt: 100 } },
          groupBy: ['quantity'],
          aggregations: [{ function: 'max', field: 'close_date', alias: 'last_close' }],
          limit: 25,
        }),
      ).toEqual({
        sql:
          'select "quantity", max("close_date") as "last_close" from "data"."deal" ' +
          'where ("stage" = $1::text AND "amount" > $2::numeric) group by "quantity" order by "quantity" asc limit $3',
        values: ['won', 100, 25],
      });
    });
  });

  describe('refusals', () => {
    it('refuses an unknown function, naming the ones there are', () => {
      const error = compileError({ aggregations: [{ function: 'drop_table', field: 'amount', alias: 'x' }] });
      expect(error.code).toBe('invalid_aggregate_function');
      expect(error.details).toEqual({ function: 'drop_table', availableFunctions: AGGREGATE_FUNCTIONS });
    });

    it('refuses an unknown field in aggregations and in groupBy, listing the fields', () => {
      for (const query of [
        { aggregations: [{ function: 'sum', field: 'price', alias: 'total' }] },
        { groupBy: ['price'], aggregations: [{ function: 'count', alias: 'n' }] },
      ]) {
        const error = compileError(query);
        expect(error.code).toBe('unknown_field');
        expect(error.details).toEqual({ field: 'price', object: 'deal', availableFields: fieldNames });
      }
    });

    it.each([undefined, '', 'Total', '1st', 'total sum', 'x"; drop table deal; --', 'a'.repeat(64)])(
      'refuses the alias %p',
      (alias) => {
        const error = compileError({ aggregations: [{ function: 'count', alias }] });
        expect(error.code).toBe('invalid_aggregation');
        expect(error.message).toContain('must be snake_case');
      },
    );

    it('refuses an alias used twice or taken by a group-by field', () => {
      expect(
        compileError({
          aggregations: [
            { function: 'count', alias: 'n' },
            { function: 'sum', field: 'amount', alias: 'n' },
          ],
        }).message,
      ).toBe('Alias "n" is used twice');
      expect(compileError({ groupBy: ['stage'], aggregations: [{ function: 'count', alias: 'stage' }] }).message).toBe(
        'Alias "stage" collides with a group-by field',
      );
    });

    it('refuses functions on fields they do not fit, and grouping by free text or json', () => {
      expect(compileError({ aggregations: [{ function: 'sum', field: 'name', alias: 's' }] }).code).toBe('invalid_aggregation');
      expect(compileError({ aggregations: [{ function: 'max', field: 'meta', alias: 'm' }] }).code).toBe('invalid_aggregation');
      expect(compileError({ aggregations: [{ function: 'avg', alias: 'a' }] }).message).toBe('avg needs a field');
      expect(compileError({ groupBy: ['notes'], aggregations: [{ function: 'count', alias: 'n' }] }).code).toBe(
        'invalid_group_by',
      );
      expect(compileError({ groupBy: ['meta'], aggregations: [{ function: 'count', alias: 'n' }] }).code).toBe(
        'invalid_group_by',
      );
    });

    it('refuses aggregations that are not a non-empty array', () => {
      expect(compileError({ aggregations: [] }).code).toBe('invalid_aggregation');
      expect(compileError({ aggregations: 'count' }).code).toBe('invalid_aggregation');
    });

    it('refuses ordering by a name that is neither an alias nor a group-by field', () => {
      const error = compileError({
        groupBy: ['stage'],
        aggregations: [{ function: 'count', alias: 'n' }],
        orderBy: [{ field: 'amount' }],
      });
      expect(error.code).toBe('unknown_field');
      expect(error.details).toEqual({ field: 'amount', availableFields: ['stage', 'n'] });
      expect(
        compileError({ aggregations: [{ function: 'count', alias: 'n' }], orderBy: [{ field: 'n', order: 'up' }] }).code,
      ).toBe('invalid_order_by');
    });

    it('checks the where like find does', () => {
      expect(compileError({ where: { price: 1 }, aggregations: [{ function: 'count', alias: 'n' }] }).code).toBe('unknown_field');
    });
  });
});

describe('decodeAggregateRows', () => {
  it('turns counts, sums and averages into numbers and keeps min/max in their field type', () => {
    const compiled = compileAggregate(deal, {
      groupBy: ['stage'],
      aggregations: [
        { function: 'count', alias: 'n' },
        { function: 'avg', field: 'amount', alias: 'average' },
        { function: 'min', field: 'close_date', alias: 'first_close' },
        { function: 'max', field: 'name', alias: 'last_name' },
      ],
      limit: 10,
    });
    const rows = [{ stage: 'won', n: '3', average: '1500.5000000000000000', first_close: '2024-01-02', last_name: '42' }];
    expect(decodeAggregateRows(deal, compiled, rows)).toEqual([
      { stage: 'won', first_close: '2024-01-02', last_name: '42', n: 3, average: 1500.5 },
    ]);
  });
});

describe('exact sums and averages', () => {
  it('sums and averages a number (double) field as numeric, through its shortest exact text', () => {
    const { sql } = compile({
      aggregations: [
        { function: 'sum', field: 'weight', alias: 's' },
        { function: 'avg', field: 'weight', alias: 'a' },
        { function: 'sum', field: 'quantity', alias: 'q' },
      ],
    });
    expect(sql).toContain('sum("weight"::text::numeric) as "s", avg("weight"::text::numeric) as "a", sum("quantity") as "q"');
  });

  it('keeps values beyond 2^53 as exact decimal strings and everything else a number', () => {
    const compiled = compileAggregate(deal, {
      aggregations: ['a', 'b', 'c', 'd', 'e', 'f'].map((alias) => ({ function: 'sum', field: 'quantity', alias })),
      limit: 1,
    });
    const row = {
      a: '9007199254740991',
      b: '9007199254740992',
      c: '-18014398509481982',
      d: '19999999999999996.00',
      e: '9007199254740993.5000000000000000',
      f: '2000.50',
    };
    expect(decodeAggregateRows(deal, compiled, [row])).toEqual([
      {
        a: 9007199254740991,
        b: '9007199254740992',
        c: '-18014398509481982',
        d: '19999999999999996',
        e: '9007199254740993.5',
        f: 2000.5,
      },
    ]);
  });
});

describe('compileAggregatePlan (the semantic layer)', () => {
  const account: ObjectMeta = {
    name: 'account',
    label: 'Account',
    fields: [field('industry', 'select', { options: ['retail', 'software'] }), field('notes', 'json'), ...SYSTEM_FIELDS],
  };
  const withLookup: ObjectMeta = { ...deal, fields: [...deal.fields, field('account', 'lookup', { reference: 'account' })] };

  it('filters each aggregation on its own, counts empty sums as 0, and divides a ratio by a denominator of 0 as null', () => {
    const { query } = compileAggregatePlan(deal, {
      groupBy: ['stage'],
      measures: [
        { alias: 'won_total', function: 'sum', field: 'amount', filter: { stage: 'won' }, emptyAsZero: true },
        {
          alias: 'win_rate',
          numerator: { alias: 'win_rate', function: 'count', filter: { stage: 'won' }, emptyAsZero: true },
          denominator: { alias: 'win_rate', function: 'count', filter: { stage: { $in: ['won', 'lost'] } }, emptyAsZero: true },
        },
      ],
      where: { quantity: { $gt: 1 } },
      limit: 10,
    });
    expect(query.sql).toBe(
      'select "stage", coalesce(sum("amount") filter (where "stage" = $1::text), 0) as "won_total", ' +
        '(count(*) filter (where "stage" = $2::text))::numeric / nullif((count(*) filter (where "stage" = ANY($3::text[])))::numeric, 0) as "win_rate" ' +
        'from "data"."deal" where "quantity" > $4::bigint group by "stage" order by "stage" asc limit $5',
    );
    expect(query.parameters).toEqual(['won', 'won', ['won', 'lost'], 1, 10]);
  });

  it('leaves averages and extremes of no rows null (no 0 to claim, none a date could hold); decodes dated extremes', () => {
    const compiled = compileAggregatePlan(deal, {
      groupBy: ['stage'],
      measures: [
        { alias: 'won_avg', function: 'avg', field: 'amount', filter: { stage: 'won' }, emptyAsZero: true },
        { alias: 'first_won', function: 'min', field: 'close_date', filter: { stage: 'won' }, emptyAsZero: true },
        { alias: 'last_won_at', function: 'max', field: 'created_at', filter: { stage: 'won' }, emptyAsZero: true },
        { alias: 'won', function: 'count', filter: { stage: 'won' }, emptyAsZero: true },
      ],
      limit: 10,
    });
    expect(compiled.query.sql).toBe(
      'select "stage", avg("amount") filter (where "stage" = $1::text) as "won_avg", ' +
        'min("close_date") filter (where "stage" = $2::text) as "first_won", ' +
        'max("created_at") filter (where "stage" = $3::text) as "last_won_at", ' +
        'count(*) filter (where "stage" = $4::text) as "won" ' +
        'from "data"."deal" where TRUE group by "stage" order by "stage" asc limit $5',
    );
    const rows = [
      { stage: 'lost', won_avg: null, first_won: null, last_won_at: null, won: '0' },
      {
        stage: 'won',
        won_avg: '12.5000000000000000',
        first_won: '2024-01-02',
        last_won_at: new Date('2024-03-04T05:06:07.089Z'),
        won: '2',
      },
    ];
    expect(decodeAggregateRows(deal, compiled, rows)).toEqual([
      { stage: 'lost', won_avg: null, first_won: null, last_won_at: null, won: 0 },
      { stage: 'won', won_avg: 12.5, first_won: '2024-01-02', last_won_at: '2024-03-04T05:06:07.089Z', won: 2 },
    ]);
  });

  it('groups by a lookup target field and a UTC time bucket through a derived table', () => {
    const { query, groupBy } = compileAggregatePlan(
      withLookup,
      {
        groupBy: ['account__industry', 'period'],
        lookups: [{ alias: 'account__industry', lookup: 'account', field: 'industry' }],
        timeBucket: { alias: 'period', field: 'created_at', grain: 'week' },
        measures: [{ alias: 'n', function: 'count' }],
        where: { account__industry: 'retail' },
        limit: 10,
      },
      { account },
    );
    expect(query.sql).toBe(
      'select "account__industry", "period", count(*) as "n" from (select "t".*, "j0"."industry" as "account__industry", ' +
        `to_char(date_trunc('week', ("t"."created_at" at time zone 'UTC')), 'YYYY-MM-DD') as "period" ` +
        'from "data"."deal" as "t" left join "data"."account" as "j0" on "j0"."id" = "t"."account") as "t" ' +
        'where "account__industry" = $1::text group by "account__industry", "period" order by "account__industry" asc, "period" asc limit $2',
    );
    expect(groupBy.map((f) => [f.name, f.type])).toEqual([
      ['account__industry', 'select'],
      ['period', 'text'],
    ]);
  });

  it('buckets a date field without a time zone', () => {
    const { query } = compileAggregatePlan(deal, {
      groupBy: ['period'],
      timeBucket: { alias: 'period', field: 'close_date', grain: 'quarter' },
      measures: [{ alias: 'n', function: 'count' }],
      limit: 5,
    });
    expect(query.sql).toContain(`to_char(date_trunc('quarter', "t"."close_date"::timestamp), 'YYYY-MM-DD') as "period"`);
  });

  it.each<[string, Parameters<typeof compileAggregatePlan>[1], string]>([
    [
      'a bucket over a field that is no date',
      {
        groupBy: [],
        timeBucket: { alias: 'period', field: 'amount', grain: 'day' },
        measures: [{ alias: 'n', function: 'count' }],
        limit: 1,
      },
      'invalid_group_by',
    ],
    [
      'an unknown grain',
      {
        groupBy: [],
        timeBucket: { alias: 'period', field: 'close_date', grain: 'hour' as never },
        measures: [{ alias: 'n', function: 'count' }],
        limit: 1,
      },
      'invalid_group_by',
    ],
    [
      'a column name a field has',
      {
        groupBy: [],
        timeBucket: { alias: 'stage', field: 'close_date', grain: 'day' },
        measures: [{ alias: 'n', function: 'count' }],
        limit: 1,
      },
      'invalid_group_by',
    ],
    [
      'a lookup through a field that is no lookup',
      {
        groupBy: [],
        lookups: [{ alias: 'x', lookup: 'stage', field: 'industry' }],
        measures: [{ alias: 'n', function: 'count' }],
        limit: 1,
      },
      'invalid_group_by',
    ],
    [
      'a filter on an unknown field',
      { groupBy: [], measures: [{ alias: 'n', function: 'count', filter: { nope: 1 } }], limit: 1 },
      'unknown_field',
    ],
    [
      'a ratio of a sum over text',
      {
        groupBy: [],
        measures: [
          {
            alias: 'r',
            numerator: { alias: 'r', function: 'sum', field: 'name' },
            denominator: { alias: 'r', function: 'count' },
          },
        ],
        limit: 1,
      },
      'invalid_aggregation',
    ],
  ])('refuses %s', (_case, plan, code) => {
    expect(domainError(() => compileAggregatePlan(withLookup, plan, { account })).code).toBe(code);
  });

  it('refuses a hidden target field as unknown', () => {
    const visible: ObjectMeta = { ...account, fields: account.fields.filter((f) => f.name !== 'industry') };
    const plan = {
      groupBy: ['x'],
      lookups: [{ alias: 'x', lookup: 'account', field: 'industry' }],
      measures: [{ alias: 'n', function: 'count' as const }],
      limit: 1,
    };
    expect(domainError(() => compileAggregatePlan(withLookup, plan, { account: visible })).code).toBe('unknown_field');
  });
});
