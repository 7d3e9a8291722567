import type { AgentSpec } from '../agents/agent.types';
import type { ObjectSummary } from '../metadata/metadata.repository';
import { toOpenAiTool } from '../tools/tool.define';
import type { ToolDefinition } from '../tools/tool.types';
import {
  MAX_INSTRUCTIONS_CHARS,
  MCP_FIGURES_NOTE,
  objectNameOf,
  serverInstructions,
  toCallToolResult,
  toMcpTool,
  toPromptResult,
} from './mcp.mapper';

const DATA_TOOLS = ['list_objects', 'describe_object', 'query_records', 'get_record', 'aggregate_data'];

function object(name: string, description: string | null = null): ObjectSummary {
  return { name, label: name.toUpperCase(), description, fieldCount: 3 };
}

describe('serverInstructions', () => {
  it('names every object with its label and description, and the tools to read them', () => {
    const text = serverInstructions([object('account', 'Companies we sell to'), object('deal')], DATA_TOOLS);
    expect(text).toContain('- account (ACCOUNT): Companies we sell to');
    expect(text).toContain('- deal (DEAL)');
    expect(text).toContain('list_objects, describe_object, query_records, get_record, aggregate_data');
    expect(text).toContain('object://<name>');
  });

  it('stays within MAX_INSTRUCTIONS_CHARS however many objects there are, and counts those left out', () => {
    const many = Array.from({ length: 500 }, (_, i) =>
      object(`object_${i}`, `A description that goes on ${'and on '.repeat(40)}`),
    );
    const text = serverInstructions(many, DATA_TOOLS);
    expect(text.length).toBeLessThanOrEqual(MAX_INSTRUCTIONS_CHARS);
    const listed = text.split('\n').filter((line) => line.startsWith('- object_')).length;
    expect(listed).toBeGreaterThan(10);
    expect(text).toContain(`- ... and ${500 - listed} more: call list_objects.`);
    // Each description is cut short with an ellipsis.
    expect(text.split('\n').find((line) => line.startsWith('- object_0 '))).toMatch(/\.\.\.$/);
  });

  it('speaks of the agent, and of aggregate_data only when the agent has it', () => {
    const agent = { name: 'deal_desk', label: 'Deal desk', description: 'Deals only.' } as AgentSpec;
    const text = serverInstructions([object('deal')], ['query_records'], agent);
    expect(text).toContain('Agent "Deal desk" (deal_desk): Deals only. Its instructions are the prompt "deal_desk".');
    expect(text).not.toContain('aggregate_data');
    expect(text).not.toContain('describe_object');
  });

  it('says so when there are no objects', () => {
    expect(serverInstructions([], DATA_TOOLS)).toContain('No objects are defined yet.');
  });
});

describe('objectNameOf', () => {
  it.each([
    ['object://deal', 'deal'],
    ['object://sales_order_2', 'sales_order_2'],
    ['object://Deal', undefined],
    ['object://deal/fields', undefined],
    ['object://', undefined],
    ['objects://deal', undefined],
    ['file:///etc/passwd', undefined],
    [`object://${'a'.repeat(64)}`, undefined],
  ])('reads %s as %s', (uri, name) => {
    expect(objectNameOf(uri)).toBe(name);
  });
});

describe('toCallToolResult', () => {
  it('gives an object as structured content and as its JSON text', () => {
    expect(toCallToolResult({ count: 1, records: [{ id: 'a' }] }, false)).toEqual({
      content: [{ type: 'text', text: '{"count":1,"records":[{"id":"a"}]}' }],
      structuredContent: { count: 1, records: [{ id: 'a' }] },
      isError: false,
    });
  });

  it('gives anything else as text only (structured content must be an object)', () => {
    expect(toCallToolResult([1, 2], false)).toEqual({ content: [{ type: 'text', text: '[1,2]' }], isError: false });
    expect(toCallToolResult(undefined, false)).toEqual({ content: [{ type: 'text', text: 'null' }], isError: false });
  });

  it('keeps an error result a result, flagged isError', () => {
    const error = { error: { code: 'unknown_field', message: 'Unknown field "x"' } };
    expect(toCallToolResult(error, true)).toMatchObject({ isError: true, structuredContent: error });
  });
});

describe('figure references over MCP', () => {
  const citing = {
    name: 'query_records',
    description: 'Find records.',
    citation: 'Each record has a "ref": cite it as {{ref.column}}.',
    parameters: { type: 'object' },
    scope: 'agent',
    holds: 'rows',
    execute: () => Promise.resolve(null),
  } satisfies ToolDefinition;

  it('offers a tool without its citation: no MCP result carries a ref, while an agent turn offers it', () => {
    expect(toMcpTool(citing).description).toBe('Find records.');
    expect(toOpenAiTool(citing).function.description).toBe('Find records. Each record has a "ref": cite it as {{ref.column}}.');
  });

  it('tells a host that nothing fills references in when an agent prompt asks for them, and only then', () => {
    const agent = (instructions: string) => ({ name: 'a', label: 'A', instructions }) as AgentSpec;
    const text = (spec: AgentSpec) => (toPromptResult(spec).messages[0].content as { text: string }).text;
    expect(text(agent('Write figures as {{r1.1.amount}}.'))).toBe(`Write figures as {{r1.1.amount}}.\n\n${MCP_FIGURES_NOTE}`);
    expect(text(agent('Be brief.'))).toBe('Be brief.');
  });
});
