import { defineTool } from '../tool.define';
import { mayUseObject } from '../tool.middlewares';
import type { ToolDefinition } from '../tool.types';
import { accessOf, DataToolDeps, shapeErrors } from './data-tool.support';

export interface ObjectListItem {
  name: string;
  label: string;
  description: string | null;
  fieldCount: number;
}

export interface ListObjectsResult {
  objects: ObjectListItem[];
  totalCount: number;
}

export function createListObjectsTool(deps: DataToolDeps): ToolDefinition<Record<string, never>> {
  return defineTool<Record<string, never>>({
    name: 'list_objects',
    description:
      'List the business objects (tables) you can query, such as accounts or deals: name, label, description and number of fields. ' +
      'Call this first when you do not know which object holds the data, then describe_object to learn its fields.',
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    scope: 'agent',
    async execute(_args, ctx): Promise<ListObjectsResult> {
      const access = await accessOf(deps, ctx);
      const agent = ctx.agent;
      // Hidden fields are not counted: the count is what describe_object will show.
      const visible = await shapeErrors(ctx, () =>
        deps.access.visibleObjects(access, (name) => !agent || mayUseObject(agent.allowedObjects, name)),
      );
      const objects = visible.map((o) => ({
        name: o.name,
        label: o.label,
        description: o.description,
        fieldCount: o.fieldCount,
      }));
      return { objects, totalCount: objects.length };
    },
  });
}
