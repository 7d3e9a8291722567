import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import { callerOf, DataToolDeps, OBJECT_NAME_PARAM, readData } from './data-tool.support';

export interface RecordHistoryArgs {
  objectName: string;
  recordId: string;
  field?: string;
  limit?: number;
}

/** Versions one call reads at most. */
const MAX_VERSIONS = 50;

export function createRecordHistoryTool(deps: DataToolDeps): ToolDefinition<RecordHistoryArgs> {
  return defineTool<RecordHistoryArgs>({
    name: 'record_history',
    description:
      'The change history of one record, newest first: who changed it (actor: self = the user you act for, other = ' +
      'another user or key, system = the server), when (at), how (via: api, batch, import, approval = an approved ' +
      'agent write, revert, restore), and each field it changed from before to after. One row per changed field of ' +
      'each version; a create lists the values it set, a delete the values it removed. Use it for questions such as ' +
      '"who changed the amount of the Acme deal, and when?" (find the record with query_records first, then pass ' +
      'field to keep only the versions that changed it). Fields the user may not see are never shown.',
    parameters: {
      type: 'object',
      properties: {
        objectName: OBJECT_NAME_PARAM,
        recordId: { type: 'string', description: 'The record id (a UUID), e.g. from query_records.' },
        field: { type: 'string', maxLength: 63, description: 'Only the versions that changed this field.' },
        limit: {
          type: 'integer',
          minimum: 1,
          maximum: MAX_VERSIONS,
          description: `Versions to read (default 10, at most ${MAX_VERSIONS}).`,
        },
      },
      required: ['objectName', 'recordId'],
      additionalProperties: false,
    },
    scope: 'agent',
    holds: 'rows',
    citation:
      'Each row has a "ref" such as "r3.2": cite a value as {{ref.column}}, e.g. {{r3.2.before}} and {{r3.2.after}}, ' +
      'and the time of the change as {{r3.2.at}}.',
    async execute(args, ctx): Promise<Record<string, unknown>> {
      const history = await readData(deps, ctx, (session) =>
        deps.history.versions(
          callerOf(ctx),
          args.objectName,
          args.recordId,
          { limit: Math.min(args.limit ?? 10, MAX_VERSIONS), field: args.field },
          { session },
        ),
      );
      const rows = history.versions.flatMap((version): Array<Record<string, unknown>> => {
        const base = { version: version.version, at: version.at, op: version.op, actor: version.actor, via: version.via };
        const fields = Object.entries(version.changes);
        if (!fields.length) return [{ ...base, field: null, before: null, after: null }];
        return fields
          .filter(([name]) => args.field === undefined || name === args.field)
          .map(([field, change]) => ({ ...base, field, before: change.before, after: change.after }));
      });
      return { objectName: args.objectName, recordId: args.recordId, rows, moreVersions: history.nextCursor !== null };
    },
  });
}
