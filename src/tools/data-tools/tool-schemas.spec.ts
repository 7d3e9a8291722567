import type { EntityManager } from '@mikro-orm/postgresql';
import type { DataService } from '../../data/data.service';
import type { MetadataService } from '../../metadata/metadata.service';
import { createAskUserTool } from '../ask-user.tool';
import { ToolRegistry } from '../tool.registry';
import { createDataTools, DATA_TOOL_NAMES } from './index';

/**
 * What the model sees of every data tool. A change here changes the model's behaviour: the
 * snapshot makes it show up in review.
 */
describe('data tool schemas', () => {
  const tools = createDataTools({
    data: {} as DataService,
    metadata: {} as MetadataService,
    em: {} as EntityManager,
    statementTimeoutMs: 5000,
  });

  it('offers the five data tools to agents, none of them writing', () => {
    expect(tools.map((t) => t.name)).toEqual([...DATA_TOOL_NAMES]);
    for (const tool of tools) expect({ name: tool.name, scope: tool.scope, mutatesState: tool.mutatesState }).toEqual({ name: tool.name, scope: 'agent', mutatesState: false });
  });

  it('compiles every schema with ajv', () => {
    const registry = new ToolRegistry();
    for (const tool of tools) registry.register(tool);
    expect(registry.list({ scope: 'agent' })).toHaveLength(5);
  });

  it.each(DATA_TOOL_NAMES.map((name) => [name]))('%s: name, description and parameters', (name) => {
    const tool = tools.find((t) => t.name === name)!;
    expect({ name: tool.name, description: tool.description, parameters: tool.parameters }).toMatchSnapshot();
  });

  it('ask_user: name, description and parameters (hidden from listings, paused on in durable chats)', () => {
    const tool = createAskUserTool();
    expect(tool.scope).toBe('platform');
    expect({ name: tool.name, description: tool.description, parameters: tool.parameters }).toMatchSnapshot();
  });
});
