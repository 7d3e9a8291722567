import type { DataService } from '../data/data.service';
import type { ChangeSetService } from '../history/change-sets.service';
import type { AccessService } from '../governance/access.service';
import { ToolRegistry } from '../tools/tool.registry';
import type { ApprovalTokens } from './approval-tokens';
import { createWriteTools, WRITE_TOOL_NAMES } from './write-tools';

/** What the model sees of the write tools: a change here changes its behaviour, so it shows up in review. */
describe('write tool schemas', () => {
  const data = {
    findOneVersioned: () => Promise.reject(new Error('no read expected here')),
    find: () => Promise.reject(new Error('no read expected here')),
  };
  const tools = createWriteTools({
    data: data as unknown as DataService,
    changeSets: {} as ChangeSetService,
    access: { view: () => Promise.reject(new Error('no access check expected here')) } as unknown as AccessService,
    tokens: {} as ApprovalTokens,
    ttlSeconds: 900,
  });

  it('are platform tools that need an approval: never listed, offered only where a turn can wait for one', () => {
    expect(tools.map((t) => ({ name: t.name, scope: t.scope, needsApproval: t.needsApproval }))).toEqual(
      WRITE_TOOL_NAMES.map((name) => ({ name, scope: 'platform', needsApproval: true })),
    );
  });

  it.each(WRITE_TOOL_NAMES.map((name) => [name]))('%s: name, description and parameters', (name) => {
    const tool = tools.find((t) => t.name === name)!;
    expect({ name: tool.name, description: tool.description, parameters: tool.parameters }).toMatchSnapshot();
  });

  it('proposes nothing outside a durable chat, nor for an agent without the write in its writes', async () => {
    const registry = new ToolRegistry();
    for (const tool of tools) registry.register(tool);
    const signal = new AbortController().signal;
    const caller = { keyId: 'k', role: 'member' as const, subject: 's', owner: 's' };
    const args = { objectName: 'deal', recordId: 'x', values: { stage: 'won' } };
    const direct = await registry.execute({ id: 'c1', name: 'update_record', arguments: args }, { caller, signal });
    expect(direct.content).toMatchObject({ error: { code: 'tool_not_allowed' } });
    const agent = { name: 'a', tools: ['update_record'], allowedObjects: ['*'], writes: { deal: ['create'] } };
    const refused = await registry.execute(
      { id: 'c2', name: 'update_record', arguments: args },
      {
        caller,
        signal,
        agent,
        chatId: '00000000-0000-4000-8000-000000000000',
        approvalScope: '00000000-0000-4000-8000-000000000000',
      },
    );
    expect(refused.content).toMatchObject({ error: { code: 'write_not_allowed' } });
  });
});
