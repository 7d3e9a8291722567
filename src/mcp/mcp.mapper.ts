import type {
  CallToolResult,
  ElicitRequestFormParams,
  GetPromptResult,
  Prompt,
  ReadResourceResult,
  Resource,
  ResourceTemplate,
  Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { AgentSpec } from '../agents/agent.types';
import { isPlainObject } from '../common/plain-object';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import type { ObjectSummary } from '../metadata/metadata.repository';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import { describeObjectMeta } from '../tools/data-tools/describe-object.tool';
import type { ProposedChange, ToolDefinition, WriteProposal } from '../tools/tool.types';
import { WRITE_TOOL_NAMES } from '../writes/write-tools';

/** Longest server `instructions`: hosts put them into every conversation's context. */
export const MAX_INSTRUCTIONS_CHARS = 4000;
/** Longest object or agent description quoted in the instructions; the resource has the whole text. */
const MAX_DESCRIPTION_CHARS = 160;

/** Longest line that counts the objects the instructions leave out. */
const CLOSING_LINE_ROOM = 60;

const OBJECT_URI_PREFIX = 'object://';

export function objectUri(name: string): string {
  return `${OBJECT_URI_PREFIX}${name}`;
}

/** The object name of an `object://<name>` URI, or undefined when the URI cannot name an object. */
export function objectNameOf(uri: string): string | undefined {
  if (!uri.startsWith(OBJECT_URI_PREFIX)) return undefined;
  const name = uri.slice(OBJECT_URI_PREFIX.length);
  return IDENTIFIER_PATTERN.test(name) ? name : undefined;
}

/** A registry tool as MCP lists it: the same name, description and JSON Schema the model is offered. */
export function toMcpTool(tool: ToolDefinition): Tool {
  return { name: tool.name, description: tool.description, inputSchema: tool.parameters as Tool['inputSchema'] };
}

/**
 * A tool outcome as an MCP result: the JSON as text for hosts that read only text, and as
 * `structuredContent` when it is an object (MCP wants an object there). Errors are results too
 * (`isError`), so the host's model reads them and can correct its call.
 */
export function toCallToolResult(content: unknown, isError: boolean): CallToolResult {
  const result: CallToolResult = { content: [{ type: 'text', text: JSON.stringify(content ?? null) }], isError };
  if (isPlainObject(content)) result.structuredContent = content;
  return result;
}

export function toObjectResource(object: ObjectSummary): Resource {
  const resource: Resource = {
    uri: objectUri(object.name),
    name: object.name,
    title: object.label,
    mimeType: 'application/json',
  };
  if (object.description) resource.description = object.description;
  return resource;
}

/** `object://{name}`: for hosts that let a user type a resource address. */
export const OBJECT_RESOURCE_TEMPLATE: ResourceTemplate = {
  uriTemplate: `${OBJECT_URI_PREFIX}{name}`,
  name: 'object',
  title: 'Object schema',
  description: 'An object (table): its label, description and fields with their types, options and references, as JSON.',
  mimeType: 'application/json',
};

/** An object's description and fields, as describe_object returns them, for a host to attach to a conversation. */
export function toObjectResourceContents(uri: string, object: ObjectMeta): ReadResourceResult {
  return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(describeObjectMeta(object)) }] };
}

export function toPrompt(agent: AgentSpec): Prompt {
  const prompt: Prompt = { name: agent.name, title: agent.label };
  if (agent.description) prompt.description = agent.description;
  return prompt;
}

/** An agent's instructions, as the one message of its prompt (MCP prompts have no system role). */
export function toPromptResult(agent: AgentSpec): GetPromptResult {
  // Figure references are filled in by this server's own turns only: a host's model must write figures itself.
  const text = agent.instructions.includes('{{') ? `${agent.instructions}\n\n${MCP_FIGURES_NOTE}` : agent.instructions;
  return {
    description: agent.description ?? agent.label,
    messages: [{ role: 'user', content: { type: 'text', text } }],
  };
}

/** Added to an agent's prompt that asks for figure references: over MCP no result carries a ref and nothing fills one in. */
export const MCP_FIGURES_NOTE =
  'Over this connection the results carry no "ref" and nothing fills {{…}} references in: write each figure as the ' +
  'tool returned it (you may round it), next to the row it belongs to.';

/**
 * What a host is told about the server in `initialize`: whose data, which tools, then one line per
 * object the caller may use, within MAX_INSTRUCTIONS_CHARS (the rest are counted, not listed).
 */
export function serverInstructions(objects: readonly ObjectSummary[], tools: readonly string[], agent?: AgentSpec): string {
  const has = (tool: string) => tools.includes(tool);
  const head = [
    agent
      ? `Agent "${agent.label}" (${agent.name})${agent.description ? `: ${clip(agent.description).replace(/\.+$/, '')}` : ''}. ` +
        `Its instructions are the prompt "${agent.name}".`
      : undefined,
    `Business data kept as objects (tables of typed fields), ${access(tools)}. ` +
      `Each object's fields are the resource object://<name>${has('describe_object') ? ' and what describe_object returns' : ''}: ` +
      'use the exact field names and option values from there.',
    has('aggregate_data') ? 'For counts, sums and averages call aggregate_data instead of adding up records.' : undefined,
    has('query_metric')
      ? 'For figures the admins defined as metrics (see list_metrics: revenue, win rate, ...) call query_metric.'
      : undefined,
    objects.length ? 'Objects:' : 'No objects are defined yet.',
  ].filter((line): line is string => line !== undefined);
  const lines = [...head];
  let length = head.join('\n').length;
  for (const [index, object] of objects.entries()) {
    const line = `- ${object.name} (${object.label})${object.description ? `: ${clip(object.description)}` : ''}`;
    // Room is kept for the line that counts the objects left out.
    if (length + 1 + line.length + 1 + CLOSING_LINE_ROOM > MAX_INSTRUCTIONS_CHARS) {
      lines.push(`- ... and ${objects.length - index} more${has('list_objects') ? ': call list_objects' : ''}.`);
      break;
    }
    lines.push(line);
    length += 1 + line.length;
  }
  return lines.join('\n');
}

/** How the tools reach the data: read only, or changed too, each change confirmed by the user first. */
function access(tools: readonly string[]): string {
  const writes = tools.filter((tool) => (WRITE_TOOL_NAMES as readonly string[]).includes(tool));
  const reads = tools.filter((tool) => !writes.includes(tool));
  if (!writes.length) return `read-only through the tools ${reads.join(', ') || '(none)'}`;
  return (
    `read through the tools ${reads.join(', ') || '(none)'} and changed through ${writes.join(', ')}, ` +
    'each change written only once the user confirms it when asked'
  );
}

/** Longest value shown in a confirmation; the whole change is in `_meta`. */
const MAX_VALUE_CHARS = 200;
/** Longest confirmation message: records beyond it are counted, not listed. */
const MAX_CONFIRMATION_CHARS = 8000;
/** Where a confirmation's `_meta` holds the proposal (without its token) for hosts that show it themselves. */
export const PROPOSAL_META_KEY = 'io.data-copilot/proposal';

/** The form of a write confirmation: approve or reject, with an optional reason. */
export const CONFIRMATION_SCHEMA: ElicitRequestFormParams['requestedSchema'] = {
  type: 'object',
  properties: {
    decision: {
      type: 'string',
      title: 'Decision',
      oneOf: [
        { const: 'approve', title: 'Approve: write this change' },
        { const: 'reject', title: 'Reject: write nothing' },
      ],
    },
    reason: { type: 'string', title: 'Reason', description: 'Why, if you reject it (optional)', maxLength: 500 },
  },
  required: ['decision'],
};

/**
 * The elicitation asking the user to confirm a write proposal: what changes (object, operation, and per record
 * each changed field before → after), until when the proposal holds, and a form to approve or reject it.
 */
export function toConfirmationRequest(tool: string, agent: string, proposal: WriteProposal): ElicitRequestFormParams {
  const count = proposal.changes.length;
  const head =
    `Agent "${agent}" asks to ${proposal.operation} ${count === 1 ? 'a' : count} "${proposal.objectName}" record${count === 1 ? '' : 's'} ` +
    `(${tool}). Nothing is written unless you approve. This request expires at ${proposal.expiresAt}.`;
  const lines = [head];
  let length = head.length;
  for (const [index, change] of proposal.changes.entries()) {
    const block = ['', ...changeLines(proposal.operation, change)].join('\n');
    if (length + block.length + CLOSING_LINE_ROOM > MAX_CONFIRMATION_CHARS) {
      lines.push('', `... and ${count - index} more records.`);
      break;
    }
    lines.push(block);
    length += block.length;
  }
  // Everything but the token: the client answers with a decision, never with the means to make one.
  const shown = {
    objectName: proposal.objectName,
    operation: proposal.operation,
    changes: proposal.changes,
    expiresAt: proposal.expiresAt,
  };
  return {
    mode: 'form',
    message: lines.join('\n'),
    requestedSchema: CONFIRMATION_SCHEMA,
    _meta: { [PROPOSAL_META_KEY]: { tool, agent, ...shown } },
  };
}

function changeLines(operation: WriteProposal['operation'], change: ProposedChange): string[] {
  const value = (v: unknown) => {
    const text = JSON.stringify(v ?? null);
    return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS - 3)}...` : text;
  };
  if (operation === 'create') {
    return ['New record:', ...Object.entries(change.after ?? {}).map(([name, v]) => `  ${name}: ${value(v)}`)];
  }
  if (operation === 'delete') {
    return [
      `Record ${change.id} (deleted):`,
      ...Object.entries(change.before ?? {}).map(([name, v]) => `  ${name}: ${value(v)}`),
    ];
  }
  return [
    `Record ${change.id}:`,
    ...Object.entries(change.after ?? {}).map(([name, v]) => `  ${name}: ${value(change.before?.[name])} → ${value(v)}`),
  ];
}

function clip(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > MAX_DESCRIPTION_CHARS ? `${flat.slice(0, MAX_DESCRIPTION_CHARS - 3)}...` : flat;
}
