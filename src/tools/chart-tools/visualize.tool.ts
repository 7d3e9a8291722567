import { DomainError } from '../../common/domain-error';
import { defineTool } from '../tool.define';
import { DEFAULT_OUTPUT_CAP_BYTES } from '../tool.middlewares';
import type { ToolDefinition } from '../tool.types';
import { buildChart, CHART_TYPES, rowsOf, type ChartRequest, type VegaLiteSpec } from './chart-spec';

export const VISUALIZE_TOOL = 'visualize';

export interface VisualizeArgs extends ChartRequest {
  source: string;
}

export interface VisualizeResult {
  /** Vega-Lite (v6); its data are the source's rows, inline. */
  spec: VegaLiteSpec;
  /** The tool call whose result the chart draws. */
  source: string;
  /** How many rows it draws. */
  rows: number;
}

/** Whether a tool result is a chart: what the `data-chart` parts and the SVG route read. */
export function chartSpecOf(toolName: string, output: unknown): VegaLiteSpec | undefined {
  if (toolName !== VISUALIZE_TOOL || typeof output !== 'object' || output === null) return undefined;
  const spec = (output as Partial<VisualizeResult>).spec;
  return typeof spec === 'object' && spec !== null && !Array.isArray(spec) ? spec : undefined;
}

/**
 * A chart of an earlier data result of the turn. The model names the result by its call id and
 * never sends data: the rows come from the stored result, so a chart cannot show a number the data
 * tools did not return. Platform scope: it needs a chat turn's results, so it is not listed (nor
 * offered over MCP); agents name it.
 */
export function createVisualizeTool(): ToolDefinition<VisualizeArgs> {
  return defineTool<VisualizeArgs>({
    name: VISUALIZE_TOOL,
    description:
      'Draw a chart of the rows an earlier data tool call of this turn returned (query_records, get_record, aggregate_data, ' +
      'query_metric or calculate): pass its tool call id as source; the data come from that result, never from you. ' +
      'Without type the shape decides: dates on x give a line; one category with up to 20 values a bar chart sorted by the ' +
      'value (a pie for counts or sums of up to 6 groups); two numeric columns a scatter plot; otherwise a table. ' +
      'x, y, series name columns of those rows exactly as the result has them (y: numeric columns only). ' +
      'Returns { spec (Vega-Lite), source, rows }; the user sees the chart. Still state the key figures in your answer. ' +
      'Example: {"source": "call_abc", "type": "bar", "x": "stage", "y": ["total_amount"]}.',
    parameters: {
      type: 'object',
      properties: {
        source: {
          type: 'string',
          minLength: 1,
          maxLength: 200,
          description: 'The tool call id of an earlier successful data call of this turn.',
        },
        type: { type: 'string', enum: [...CHART_TYPES], description: 'The chart; omit to let the rows decide.' },
        x: { type: 'string', minLength: 1, maxLength: 200, description: 'Column for the x axis (a category or a date).' },
        y: {
          type: 'array',
          items: { type: 'string', minLength: 1, maxLength: 200 },
          minItems: 1,
          maxItems: 10,
          description: 'Numeric columns to draw; omit for every numeric column.',
        },
        series: {
          type: 'string',
          minLength: 1,
          maxLength: 200,
          description: 'Column whose values split lines or bars by colour.',
        },
        title: {
          type: 'string',
          minLength: 1,
          maxLength: 200,
          description: 'The chart title; omit for one made from the labels.',
        },
      },
      required: ['source'],
      additionalProperties: false,
    },
    scope: 'platform',
    holds: 'chart',
    readsTurnResults: true,
    async execute(args, ctx): Promise<VisualizeResult> {
      const result = ctx.evidence ? await ctx.evidence.dataResult(args.source) : undefined;
      if (!result) {
        throw new DomainError(
          'unknown_chart_source',
          `No earlier successful data result of this turn has the tool call id "${args.source.slice(0, 200)}". ` +
            'Call a data tool first (query_records, get_record, aggregate_data, query_metric, calculate), then pass its id.',
          { source: args.source.slice(0, 200) },
        );
      }
      const { source, ...request } = args;
      const chart: VisualizeResult = { spec: buildChart(result, request), source, rows: rowsOf(result).length };
      // Past the output cap the result would be cut to a preview: no chart at all. Better a clear error.
      if (Buffer.byteLength(JSON.stringify(chart)) > DEFAULT_OUTPUT_CAP_BYTES) {
        throw new DomainError(
          'invalid_chart',
          `The chart of ${source} would exceed the ${DEFAULT_OUTPUT_CAP_BYTES / 1024} KB tool output limit. ` +
            'Fetch fewer rows, or only the fields to chart, and chart that result.',
        );
      }
      return chart;
    },
  });
}
