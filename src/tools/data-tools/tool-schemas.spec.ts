import type { DataService } from '../../data/data.service';
import type { DataPool } from '../../database/data-pool';
import type { Caller } from '../../auth/caller';
import type { AccessService } from '../../governance/access.service';
import { CallerAccess } from '../../governance/caller-access';
import type { MetadataService } from '../../metadata/metadata.service';
import type { HistoryService } from '../../history/history.service';
import type { ViewService } from '../../views/view.service';
import { createAskUserTool } from '../ask-user.tool';
import { offeredDescription } from '../tool.define';
import { ToolRegistry } from '../tool.registry';
import { createDataTools, DATA_TOOL_NAMES } from './index';

const CALLER: Caller = { keyId: 'k', role: 'member', subject: 's', owner: 's' };

/**
 * What the model sees of every data tool. A change here changes the model's behaviour: the
 * snapshot makes it show up in review.
 */
describe('data tool schemas', () => {
  const tools = createDataTools({
    data: {} as DataService,
    metadata: {} as MetadataService,
    pool: {} as DataPool,
    access: {} as AccessService,
    views: {} as ViewService,
    history: {} as HistoryService,
  });

  it('offers the five data tools to agents', () => {
    expect(tools.map((t) => t.name)).toEqual([...DATA_TOOL_NAMES]);
    for (const tool of tools) expect({ name: tool.name, scope: tool.scope }).toEqual({ name: tool.name, scope: 'agent' });
  });

  it.each([['query_records'], ['get_record'], ['aggregate_data']])(
    '%s writes nothing: the engine runs only on a reader session (SELECT-only role, read-only)',
    async (name) => {
      // The engine itself is stopped before any SQL.
      const reader = { inTransaction: false, query: () => Promise.reject(new Error('no SQL expected here')) };
      const sessions: unknown[] = [];
      const pool = {
        readerSession: (options: unknown) => {
          sessions.push(options);
          return reader;
        },
        session: () => {
          throw new Error('a record tool must not run on a read-write session');
        },
        transaction: () => {
          throw new Error('a record tool must not run in a read-write transaction');
        },
      };
      const stop = new Error('stop here');
      const usedScopes: unknown[] = [];
      // Every engine call records the scope it was given, then ends the call.
      const engine = new Proxy(
        {},
        {
          get:
            () =>
            (...args: unknown[]) => {
              usedScopes.push(args.at(-1));
              return Promise.reject(stop);
            },
        },
      );
      const [tool] = createDataTools({
        data: engine as DataService,
        metadata: engine as MetadataService,
        pool: pool as unknown as DataPool,
        access: engine as AccessService,
        views: engine as ViewService,
        history: {} as HistoryService,
      }).filter((t) => t.name === name);
      const signal = new AbortController().signal;
      const args = {
        objectName: 'deal',
        recordId: '00000000-0000-4000-8000-000000000000',
        aggregations: [{ function: 'count', alias: 'n' }],
      };
      await expect(tool.execute(args as never, { signal, caller: CALLER })).rejects.toBe(stop);
      // As the caller's key, which holds at most its share of the reader pool.
      expect(sessions).toEqual([{ signal, key: CALLER.keyId }]);
      expect(usedScopes).toEqual([{ session: reader }]);
    },
  );

  it.each([['list_objects'], ['describe_object']])('%s reads definitions only, never the data pool', async (name) => {
    const pool = new Proxy(
      {},
      {
        get: () => () => {
          throw new Error('the data pool was used');
        },
      },
    );
    const deal = { name: 'deal', label: 'Deal', description: null, fields: [] };
    const metadata = {
      listObjects: () => Promise.resolve([{ ...deal, fieldCount: 0 }]),
      getObject: () => Promise.resolve(deal),
    };
    const [tool] = createDataTools({
      data: {} as DataService,
      metadata: metadata as unknown as MetadataService,
      pool: pool as DataPool,
      views: {} as ViewService,
      history: {} as HistoryService,
      access: {
        forCaller: () => Promise.resolve(CallerAccess.unrestricted()),
        describe: () => metadata.getObject(),
        visibleObjects: () => metadata.listObjects(),
      } as unknown as AccessService,
    }).filter((t) => t.name === name);
    await expect(
      tool.execute({ objectName: 'deal' } as never, { caller: CALLER, signal: new AbortController().signal }),
    ).resolves.toBeDefined();
  });

  it('compiles every schema with ajv', () => {
    const registry = new ToolRegistry();
    for (const tool of tools) registry.register(tool);
    expect(registry.list({ scope: 'agent' })).toHaveLength(DATA_TOOL_NAMES.length);
  });

  it.each(DATA_TOOL_NAMES.map((name) => [name]))('%s: name, description and parameters', (name) => {
    const tool = tools.find((t) => t.name === name)!;
    // As an agent's model reads it: the description, then how to cite the tool's results.
    expect({ name: tool.name, description: offeredDescription(tool), parameters: tool.parameters }).toMatchSnapshot();
  });

  it('ask_user: name, description and parameters (hidden from listings, paused on in durable chats)', () => {
    const tool = createAskUserTool();
    expect(tool.scope).toBe('platform');
    expect({ name: tool.name, description: tool.description, parameters: tool.parameters }).toMatchSnapshot();
  });
});
