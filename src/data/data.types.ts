/**
 * What an offset page's total is: `estimate` (the default) counts exactly up to RECORDS_COUNT_CAP
 * and gives the planner's estimate beyond; `exact` counts every match (bounded by the query timeout);
 * `none` counts nothing.
 */
export const TOTAL_MODES = ['estimate', 'exact', 'none'] as const;
export type TotalMode = (typeof TOTAL_MODES)[number];

/** A query over one object's records (`where` in the filter language of where.compiler.ts). */
export interface FindQuery {
  where?: unknown;
  /** `?q=`: records whose searchable fields contain this text, ignoring case and accents (compileSearch). */
  search?: string;
  orderBy?: unknown;
  fields?: unknown;
  /** Already clamped by the caller (records API: 1..1000; tools: 1..200). */
  limit: number;
  offset: number;
  /** Keyset paging: continue after this cursor (a nextCursor of the same query); offset must be 0. */
  cursor?: string;
  /** Also return `nextCursor` (the cursor of the page after this one, null at the end). */
  withCursor?: boolean;
  /** How an offset page counts its total (default `estimate`); a page after a cursor has none. */
  total?: TotalMode;
}

export interface FindResult {
  records: Record<string, unknown>[];
  /** Records matching the filter, all pages; absent on a page after a cursor and with `total: 'none'`. */
  total?: number;
  /** With `total`: whether it is a count (true) or the planner's estimate above RECORDS_COUNT_CAP (false). */
  totalExact?: boolean;
  /** With `withCursor`: the cursor of the next page, null when this page is the last. */
  nextCursor?: string | null;
}

/** One record and its version (records.compiler.ts), which the records API sends as its ETag. */
export interface VersionedRecord {
  record: Record<string, unknown>;
  version: string;
  /** The change set of the write that answered with it (none for a read). */
  changeSetId?: string;
}

export const AGGREGATE_FUNCTIONS = ['count', 'sum', 'avg', 'min', 'max', 'count_distinct'] as const;
export type AggregateFunction = (typeof AGGREGATE_FUNCTIONS)[number];

export interface AggregationSpec {
  function: AggregateFunction;
  /** Omitted only for `count` (count of records). */
  field?: string;
  alias: string;
}

export interface AggregateQuery {
  where?: unknown;
  groupBy?: unknown;
  aggregations: unknown;
  /** `[{ field: <alias or group field>, order }]`: top-N when combined with limit. */
  orderBy?: unknown;
  /** Groups returned, already clamped by the caller. */
  limit: number;
}

/** The most rows one engine call returns, whatever the caller asked for. */
export const MAX_ENGINE_LIMIT = 1000;
export const MAX_GROUP_BY_FIELDS = 3;
export const MAX_AGGREGATIONS = 20;

/** Time buckets of an aggregate (the semantic layer's timeGrain); weeks are ISO weeks, from Monday. */
export const TIME_GRAINS = ['day', 'week', 'month', 'quarter', 'year'] as const;
export type TimeGrain = (typeof TIME_GRAINS)[number];

/**
 * An aggregation with its own filter (`FILTER (WHERE ..)`); `emptyAsZero`: a sum over no rows is 0, not
 * null (counts are 0 anyway; averages, minimums and maximums of no rows are always null).
 */
export interface MeasureSpec extends AggregationSpec {
  filter?: unknown;
  emptyAsZero?: boolean;
}

/** One aggregation divided by another, per group; null when the denominator is 0. */
export interface RatioSpec {
  alias: string;
  numerator: MeasureSpec;
  denominator: MeasureSpec;
}

/** A field of the record that lookup field `lookup` points to (e.g. account.industry), as column `alias`. */
export interface LookupColumn {
  alias: string;
  lookup: string;
  field: string;
}

/** The UTC start of the bucket of `field` ("YYYY-MM-DD"), as column `alias`. */
export interface TimeBucket {
  alias: string;
  field: string;
  grain: TimeGrain;
}

/**
 * A typed aggregate (what the semantic layer compiles a metric query into). `groupBy` names fields of the
 * object, lookup columns' aliases and the time bucket's alias; `where` and `orderBy` may name them too.
 */
export interface AggregatePlan {
  where?: unknown;
  groupBy: string[];
  measures: Array<MeasureSpec | RatioSpec>;
  lookups?: LookupColumn[];
  timeBucket?: TimeBucket;
  orderBy?: unknown;
  /** Groups returned, already clamped by the caller. */
  limit: number;
}
