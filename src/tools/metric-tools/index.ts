import type { ToolDefinition } from '../tool.types';
import { createListMetricsTool } from './list-metrics.tool';
import type { MetricToolDeps } from './metric-tool.support';
import { createQueryMetricTool } from './query-metric.tool';

export type { MetricToolDeps } from './metric-tool.support';

/** The semantic layer's tools, offered after the data tools. */
export const METRIC_TOOL_NAMES = ['list_metrics', 'query_metric'] as const;

export function createMetricTools(deps: MetricToolDeps): ToolDefinition<never>[] {
  return [createListMetricsTool(deps), createQueryMetricTool(deps)];
}
