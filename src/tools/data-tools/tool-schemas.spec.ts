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

  it('offers the five data tools to agents', () => {
    expect(tools.map((t) => t.name)).toEqual([...DATA_TOOL_NAMES]);
    for (const tool of tools) expect({ name: tool.name, scope: tool.scope }).toEqual({ name: tool.name, scope: 'agent' });
  });

  it.each(DATA_TOOL_NAMES.map((name) => [name]))(
    '%s writes nothing: the engine runs only inside a READ ONLY transaction',
    async (name) => {
      const statements: string[] = [];
      const tx = {
        getKysely: () => ({
          executeQuery: (query: { sql: string }) => (statements.push(query.sql), Promise.resolve({ rows: [] })),
        }),
      };
      const stop = new Error('stop here');
      const usedEm: unknown[] = [];
      // Every engine call records the EntityManager it was given, then ends the call.
      const engine = new Proxy(
        {},
        {
          get:
            () =>
            (...args: unknown[]) => {
              usedEm.push(args.at(-1));
              return Promise.reject(stop);
            },
        },
      );
      const [tool] = createDataTools({
        data: engine as DataService,
        metadata: engine as MetadataService,
        em: {
          fork: () => ({ transactional: async (work: (em: unknown) => Promise<unknown>) => work(tx) }),
        } as unknown as EntityManager,
        statementTimeoutMs: 5000,
      }).filter((t) => t.name === name);
      const args = {
        objectName: 'deal',
        recordId: '00000000-0000-4000-8000-000000000000',
        aggregations: [{ function: 'count', alias: 'n' }],
      };
      await expect(tool.execute(args as never, { signal: new AbortController().signal })).rejects.toBe(stop);
      expect(statements[0]).toBe('SET TRANSACTION READ ONLY');
      expect(usedEm).toEqual([tx]);
    },
  );

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
