import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import { callerOf, DataToolDeps, FIELDS_PARAM, OBJECT_NAME_PARAM, readData } from './data-tool.support';

export interface GetRecordArgs {
  objectName: string;
  recordId: string;
  fields?: string[];
}

export function createGetRecordTool(deps: DataToolDeps): ToolDefinition<GetRecordArgs> {
  return defineTool<GetRecordArgs>({
    name: 'get_record',
    description:
      'Get one record by its id, with all fields or the ones you name. Use it to follow a lookup field ' +
      '(its value is the id of a record of the referenced object, see describe_object) or to show a record in full. ' +
      'Returns the record, or a not-found error when no record has that id.',
    parameters: {
      type: 'object',
      properties: {
        objectName: OBJECT_NAME_PARAM,
        recordId: { type: 'string', description: 'The record id (a UUID), e.g. from query_records or a lookup field.' },
        fields: FIELDS_PARAM,
      },
      required: ['objectName', 'recordId'],
      additionalProperties: false,
    },
    scope: 'agent',
    holds: 'rows',
    citation: 'The record has a "ref" such as "r3.1": cite a value in your answer as {{ref.column}}, e.g. {{r3.1.amount}}.',
    async execute(args, ctx): Promise<Record<string, unknown>> {
      return readData(deps, ctx, (session) =>
        deps.data.findOne(callerOf(ctx), args.objectName, args.recordId, args.fields, { session }),
      );
    },
  });
}
