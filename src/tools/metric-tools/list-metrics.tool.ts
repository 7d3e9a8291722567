import { TIME_GRAINS, type TimeGrain } from '../../data/data.types';
import type { MetricDefinition } from '../../metrics/metric.types';
import { callerOf, shapeErrors } from '../data-tools/data-tool.support';
import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import { MetricToolDeps, objectFilterOf } from './metric-tool.support';

/** A metric as the model reads it: its definition and the time grains it can be bucketed by. */
export interface MetricListItem extends MetricDefinition {
  /** Empty when the metric has no time field. */
  timeGrains: TimeGrain[];
}

export interface ListMetricsResult {
  metrics: MetricListItem[];
}

export function createListMetricsTool(deps: MetricToolDeps): ToolDefinition<Record<string, never>> {
  return defineTool<Record<string, never>>({
    name: 'list_metrics',
    description:
      'List the business metrics defined by the admins (e.g. revenue, win rate, pipeline value): name, description, the ' +
      'object they measure, the dimensions they can be grouped and filtered by, their time grains and synonyms. ' +
      'Metrics are the trusted definitions of these figures: when a question asks for one of them (or a synonym), ' +
      'answer it with query_metric instead of composing filters and aggregations yourself.',
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    scope: 'agent',
    async execute(_args, ctx): Promise<ListMetricsResult> {
      const metrics = await shapeErrors(ctx, () => deps.metrics.listFor(callerOf(ctx), objectFilterOf(ctx)));
      return {
        metrics: metrics.map((m) => ({
          name: m.name,
          label: m.label,
          ...(m.description !== undefined && { description: m.description }),
          object: m.object,
          type: m.type,
          ...(m.measure && { measure: m.measure }),
          ...(m.filter && { filter: m.filter }),
          ...(m.numerator && { numerator: m.numerator, denominator: m.denominator }),
          dimensions: m.dimensions,
          ...(m.timeField && { timeField: m.timeField }),
          timeGrains: m.timeField ? [...TIME_GRAINS] : [],
          synonyms: m.synonyms,
        })),
      };
    },
  });
}
