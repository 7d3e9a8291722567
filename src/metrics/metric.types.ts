import type { AggregateFunction } from '../data/data.types';

export const METRIC_TYPES = ['simple', 'ratio'] as const;
export type MetricType = (typeof METRIC_TYPES)[number];

/** Dimensions one metric may be grouped by. */
export const MAX_METRIC_DIMENSIONS = 30;
export const MAX_METRIC_SYNONYMS = 20;
/** Metrics one query_metric call computes (one statement). */
export const MAX_QUERY_METRICS = 10;
/** Time buckets one query_metric call may span (a year of days, ten years of weeks, ...). */
export const MAX_PERIODS = 1000;

/** What a simple metric computes over its object's records. */
export interface MetricMeasure {
  function: AggregateFunction;
  /** Omitted only for `count` (counts records). */
  field?: string;
}

/** A metric as stored and as the API shows it. */
export interface MetricDefinition {
  name: string;
  label: string;
  description?: string;
  object: string;
  type: MetricType;
  measure?: MetricMeasure;
  /** A where object over the metric's object: the records the measure counts. */
  filter?: Record<string, unknown>;
  /** Ratio only: the metrics divided, both simple metrics of the same object. */
  numerator?: string;
  denominator?: string;
  /** A date or datetime field of the object: what time grains and from/to apply to. */
  timeField?: string;
  /** Fields of the object ("owner") or of the record a lookup points to ("account.industry"). */
  dimensions: string[];
  synonyms: string[];
}
