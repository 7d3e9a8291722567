import type { ToolDefinition } from '../tool.types';
import { createAggregateDataTool } from './aggregate-data.tool';
import type { DataToolDeps } from './data-tool.support';
import { createDescribeObjectTool } from './describe-object.tool';
import { createGetRecordTool } from './get-record.tool';
import { createListObjectsTool } from './list-objects.tool';
import { createQueryRecordsTool } from './query-records.tool';
import { createRecordHistoryTool } from './record-history.tool';

export type { DataToolDeps } from './data-tool.support';

/** The built-in data tools, in the order they are offered. */
export const DATA_TOOL_NAMES = [
  'list_objects',
  'describe_object',
  'query_records',
  'get_record',
  'aggregate_data',
  'record_history',
] as const;

export function createDataTools(deps: DataToolDeps): ToolDefinition<never>[] {
  return [
    createListObjectsTool(deps),
    createDescribeObjectTool(deps),
    createQueryRecordsTool(deps),
    createGetRecordTool(deps),
    createAggregateDataTool(deps),
    createRecordHistoryTool(deps),
  ];
}
