import { clampLimit } from '../../common/limits';
import { MAX_GROUP_BY_FIELDS, TIME_GRAINS } from '../../data/data.types';
import { MAX_QUERY_METRICS } from '../../metrics/metric.types';
import type { MetricQuery } from '../../metrics/metric-query.compiler';
import { callerOf, readData, SORT_ORDER_PARAM } from '../data-tools/data-tool.support';
import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import { MetricToolDeps, objectFilterOf } from './metric-tool.support';

export const METRIC_DEFAULT_ROWS = 50;
export const METRIC_MAX_ROWS = 200;

/** query_metric's arguments as the model sends them: a MetricQuery whose limit is not clamped yet. */
export interface QueryMetricArgs extends Omit<MetricQuery, 'limit'> {
  /** Loosely typed on purpose: the tool clamps whatever the model sends. */
  limit?: unknown;
}

export interface QueryMetricResult {
  rows: Record<string, unknown>[];
  /** Present when the row limit was reached: there may be more rows. */
  note?: string;
}

export function createQueryMetricTool(deps: MetricToolDeps): ToolDefinition<QueryMetricArgs> {
  return defineTool<QueryMetricArgs>({
    name: 'query_metric',
    description:
      'Compute one or more metrics from list_metrics, optionally grouped by their dimensions and split into time periods. ' +
      'Each row has one column per metric (named like the metric), one per groupBy dimension and, with timeGrain, "period": ' +
      'the first day of the period (UTC, "YYYY-MM-DD"; weeks start on Monday). A period that from/to cut (e.g. month ' +
      'with from "2026-01-15") also has "partial": true, "periodStart" and "periodEnd": the first and last day it covers ' +
      '(both included); say that such a period is partial. Periods without records inside from/to are included. Where ' +
      'no record counts (no records, or none matching the metric), counts and sums are 0 and averages, minimums and ' +
      'maximums are null: null means there is no such value, not 0. A ratio is null where its denominator is 0. ' +
      'Minimums and maximums of a date or datetime field are dates ("YYYY-MM-DD") or ISO timestamps. ' +
      `Metrics of one object per call; at most ${MAX_QUERY_METRICS}. ` +
      `Returns at most ${METRIC_MAX_ROWS} rows (default ${METRIC_DEFAULT_ROWS}). ` +
      'Example (won revenue and win rate per quarter of 2024 by industry): {"metrics": ["won_revenue", "win_rate"], ' +
      '"groupBy": ["account.industry"], "timeGrain": "quarter", "from": "2024-01-01", "to": "2024-12-31"}.',
    parameters: {
      type: 'object',
      properties: {
        metrics: {
          type: 'array',
          description: 'Metric names from list_metrics, e.g. ["won_revenue"].',
          items: { type: 'string' },
          minItems: 1,
          maxItems: MAX_QUERY_METRICS,
        },
        groupBy: {
          type: 'array',
          description: `Up to ${MAX_GROUP_BY_FIELDS} dimensions every requested metric has (see list_metrics), e.g. ["owner"] or ["account.industry"].`,
          items: { type: 'string' },
          maxItems: MAX_GROUP_BY_FIELDS,
        },
        timeGrain: {
          type: 'string',
          enum: [...TIME_GRAINS],
          description:
            'Split into periods of the metrics\' time field; adds the column "period" (and "partial", "periodStart", ' +
            '"periodEnd" where from/to cut a period).',
        },
        from: { type: 'string', description: 'First day included, "YYYY-MM-DD" (UTC), on the metrics\' time field.' },
        to: { type: 'string', description: 'Last day included, "YYYY-MM-DD" (UTC), on the metrics\' time field.' },
        where: {
          type: 'object',
          description:
            'Filter on dimensions only, in the where language of query_records: e.g. {"owner": "Maya Chen"} or ' +
            '{"account.industry": {"$in": ["software", "retail"]}}. Use from/to for dates.',
          additionalProperties: true,
        },
        orderBy: {
          type: 'array',
          description:
            'Order rows by a metric, a groupBy dimension or "period", e.g. [{"field": "won_revenue", "order": "desc"}].',
          items: {
            type: 'object',
            properties: { field: { type: 'string' }, order: SORT_ORDER_PARAM },
            required: ['field'],
            additionalProperties: false,
          },
          maxItems: 5,
        },
        limit: { description: `Rows to return, 1 to ${METRIC_MAX_ROWS} (whole number). Default ${METRIC_DEFAULT_ROWS}.` },
      },
      required: ['metrics'],
      additionalProperties: false,
    },
    scope: 'agent',
    holds: 'rows',
    citation: 'Each row has a "ref" such as "r2.1": cite a value in your answer as {{ref.column}}, e.g. {{r2.1.won_revenue}}.',
    async execute(args, ctx): Promise<QueryMetricResult> {
      const limit = clampLimit(args.limit, METRIC_DEFAULT_ROWS, METRIC_MAX_ROWS);
      const { rows, truncated } = await readData(deps, ctx, (session) =>
        deps.metrics.query(callerOf(ctx), { ...args, limit }, session, objectFilterOf(ctx)),
      );
      const result: QueryMetricResult = { rows };
      if (truncated) {
        result.note = `Only the first ${limit} rows are shown; there may be more. Narrow from/to, filter, use a coarser timeGrain, or raise limit (max ${METRIC_MAX_ROWS}).`;
      }
      return result;
    },
  });
}
