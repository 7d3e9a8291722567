import { clampLimit, clampOffset } from '../../common/limits';
import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import {
  callerOf,
  DataToolDeps,
  FIELDS_PARAM,
  OBJECT_NAME_PARAM,
  readData,
  SORT_ORDER_PARAM,
  VIEW_PARAM,
  WHERE_PARAM,
  withView,
} from './data-tool.support';

export const QUERY_DEFAULT_LIMIT = 20;
export const QUERY_MAX_LIMIT = 200;

export interface QueryRecordsArgs {
  objectName: string;
  view?: string;
  where?: Record<string, unknown>;
  fields?: string[];
  orderBy?: Array<{ field: string; order?: 'asc' | 'desc' }>;
  /** Loosely typed on purpose: the tool clamps whatever the model sends. */
  limit?: unknown;
  offset?: unknown;
}

export interface QueryRecordsResult {
  /** Records in this page. */
  count: number;
  /** Records matching `where` in total: exact up to RECORDS_COUNT_CAP, else the planner's estimate. */
  total: number;
  /** false when `total` is an estimate. */
  totalExact: boolean;
  hasMore: boolean;
  records: Record<string, unknown>[];
}

export function createQueryRecordsTool(deps: DataToolDeps): ToolDefinition<QueryRecordsArgs> {
  return defineTool<QueryRecordsArgs>({
    name: 'query_records',
    description:
      'Find records of one object with optional filters, field selection, sorting and paging. ' +
      'Call describe_object first to learn the field names and select options. ' +
      `Returns { count, total, totalExact, hasMore, records }: total is the number of matching records, at most ${QUERY_MAX_LIMIT} records per call ` +
      `(default ${QUERY_DEFAULT_LIMIT}); page with offset while hasMore is true. ` +
      'When totalExact is false, total is only the database\'s estimate of a large number: say "about", or count with aggregate_data. ' +
      'To count, sum or average, use aggregate_data instead of fetching records. ' +
      "With view, the saved view's filter, sort and fields apply (your where is ANDed; your orderBy and fields win). " +
      'Example: {"objectName": "deal", "where": {"stage": "won", "amount": {"$gt": 50000}}, ' +
      '"fields": ["name", "amount", "close_date"], "orderBy": [{"field": "amount", "order": "desc"}], "limit": 10}.',
    parameters: {
      type: 'object',
      properties: {
        objectName: OBJECT_NAME_PARAM,
        view: VIEW_PARAM,
        where: WHERE_PARAM,
        fields: FIELDS_PARAM,
        orderBy: {
          type: 'array',
          description: 'Sort order, e.g. [{"field": "amount", "order": "desc"}]. Empty values sort last.',
          items: {
            type: 'object',
            properties: { field: { type: 'string', description: 'Field name.' }, order: SORT_ORDER_PARAM },
            required: ['field'],
            additionalProperties: false,
          },
          maxItems: 5,
        },
        limit: { description: `Records to return, 1 to ${QUERY_MAX_LIMIT} (whole number). Default ${QUERY_DEFAULT_LIMIT}.` },
        offset: { description: 'Records to skip, for paging (whole number). Default 0.' },
      },
      required: ['objectName'],
      additionalProperties: false,
    },
    scope: 'agent',
    holds: 'rows',
    citation: 'Each record has a "ref" such as "r1.2": cite a value in your answer as {{ref.column}}, e.g. {{r1.2.amount}}.',
    async execute(args, ctx): Promise<QueryRecordsResult> {
      const limit = clampLimit(args.limit, QUERY_DEFAULT_LIMIT, QUERY_MAX_LIMIT);
      const offset = clampOffset(args.offset);
      const query = await withView(deps, ctx, args.objectName, args.view, {
        where: args.where,
        fields: args.fields,
        orderBy: args.orderBy,
      });
      // withCursor reads one row more: whether more follow, even when total is an estimate.
      const {
        records,
        total = 0,
        totalExact = true,
        nextCursor,
      } = await readData(deps, ctx, (session) =>
        deps.data.find(callerOf(ctx), args.objectName, { ...query, limit, offset, withCursor: true }, { session }),
      );
      return { count: records.length, total, totalExact, hasMore: nextCursor != null, records };
    },
  });
}
