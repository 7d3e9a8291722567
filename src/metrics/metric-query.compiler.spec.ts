import { DomainError } from '../common/domain-error';
import {
  bucketStart,
  compileMetricQuery,
  fillPeriods,
  nextBucket,
  periodsBetween,
  type MetricQuery,
} from './metric-query.compiler';
import type { MetricDefinition } from './metric.types';
import { domainError } from '../../test/support/metadata-fixtures';

const base = { object: 'deal', timeField: 'close_date', dimensions: ['owner', 'account.industry'], synonyms: [] };
const METRICS: MetricDefinition[] = [
  {
    ...base,
    name: 'revenue',
    label: 'Revenue',
    type: 'simple',
    measure: { function: 'sum', field: 'amount' },
    filter: { stage: 'won' },
  },
  { ...base, name: 'won', label: 'Won', type: 'simple', measure: { function: 'count' }, filter: { stage: 'won' } },
  {
    ...base,
    name: 'closed',
    label: 'Closed',
    type: 'simple',
    measure: { function: 'count' },
    filter: { stage: { $in: ['won', 'lost'] } },
  },
  { ...base, name: 'win_rate', label: 'Win rate', type: 'ratio', numerator: 'won', denominator: 'closed' },
  {
    ...base,
    name: 'average',
    label: 'Average',
    type: 'simple',
    measure: { function: 'avg', field: 'amount' },
    dimensions: ['owner'],
  },
  { ...base, name: 'accounts', label: 'Accounts', type: 'simple', object: 'account', measure: { function: 'count' } },
  { ...base, name: 'undated', label: 'Undated', type: 'simple', measure: { function: 'count' }, timeField: undefined },
  { ...base, name: 'partial', label: 'Partial', type: 'simple', measure: { function: 'count' } },
];
const DEFINITIONS = new Map(METRICS.map((m) => [m.name, m]));
const compile = (query: Partial<MetricQuery>) => compileMetricQuery({ metrics: ['revenue'], limit: 50, ...query }, DEFINITIONS);

describe('compileMetricQuery', () => {
  it('turns metrics into aggregations with their own filters, and a ratio into numerator over denominator', () => {
    expect(compile({ metrics: ['revenue', 'win_rate', 'average'] }).plan).toEqual({
      measures: [
        { alias: 'revenue', function: 'sum', field: 'amount', filter: { stage: 'won' }, emptyAsZero: true },
        {
          alias: 'win_rate',
          numerator: { alias: 'win_rate', function: 'count', filter: { stage: 'won' } },
          denominator: { alias: 'win_rate', function: 'count', filter: { stage: { $in: ['won', 'lost'] } } },
        },
        // An average of nothing stays null: only sums are asked to read no rows as 0.
        { alias: 'average', function: 'avg', field: 'amount' },
      ],
      groupBy: [],
      limit: 50,
    });
  });

  it('groups by dimensions (a lookup one as a joined column), buckets time, and turns from/to into a range of whole days', () => {
    const { plan } = compile({
      groupBy: ['account.industry'],
      timeGrain: 'month',
      from: '2024-11-15',
      to: '2025-01-31',
      where: { owner: 'Maya', $or: [{ 'account.industry': 'retail' }] },
      orderBy: [{ field: 'revenue', order: 'desc' }, { field: 'account.industry' }],
    });
    expect(plan).toMatchObject({
      groupBy: ['account__industry', 'period'],
      lookups: [{ alias: 'account__industry', lookup: 'account', field: 'industry' }],
      timeBucket: { alias: 'period', field: 'close_date', grain: 'month' },
      where: {
        $and: [
          { owner: 'Maya', $or: [{ account__industry: 'retail' }] },
          { close_date: { $gte: '2024-11-15', $lt: '2025-02-01' } },
        ],
      },
      orderBy: [
        { field: 'revenue', order: 'desc' },
        { field: 'account__industry', order: 'asc' },
      ],
    });
  });

  it('names dimensions and periods as the user does in the rows, and fills empty periods', () => {
    const compiled = compile({
      metrics: ['revenue', 'average'],
      groupBy: ['owner'],
      timeGrain: 'quarter',
      from: '2024-10-01',
      to: '2025-06-30',
    });
    const { rows, truncated } = compiled.finish([
      { owner: 'Ann', period: '2025-01-01', revenue: 10, average: 5 },
      { owner: 'Bob', period: '2024-10-01', revenue: 7, average: 7 },
    ]);
    expect(truncated).toBe(false);
    expect(rows).toEqual([
      { owner: 'Ann', period: '2024-10-01', revenue: 0, average: null },
      { owner: 'Ann', period: '2025-01-01', revenue: 10, average: 5 },
      { owner: 'Ann', period: '2025-04-01', revenue: 0, average: null },
      { owner: 'Bob', period: '2024-10-01', revenue: 7, average: 7 },
      { owner: 'Bob', period: '2025-01-01', revenue: 0, average: null },
      { owner: 'Bob', period: '2025-04-01', revenue: 0, average: null },
    ]);
    expect(compile({ groupBy: ['account.industry'] }).finish([{ account__industry: 'retail', revenue: 3 }]).rows).toEqual([
      { 'account.industry': 'retail', revenue: 3 },
    ]);
  });

  it('marks the periods from/to cut as partial, with the days they cover', () => {
    const rows = compile({ metrics: ['revenue', 'average'], timeGrain: 'month', from: '2026-01-15', to: '2026-03-10' }).finish([
      { period: '2026-01-01', revenue: 10, average: 5 },
      { period: '2026-03-01', revenue: 0, average: null },
    ]).rows;
    expect(rows).toEqual([
      { period: '2026-01-01', partial: true, periodStart: '2026-01-15', periodEnd: '2026-01-31', revenue: 10, average: 5 },
      { period: '2026-02-01', revenue: 0, average: null },
      { period: '2026-03-01', partial: true, periodStart: '2026-03-01', periodEnd: '2026-03-10', revenue: 0, average: null },
    ]);
    // The flag and the bounds follow the period, before the figures.
    expect(Object.keys(rows[0])).toEqual(['period', 'partial', 'periodStart', 'periodEnd', 'revenue', 'average']);
    // Only from, or only to, cuts one end; whole buckets and no range cut nothing.
    expect(compile({ timeGrain: 'week', from: '2025-01-01' }).finish([{ period: '2024-12-30', revenue: 1 }]).rows).toEqual([
      { period: '2024-12-30', partial: true, periodStart: '2025-01-01', periodEnd: '2025-01-05', revenue: 1 },
    ]);
    expect(compile({ timeGrain: 'year', to: '2024-06-30' }).finish([{ period: '2024-01-01', revenue: 1 }]).rows).toEqual([
      { period: '2024-01-01', partial: true, periodStart: '2024-01-01', periodEnd: '2024-06-30', revenue: 1 },
    ]);
    expect(
      compile({ timeGrain: 'quarter', from: '2024-10-01', to: '2024-12-31' }).finish([{ period: '2024-10-01', revenue: 1 }]).rows,
    ).toEqual([{ period: '2024-10-01', revenue: 1 }]);
    expect(compile({ timeGrain: 'day', from: '2024-10-01', to: '2024-10-01' }).finish([]).rows).toEqual([
      { period: '2024-10-01', revenue: 0 },
    ]);
    expect(compile({ timeGrain: 'month' }).finish([{ period: '2024-10-01', revenue: 1 }]).rows).toEqual([
      { period: '2024-10-01', revenue: 1 },
    ]);
    // A metric named "partial" is refused only where a period can be cut.
    expect(compile({ metrics: ['partial'], timeGrain: 'month' }).plan.groupBy).toEqual(['period']);
  });

  it('does not fill when the engine may have left groups out, and says so', () => {
    const compiled = compile({ timeGrain: 'day', from: '2025-01-01', to: '2025-01-10', limit: 2 });
    const result = compiled.finish([
      { period: '2025-01-01', revenue: 1 },
      { period: '2025-01-05', revenue: 2 },
    ]);
    expect(result).toEqual({
      rows: [
        { period: '2025-01-01', revenue: 1 },
        { period: '2025-01-05', revenue: 2 },
      ],
      truncated: true,
    });
  });

  it.each<[string, Partial<MetricQuery>, string, RegExp]>([
    [
      'a dimension one metric lacks',
      { metrics: ['revenue', 'average'], groupBy: ['account.industry'] },
      'unknown_field',
      /Unknown dimension "account.industry"/,
    ],
    ['a where on a field that is no dimension', { where: { amount: { $gt: 1 } } }, 'unknown_field', /Unknown dimension "amount"/],
    ['metrics of two objects', { metrics: ['revenue', 'accounts'] }, 'invalid_metric_query', /one object per call/],
    ['a grain without a time field', { metrics: ['undated'], timeGrain: 'year' }, 'invalid_metric_query', /no time field/],
    ['a malformed date', { from: '2025-13-01' }, 'invalid_metric_query', /YYYY-MM-DD/],
    ['from after to', { from: '2025-02-01', to: '2025-01-01' }, 'invalid_metric_query', /after/],
    [
      'too many buckets',
      { timeGrain: 'day', from: '2020-01-01', to: '2024-12-31' },
      'invalid_metric_query',
      /more than 1000 day buckets/,
    ],
    ['four dimensions', { groupBy: ['owner', 'account.industry', 'a', 'b'] }, 'invalid_metric_query', /at most 3/],
    ['a where nested too deep', { where: nest(12) }, 'invalid_metric_query', /deeper/],
    [
      'a metric named like the partial column of a cut period',
      { metrics: ['partial'], timeGrain: 'month', from: '2025-01-15' },
      'invalid_metric_query',
      /"partial" is both a metric and a column/,
    ],
  ])('refuses %s', (_case, query, code, message) => {
    const error: DomainError = domainError(() => compile(query));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });
});

describe('time buckets (UTC, weeks from Monday)', () => {
  it.each([
    ['2025-01-01', 'day', '2025-01-01', '2025-01-02'],
    ['2025-01-01', 'week', '2024-12-30', '2025-01-06'],
    ['2024-12-29', 'week', '2024-12-23', '2024-12-30'],
    ['2025-02-28', 'month', '2025-02-01', '2025-03-01'],
    ['2024-12-31', 'quarter', '2024-10-01', '2025-01-01'],
    ['2025-05-17', 'quarter', '2025-04-01', '2025-07-01'],
    ['2024-02-29', 'year', '2024-01-01', '2025-01-01'],
  ] as const)('%s in its %s starts on %s, the next on %s', (day, grain, start, next) => {
    expect(bucketStart(day, grain)).toBe(start);
    expect(nextBucket(start, grain)).toBe(next);
  });

  it('lists the buckets of a range, both ends included', () => {
    expect(periodsBetween('2024-11-20', '2025-02-01', 'month')).toEqual(['2024-11-01', '2024-12-01', '2025-01-01', '2025-02-01']);
  });

  it('fills every period without rows, with no dimensions even when nothing was found', () => {
    expect(fillPeriods([], { grain: 'year', from: '2024-06-01', to: '2025-06-01', dimensions: [], empty: { n: 0 } })).toEqual([
      { period: '2024-01-01', n: 0 },
      { period: '2025-01-01', n: 0 },
    ]);
  });
});

function nest(depth: number): Record<string, unknown> {
  return depth === 0 ? { owner: 'x' } : { $and: [nest(depth - 1)] };
}
