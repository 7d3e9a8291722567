import Ajv from 'ajv';
import { DomainError } from '../common/domain-error';
import type { LlmTool } from '../llm/llm.types';
import { ASK_USER_TOOL } from '../tools/ask-user.tool';
import { TOOL_NAME_PATTERN } from '../tools/tool.define';

/** A tool the client declares and executes itself. */
export type DynamicTool =
  | { type?: 'function'; name: string; description?: string; inputSchema: Record<string, unknown> }
  | { type: 'custom'; name: string; description?: string };

export const MAX_DYNAMIC_TOOLS = 64;
const MAX_SCHEMA_BYTES = 64 * 1024;
const MAX_DESCRIPTION = 4000;

/** Compiles client schemas only to check them; unknown keywords and formats are allowed, as models see them anyway. */
const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: false });

function invalid(message: string, details?: unknown): DomainError {
  return new DomainError('invalid_dynamic_tools', message, details);
}

/**
 * Checks the tools a client declares at chat creation: names as for any tool (TOOL_NAME_PATTERN), unique, at
 * most 64, not shadowing the agent's tools; function tools need an `inputSchema` that compiles as
 * JSON Schema; `{ type: 'custom' }` tools take raw text and have no schema.
 */
export function validateDynamicTools(input: unknown, agentTools: readonly string[]): DynamicTool[] {
  if (input === undefined || input === null) return [];
  if (!Array.isArray(input)) throw invalid('dynamicTools must be an array');
  if (input.length > MAX_DYNAMIC_TOOLS) throw invalid(`At most ${MAX_DYNAMIC_TOOLS} dynamic tools`);
  const seen = new Set<string>();
  return input.map((tool, index) => {
    const at = `dynamicTools[${index}]`;
    if (typeof tool !== 'object' || tool === null || Array.isArray(tool)) throw invalid(`${at} must be an object`);
    const { type, name, description, inputSchema, ...rest } = tool as Record<string, unknown>;
    if (Object.keys(rest).length) throw invalid(`${at} has unknown properties: ${Object.keys(rest).join(', ')}`);
    if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name)) throw invalid(`${at}.name must match ${TOOL_NAME_PATTERN.source}`);
    if (seen.has(name)) throw invalid(`Dynamic tool "${name}" is declared twice`);
    seen.add(name);
    if (agentTools.includes(name) || name === ASK_USER_TOOL) throw invalid(`Dynamic tool "${name}" would shadow a tool of the agent`);
    if (description !== undefined && (typeof description !== 'string' || description.length > MAX_DESCRIPTION)) {
      throw invalid(`${at}.description must be a string of at most ${MAX_DESCRIPTION} characters`);
    }
    if (type === 'custom') {
      if (inputSchema !== undefined) throw invalid(`${at}: custom tools take raw text and have no inputSchema`);
      return { type: 'custom', name, ...(description ? { description } : {}) };
    }
    if (type !== undefined && type !== 'function') throw invalid(`${at}.type must be "function" or "custom"`);
    if (typeof inputSchema !== 'object' || inputSchema === null || Array.isArray(inputSchema)) {
      throw invalid(`${at}.inputSchema must be a JSON Schema object`);
    }
    if (JSON.stringify(inputSchema).length > MAX_SCHEMA_BYTES) throw invalid(`${at}.inputSchema is larger than 64 KB`);
    try {
      ajv.compile(inputSchema);
    } catch (error) {
      throw invalid(`${at}.inputSchema is not a valid JSON Schema: ${(error as Error).message}`);
    }
    return { type: 'function', name, ...(description ? { description } : {}), inputSchema: inputSchema as Record<string, unknown> };
  });
}

export interface ClientToolSet {
  /** Definitions to send to the model, next to the agent's own tools. */
  tools: LlmTool[];
  /** Every name whose calls pause the chat (dynamic tools, and ask_user when the agent has it). */
  names: string[];
  /** Freeform tools sent as a one-string-parameter function (endpoints without custom tools). */
  freeformAsFunction: Set<string>;
}

export function clientToolSet(dynamicTools: readonly DynamicTool[], agentTools: readonly string[], customAsFunctions: boolean): ClientToolSet {
  const freeformAsFunction = new Set<string>();
  const tools: LlmTool[] = dynamicTools.map((tool) => {
    const description = tool.description ?? '';
    if (tool.type === 'custom') {
      if (!customAsFunctions) return { type: 'custom', custom: { name: tool.name, description } } as LlmTool;
      freeformAsFunction.add(tool.name);
      return {
        type: 'function',
        function: {
          name: tool.name,
          description,
          parameters: { type: 'object', properties: { input: { type: 'string', description: 'The raw text input.' } }, required: ['input'], additionalProperties: false },
        },
      };
    }
    return { type: 'function', function: { name: tool.name, description, parameters: tool.inputSchema } };
  });
  const names = dynamicTools.map((t) => t.name);
  if (agentTools.includes(ASK_USER_TOOL)) names.push(ASK_USER_TOOL);
  return { tools, names, freeformAsFunction };
}
