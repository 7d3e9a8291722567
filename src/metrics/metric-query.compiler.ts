import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import {
  MAX_GROUP_BY_FIELDS,
  TIME_GRAINS,
  type AggregatePlan,
  type LookupColumn,
  type MeasureSpec,
  type TimeGrain,
} from '../data/data.types';
import { clip, MAX_WHERE_DEPTH } from '../data/where.compiler';
import { MAX_PERIODS, MAX_QUERY_METRICS, type MetricDefinition } from './metric.types';

/** The column of a time bucket's start in query_metric rows. */
export const PERIOD_COLUMN = 'period';
/**
 * The columns a bucket cut by from/to gets: `partial: true` and the first and last day it really covers
 * (both included). camelCase, so no metric or field name can take them; `partial` is reserved with a cut.
 */
export const PARTIAL_COLUMN = 'partial';
export const PERIOD_START_COLUMN = 'periodStart';
export const PERIOD_END_COLUMN = 'periodEnd';

/** query_metric's arguments (the tool's JSON Schema checked their shape; the rest is checked here). */
export interface MetricQuery {
  metrics: string[];
  groupBy?: string[];
  timeGrain?: TimeGrain;
  from?: string;
  to?: string;
  where?: Record<string, unknown>;
  orderBy?: Array<{ field: string; order?: 'asc' | 'desc' }>;
  /** Already clamped. */
  limit: number;
}

/** A metric query compiled for the aggregate engine, and what turns the engine's rows into the answer. */
export interface CompiledMetricQuery {
  object: string;
  plan: AggregatePlan;
  finish(rows: Record<string, unknown>[]): { rows: Record<string, unknown>[]; truncated: boolean };
}

/**
 * Compiles a metric query into one aggregate plan over the metrics' object: each simple metric an
 * aggregation with its own filter, each ratio its numerator over its denominator, dimensions as group-by
 * columns (a lookup dimension as a joined column), the time grain as a UTC bucket and from/to as a range on
 * the time field. `definitions` holds the requested metrics and the metrics their ratios divide.
 */
export function compileMetricQuery(query: MetricQuery, definitions: ReadonlyMap<string, MetricDefinition>): CompiledMetricQuery {
  const names = [...new Set(query.metrics)];
  if (!names.length) throw invalidQuery('Name at least one metric in metrics (see list_metrics)');
  if (names.length > MAX_QUERY_METRICS) throw invalidQuery(`At most ${MAX_QUERY_METRICS} metrics per call`);
  const metrics = names.map((name) => definitions.get(name)!);
  const object = metrics[0].object;
  const other = metrics.find((m) => m.object !== object);
  if (other) {
    throw invalidQuery(
      `Metrics of one object per call: "${metrics[0].name}" is about ${object}, "${other.name}" about ${other.object}; ask separately`,
    );
  }
  const shared = metrics.map((m) => new Set(m.dimensions)).reduce((a, b) => new Set([...a].filter((d) => b.has(d))));
  const available = [...shared];

  // Dimensions, as engine columns: a field's own name, or an alias for a lookup's target field.
  const lookups = new Map<string, LookupColumn>();
  const columnOf = (dimension: string): string => {
    if (!shared.has(dimension)) {
      throw new DomainError('unknown_field', `Unknown dimension "${clip(dimension)}" for ${names.join(', ')}`, {
        field: clip(dimension),
        availableFields: available,
      });
    }
    const dot = dimension.indexOf('.');
    if (dot < 0) return dimension;
    const alias = dimension.replace('.', '__');
    lookups.set(alias, { alias, lookup: dimension.slice(0, dot), field: dimension.slice(dot + 1) });
    return alias;
  };
  const groupBy = [...new Set(query.groupBy ?? [])];
  if (groupBy.length > MAX_GROUP_BY_FIELDS) throw invalidQuery(`Group by at most ${MAX_GROUP_BY_FIELDS} dimensions`);
  const groupColumns = groupBy.map(columnOf);
  const outputNames = new Set<string>(names);
  const periodColumns = query.timeGrain ? [PERIOD_COLUMN, ...(query.from || query.to ? [PARTIAL_COLUMN] : [])] : [];
  for (const name of [...groupBy, ...periodColumns]) {
    if (outputNames.has(name)) throw invalidQuery(`"${name}" is both a metric and a column of the answer; query it separately`);
    outputNames.add(name);
  }

  const timeField = needsTimeField(query) ? commonTimeField(metrics) : undefined;
  const range = timeField ? rangeOf(query, timeField) : undefined;
  // Checked before the query runs: a range with too many buckets is refused, not computed.
  if (query.timeGrain && range?.from && range.to) periodsBetween(range.from, range.to, query.timeGrain);
  const userWhere = query.where === undefined ? undefined : rewriteWhere(query.where, columnOf, 1);
  const where = [userWhere, range?.where].filter((w) => w !== undefined);

  const measureOf = (metric: MetricDefinition, alias: string): MeasureSpec => ({
    alias,
    function: metric.measure!.function,
    ...(metric.measure!.field !== undefined && { field: metric.measure!.field }),
    ...(metric.filter !== undefined && { filter: metric.filter }),
    // A sum of nothing is 0 like a count; an average or extreme of nothing stays null (no such value).
    ...(metric.measure!.function === 'sum' && { emptyAsZero: true }),
  });
  const plan: AggregatePlan = {
    measures: metrics.map((m) =>
      m.type === 'ratio'
        ? {
            alias: m.name,
            numerator: measureOf(definitions.get(m.numerator!)!, m.name),
            denominator: measureOf(definitions.get(m.denominator!)!, m.name),
          }
        : measureOf(m, m.name),
    ),
    groupBy: [...groupColumns, ...(query.timeGrain ? [PERIOD_COLUMN] : [])],
    ...(where.length && { where: where.length === 1 ? where[0] : { $and: where } }),
    limit: query.limit,
  };
  if (lookups.size) plan.lookups = [...lookups.values()];
  if (query.timeGrain && timeField) plan.timeBucket = { alias: PERIOD_COLUMN, field: timeField, grain: query.timeGrain };
  if (query.orderBy?.length) {
    plan.orderBy = query.orderBy.map((item) => ({
      field: names.includes(item.field) || (item.field === PERIOD_COLUMN && query.timeGrain) ? item.field : columnOf(item.field),
      order: item.order ?? 'asc',
    }));
  }

  const emptyValues = Object.fromEntries(metrics.map((m) => [m.name, emptyValue(m)]));
  return {
    object,
    plan,
    finish(engineRows) {
      let rows = engineRows.map((row) => {
        const out: Record<string, unknown> = {};
        for (const [index, dimension] of groupBy.entries()) out[dimension] = row[groupColumns[index]];
        if (query.timeGrain) out[PERIOD_COLUMN] = row[PERIOD_COLUMN];
        for (const name of names) out[name] = row[name];
        return out;
      });
      const complete = engineRows.length < query.limit;
      if (query.timeGrain && complete) {
        rows = fillPeriods(rows, {
          grain: query.timeGrain,
          from: range?.from,
          to: range?.to,
          dimensions: groupBy,
          empty: emptyValues,
        });
        rows.sort(comparator(query.orderBy ?? [], groupBy));
      }
      const truncated = rows.length > query.limit || !complete;
      rows = rows.slice(0, query.limit);
      if (query.timeGrain) rows = rows.map((row) => markPartial(row, query.timeGrain!, range?.from, range?.to));
      return { rows, truncated };
    },
  };
}

/** Empty buckets: 0 for counts and sums (nothing counted), null for averages, extremes and ratios (undefined). */
function emptyValue(metric: MetricDefinition): number | null {
  if (metric.type === 'ratio') return null;
  const fn = metric.measure!.function;
  return fn === 'count' || fn === 'count_distinct' || fn === 'sum' ? 0 : null;
}

function needsTimeField(query: MetricQuery): boolean {
  return query.timeGrain !== undefined || query.from !== undefined || query.to !== undefined;
}

/** The time field all the metrics share, which a grain and from/to apply to. */
function commonTimeField(metrics: MetricDefinition[]): string {
  const without = metrics.find((m) => !m.timeField);
  if (without) throw invalidQuery(`Metric "${without.name}" has no time field: it cannot be split by time or limited to dates`);
  const fields = new Set(metrics.map((m) => m.timeField));
  if (fields.size > 1)
    throw invalidQuery(`These metrics use different time fields (${[...fields].join(', ')}); query them separately`);
  return metrics[0].timeField!;
}

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * from/to as a where on the time field: whole UTC days, both ends included. Written so that it holds for
 * a date field and a datetime field alike (a date compares with a UTC midnight as that day's start).
 */
function rangeOf(query: MetricQuery, timeField: string): { where?: Record<string, unknown>; from?: string; to?: string } {
  const from = query.from === undefined ? undefined : parseDay(query.from, 'from');
  const to = query.to === undefined ? undefined : parseDay(query.to, 'to');
  if (from && to && from > to) throw invalidQuery(`from (${from}) is after to (${to})`);
  const condition: Record<string, unknown> = {};
  if (from) condition.$gte = from;
  if (to) condition.$lt = addDays(to, 1);
  return { ...(from || to ? { where: { [timeField]: condition } } : {}), from, to };
}

function parseDay(value: unknown, name: string): string {
  const match = typeof value === 'string' ? ISO_DATE.exec(value) : null;
  const date = match ? new Date(`${value as string}T00:00:00Z`) : undefined;
  if (!date || Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== value) {
    throw invalidQuery(`${name} must be a date "YYYY-MM-DD", got ${clip(JSON.stringify(value) ?? String(value))}`);
  }
  return value;
}

/** The user's where, with dimension names as engine columns; only dimensions may be filtered on. */
function rewriteWhere(where: unknown, columnOf: (dimension: string) => string, depth: number): unknown {
  if (depth > MAX_WHERE_DEPTH + 1) throw invalidQuery(`where is nested deeper than ${MAX_WHERE_DEPTH} levels`);
  if (Array.isArray(where)) return where.map((item) => rewriteWhere(item, columnOf, depth + 1));
  if (!isPlainObject(where)) return where;
  return Object.fromEntries(
    Object.entries(where).map(([key, value]) =>
      key.startsWith('$')
        ? [key, key === '$and' || key === '$or' || key === '$not' ? rewriteWhere(value, columnOf, depth + 1) : value]
        : [columnOf(key), value],
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// Time buckets (UTC; weeks from Monday), as the engine's date_trunc gives them.

/** The start of the bucket that holds `day` ("YYYY-MM-DD"). */
export function bucketStart(day: string, grain: TimeGrain): string {
  const date = new Date(`${day}T00:00:00Z`);
  const y = date.getUTCFullYear();
  const m = date.getUTCMonth();
  switch (grain) {
    case 'day':
      return day;
    case 'week':
      return addDays(day, -((date.getUTCDay() + 6) % 7));
    case 'month':
      return isoDay(Date.UTC(y, m, 1));
    case 'quarter':
      return isoDay(Date.UTC(y, m - (m % 3), 1));
    case 'year':
      return isoDay(Date.UTC(y, 0, 1));
  }
}

/** The start of the bucket after the one starting at `start`. */
export function nextBucket(start: string, grain: TimeGrain): string {
  const date = new Date(`${start}T00:00:00Z`);
  const y = date.getUTCFullYear();
  const m = date.getUTCMonth();
  switch (grain) {
    case 'day':
      return addDays(start, 1);
    case 'week':
      return addDays(start, 7);
    case 'month':
      return isoDay(Date.UTC(y, m + 1, 1));
    case 'quarter':
      return isoDay(Date.UTC(y, m + 3, 1));
    case 'year':
      return isoDay(Date.UTC(y + 1, 0, 1));
  }
}

/** Bucket starts from the bucket of `from` to the bucket of `to`, both included. */
export function periodsBetween(from: string, to: string, grain: TimeGrain): string[] {
  const periods: string[] = [];
  const last = bucketStart(to, grain);
  for (let p = bucketStart(from, grain); p <= last; p = nextBucket(p, grain)) {
    if (periods.length >= MAX_PERIODS) {
      throw invalidQuery(`from/to span more than ${MAX_PERIODS} ${grain} buckets; use a coarser timeGrain or a shorter range`);
    }
    periods.push(p);
  }
  return periods;
}

/**
 * Adds the buckets with no records inside the range (from/to, or the first and last bucket found), for
 * every combination of dimension values found, with each metric's empty value.
 */
export function fillPeriods(
  rows: Record<string, unknown>[],
  options: { grain: TimeGrain; from?: string; to?: string; dimensions: string[]; empty: Record<string, unknown> },
): Record<string, unknown>[] {
  const found = rows
    .map((row) => row[PERIOD_COLUMN])
    .filter((p): p is string => typeof p === 'string')
    .sort();
  const from = options.from ?? found[0];
  const to = options.to ?? found[found.length - 1];
  if (!from || !to) return rows;
  const periods = periodsBetween(from, to, options.grain);
  const keyOf = (row: Record<string, unknown>) => JSON.stringify(options.dimensions.map((d) => row[d] ?? null));
  const groups = new Map<string, Record<string, unknown>>();
  for (const row of rows) groups.set(keyOf(row), Object.fromEntries(options.dimensions.map((d) => [d, row[d] ?? null])));
  if (!options.dimensions.length && !groups.size) groups.set('[]', {});
  const seen = new Set(rows.map((row) => `${keyOf(row)}|${String(row[PERIOD_COLUMN])}`));
  const filled = [...rows];
  for (const [key, dims] of groups) {
    for (const period of periods) {
      if (!seen.has(`${key}|${period}`)) filled.push({ ...dims, [PERIOD_COLUMN]: period, ...options.empty });
    }
  }
  return filled;
}

/**
 * A row whose bucket from/to cut (a month from the 15th, a week from a Wednesday) says so after its
 * period: `partial: true`, `periodStart` and `periodEnd`, the days it covers (both included), so a short
 * period is not read as a whole one. Whole buckets are returned as they are.
 */
function markPartial(row: Record<string, unknown>, grain: TimeGrain, from?: string, to?: string): Record<string, unknown> {
  const start = row[PERIOD_COLUMN];
  if (typeof start !== 'string') return row;
  const end = addDays(nextBucket(start, grain), -1);
  const coveredStart = from !== undefined && from > start ? from : start;
  const coveredEnd = to !== undefined && to < end ? to : end;
  if (coveredStart === start && coveredEnd === end) return row;
  const marked: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) {
    marked[key] = value;
    if (key === PERIOD_COLUMN) {
      Object.assign(marked, { [PARTIAL_COLUMN]: true, [PERIOD_START_COLUMN]: coveredStart, [PERIOD_END_COLUMN]: coveredEnd });
    }
  }
  return marked;
}

/** The engine's order, in code: orderBy (nulls last), then the dimensions and the period, ascending. */
function comparator(
  orderBy: Array<{ field: string; order?: 'asc' | 'desc' }>,
  dimensions: string[],
): (a: Record<string, unknown>, b: Record<string, unknown>) => number {
  const keys = [
    ...orderBy.map((o) => ({ field: o.field, desc: o.order === 'desc' })),
    ...dimensions.map((field) => ({ field, desc: false })),
    { field: PERIOD_COLUMN, desc: false },
  ];
  return (a, b) => {
    for (const { field, desc } of keys) {
      const x = a[field];
      const y = b[field];
      if (x === y) continue;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      const order = (x as number | string) < (y as number | string) ? -1 : 1;
      return desc ? -order : order;
    }
    return 0;
  };
}

function addDays(day: string, days: number): string {
  return isoDay(Date.parse(`${day}T00:00:00Z`) + days * 86_400_000);
}

function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function isTimeGrain(value: unknown): value is TimeGrain {
  return typeof value === 'string' && (TIME_GRAINS as readonly string[]).includes(value);
}

function invalidQuery(message: string): DomainError {
  return new DomainError('invalid_metric_query', message);
}
