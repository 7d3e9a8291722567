import { clampLimit } from '../../common/limits';
import { AGGREGATE_FUNCTIONS, MAX_AGGREGATIONS, MAX_GROUP_BY_FIELDS } from '../../data/data.types';
import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import {
  callerOf,
  DataToolDeps,
  OBJECT_NAME_PARAM,
  readData,
  SORT_ORDER_PARAM,
  VIEW_PARAM,
  WHERE_PARAM,
  withView,
} from './data-tool.support';

export const AGGREGATE_DEFAULT_GROUPS = 50;
export const AGGREGATE_MAX_GROUPS = 200;

export interface AggregateDataArgs {
  objectName: string;
  aggregations: Array<{ function: string; field?: string; alias: string }>;
  groupBy?: string[];
  view?: string;
  where?: Record<string, unknown>;
  orderBy?: Array<{ field: string; order?: 'asc' | 'desc' }>;
  /** Loosely typed on purpose: the tool clamps whatever the model sends. */
  limit?: unknown;
}

export interface AggregateDataResult {
  /** Rows (groups) returned. */
  count: number;
  rows: Record<string, unknown>[];
  /** Present when the group limit was reached: there may be more groups. */
  note?: string;
}

export function createAggregateDataTool(deps: DataToolDeps): ToolDefinition<AggregateDataArgs> {
  return defineTool<AggregateDataArgs>({
    name: 'aggregate_data',
    description:
      'Compute counts, sums, averages, minimums and maximums over the records of one object, optionally filtered and grouped. ' +
      'Use this instead of query_records whenever the answer is a number or a ranking: it scans every matching record, not one page. ' +
      `Functions: ${AGGREGATE_FUNCTIONS.join(', ')}; sum and avg need a numeric field (number, currency, percent, integer); ` +
      'count without a field counts records, count_distinct counts different values of a field. Group by up to 3 fields; each row holds the group-by values and one value per alias. ' +
      'Over no matching records (or no values) counts are 0 and sum, avg, min and max are null: no such value, not 0. ' +
      `Returns at most ${AGGREGATE_MAX_GROUPS} groups (default ${AGGREGATE_DEFAULT_GROUPS}). ` +
      'For a top N, order by an alias and set limit. ' +
      "With view, only the saved view's records count (its filter, ANDed with your where). " +
      'Example (top 5 owners by won revenue): {"objectName": "deal", "where": {"stage": "won"}, "groupBy": ["owner"], ' +
      '"aggregations": [{"function": "sum", "field": "amount", "alias": "revenue"}, {"function": "count", "alias": "deals"}], ' +
      '"orderBy": [{"field": "revenue", "order": "desc"}], "limit": 5}.',
    parameters: {
      type: 'object',
      properties: {
        objectName: OBJECT_NAME_PARAM,
        aggregations: {
          type: 'array',
          description: 'What to compute, e.g. [{"function": "avg", "field": "amount", "alias": "avg_amount"}].',
          minItems: 1,
          maxItems: MAX_AGGREGATIONS,
          items: {
            type: 'object',
            properties: {
              function: { type: 'string', enum: [...AGGREGATE_FUNCTIONS] },
              field: { type: 'string', description: 'Field to aggregate; omit only for count (counts records).' },
              alias: {
                type: 'string',
                description:
                  'Name of the result column: lowercase letters, digits and _, starting with a letter, e.g. "total_amount".',
              },
            },
            required: ['function', 'alias'],
            additionalProperties: false,
          },
        },
        groupBy: {
          type: 'array',
          description: `Up to ${MAX_GROUP_BY_FIELDS} field names to group by, e.g. ["stage"]. Omit for one row over all matching records.`,
          items: { type: 'string' },
          maxItems: MAX_GROUP_BY_FIELDS,
        },
        view: VIEW_PARAM,
        where: WHERE_PARAM,
        orderBy: {
          type: 'array',
          description:
            'Order groups by an aggregation alias or a group-by field, e.g. [{"field": "total_amount", "order": "desc"}].',
          items: {
            type: 'object',
            properties: { field: { type: 'string', description: 'An alias or a group-by field.' }, order: SORT_ORDER_PARAM },
            required: ['field'],
            additionalProperties: false,
          },
          maxItems: 5,
        },
        limit: {
          description: `Groups to return, 1 to ${AGGREGATE_MAX_GROUPS} (whole number). Default ${AGGREGATE_DEFAULT_GROUPS}.`,
        },
      },
      required: ['objectName', 'aggregations'],
      additionalProperties: false,
    },
    scope: 'agent',
    holds: 'rows',
    citation: 'Each row has a "ref" such as "r2.1": cite a value in your answer as {{ref.column}}, e.g. {{r2.1.revenue}}.',
    async execute(args, ctx): Promise<AggregateDataResult> {
      const limit = clampLimit(args.limit, AGGREGATE_DEFAULT_GROUPS, AGGREGATE_MAX_GROUPS);
      const { where } = await withView(deps, ctx, args.objectName, args.view, { where: args.where });
      const rows = await readData(deps, ctx, (session) =>
        deps.data.aggregate(
          callerOf(ctx),
          args.objectName,
          { where, groupBy: args.groupBy, aggregations: args.aggregations, orderBy: args.orderBy, limit },
          { session },
        ),
      );
      const result: AggregateDataResult = { count: rows.length, rows };
      if (rows.length === limit && args.groupBy?.length) {
        result.note = `Only the first ${limit} groups are shown; there may be more. Add filters, order by an alias for a top ${limit}, or raise limit (max ${AGGREGATE_MAX_GROUPS}).`;
      }
      return result;
    },
  });
}
