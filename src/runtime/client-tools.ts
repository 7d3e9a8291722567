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
/** All schemas of one request together; a chat's tools travel to the model with every call. */
const MAX_TOTAL_SCHEMA_BYTES = 256 * 1024;
const MAX_DESCRIPTION = 4000;

/**
 * Client schemas are only sent to the model, never used to validate here, so they are checked
 * against the JSON Schema meta-schema (plus their patterns and `$ref`s, below) and nothing more: no
 * validator code is generated (whose cost grows faster than the schema: seconds of blocked event loop
 * for a 100 KB schema) and no schema is added to this instance, so one client's `$id` can neither
 * collide with nor be `$ref`ed by another's.
 */
const metaSchema = new Ajv({ strict: false, validateFormats: false, addUsedSchema: false });

function invalid(message: string, details?: unknown): DomainError {
  return new DomainError('invalid_dynamic_tools', message, details);
}

/** How a front door's wire format names a declared tool and its schema, for error messages. */
export interface ClientToolLabels {
  /** The path of tool `index`, e.g. `dynamicTools[0]`. */
  tool(index: number): string;
  /** The key of its JSON Schema under that path. */
  schema: string;
  /** The list as a whole. */
  list: string;
}

/** Durable chats: `dynamicTools: [{ name, description, inputSchema }]`. */
export const DYNAMIC_TOOL_LABELS: ClientToolLabels = {
  tool: (index) => `dynamicTools[${index}]`,
  schema: 'inputSchema',
  list: 'dynamicTools',
};

/**
 * Checks the tools a client declares (a durable chat at creation, an OpenAI-compatible request):
 * names as for any tool (TOOL_NAME_PATTERN), unique, at most 64, not shadowing the agent's tools;
 * function tools need an `inputSchema` that compiles as JSON Schema; `{ type: 'custom' }` tools take
 * raw text and have no schema.
 */
export function validateDynamicTools(
  input: unknown,
  agentTools: readonly string[],
  labels: ClientToolLabels = DYNAMIC_TOOL_LABELS,
): DynamicTool[] {
  if (input === undefined || input === null) return [];
  if (!Array.isArray(input)) throw invalid(`${labels.list} must be an array`);
  if (input.length > MAX_DYNAMIC_TOOLS) throw invalid(`At most ${MAX_DYNAMIC_TOOLS} client tools`);
  const seen = new Set<string>();
  let totalBytes = 0;
  return input.map((tool, index) => {
    const at = labels.tool(index);
    const schemaAt = `${at}.${labels.schema}`;
    if (typeof tool !== 'object' || tool === null || Array.isArray(tool)) throw invalid(`${at} must be an object`);
    const { type, name, description, inputSchema, ...rest } = tool as Record<string, unknown>;
    if (Object.keys(rest).length) throw invalid(`${at} has unknown properties: ${Object.keys(rest).join(', ')}`);
    if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name))
      throw invalid(`${at}.name must match ${TOOL_NAME_PATTERN.source}`);
    if (seen.has(name)) throw invalid(`Client tool "${name}" is declared twice`);
    seen.add(name);
    if (agentTools.includes(name) || name === ASK_USER_TOOL)
      throw invalid(`Client tool "${name}" would shadow a tool of the agent`);
    if (description !== undefined && (typeof description !== 'string' || description.length > MAX_DESCRIPTION)) {
      throw invalid(`${at}.description must be a string of at most ${MAX_DESCRIPTION} characters`);
    }
    if (type === 'custom') {
      if (inputSchema !== undefined) throw invalid(`${at}: custom tools take raw text and have no ${labels.schema}`);
      return { type: 'custom', name, ...(description ? { description } : {}) };
    }
    if (type !== undefined && type !== 'function') throw invalid(`${at}.type must be "function" or "custom"`);
    if (typeof inputSchema !== 'object' || inputSchema === null || Array.isArray(inputSchema)) {
      throw invalid(`${schemaAt} must be a JSON Schema object`);
    }
    const bytes = JSON.stringify(inputSchema).length;
    if (bytes > MAX_SCHEMA_BYTES) throw invalid(`${schemaAt} is larger than 64 KB`);
    totalBytes += bytes;
    if (totalBytes > MAX_TOTAL_SCHEMA_BYTES)
      throw invalid(`The schemas of all client tools together (${labels.list}) are larger than 256 KB`);
    const problem = schemaProblem(inputSchema, labels.schema);
    if (problem) {
      throw invalid(`${schemaAt} of client tool "${name}" is not a valid JSON Schema: ${problem}`, {
        param: schemaAt,
        tool: name,
      });
    }
    return {
      type: 'function',
      name,
      ...(description ? { description } : {}),
      inputSchema: inputSchema as Record<string, unknown>,
    };
  });
}

/** Why a schema is not valid JSON Schema (meta-schema errors, a bad regular expression, a dangling `$ref`), or undefined. */
function schemaProblem(schema: object, dataVar: string): string | undefined {
  try {
    if (!metaSchema.validateSchema(schema)) return metaSchema.errorsText(metaSchema.errors, { dataVar });
  } catch (error) {
    // An unknown `$schema` dialect, or nesting too deep for the checker.
    return (error as Error).message;
  }
  return badPattern(schema) ?? danglingRef(schema);
}

/** The base URI of a client schema without `$id`: nothing outside the schema lives there. */
const SCHEMA_BASE = 'https://client-tool.invalid/schema.json';
/** Keywords whose values are data, not schemas: a `$ref` or `$id` key inside them means nothing. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples']);

/**
 * The first `$ref` that does not point inside the schema, described; or undefined. A client's schema
 * stands alone (nothing is registered, nothing fetched), so a `$ref` can only name a part of it: the
 * root or a subschema with an `$id` (resolved against the enclosing `$id`, as JSON Schema does), with
 * an optional JSON pointer or anchor (`$anchor`, or draft-07's `$id: "#name"`) after `#`.
 */
function danglingRef(schema: object): string | undefined {
  const resources = new Map<string, unknown>();
  const anchors = new Set<string>();
  const refs: Array<{ ref: string; base: string }> = [];
  const stack: Array<{ node: unknown; base: string }> = [{ node: schema, base: SCHEMA_BASE }];
  resources.set(SCHEMA_BASE, schema);
  while (stack.length) {
    const { node, base: parentBase } = stack.pop()!;
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      for (const item of node) stack.push({ node: item, base: parentBase });
      continue;
    }
    const { $id, $anchor, $dynamicAnchor, $ref } = node as Record<string, unknown>;
    let base = parentBase;
    if (typeof $id === 'string') {
      const [uri, fragment] = splitFragment($id);
      if (uri) {
        const resolved = resolveUri(uri, parentBase);
        if (resolved === undefined) return `$id "${$id.slice(0, 200)}" is not a valid URI reference`;
        base = resolved;
        resources.set(base, node);
      }
      if (fragment && !fragment.startsWith('/')) anchors.add(`${base}#${fragment}`);
    }
    for (const anchor of [$anchor, $dynamicAnchor]) if (typeof anchor === 'string') anchors.add(`${base}#${anchor}`);
    if (typeof $ref === 'string') refs.push({ ref: $ref, base });
    for (const [key, value] of Object.entries(node)) {
      if (!DATA_KEYWORDS.has(key)) stack.push({ node: value, base });
    }
  }
  for (const { ref, base } of refs) {
    if (!resolvesInside(ref, base, resources, anchors)) return `$ref "${ref.slice(0, 200)}" does not point inside the schema`;
  }
  return undefined;
}

function resolvesInside(ref: string, base: string, resources: Map<string, unknown>, anchors: Set<string>): boolean {
  const [uri, fragment] = splitFragment(ref);
  const target = uri ? resolveUri(uri, base) : base;
  if (target === undefined || !resources.has(target)) return false;
  if (!fragment) return true;
  if (!fragment.startsWith('/')) return anchors.has(`${target}#${fragment}`);
  let decoded: string;
  try {
    decoded = decodeURIComponent(fragment);
  } catch {
    return false;
  }
  let node = resources.get(target);
  for (const token of decoded.slice(1).split('/')) {
    const key = token.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, key)) return false;
    node = (node as Record<string, unknown>)[key];
  }
  // A schema is an object or a boolean.
  return typeof node === 'boolean' || (typeof node === 'object' && node !== null && !Array.isArray(node));
}

/** `uri#fragment` → [uri, fragment]; no `#`: no fragment. */
function splitFragment(reference: string): [string, string | undefined] {
  const hash = reference.indexOf('#');
  return hash < 0 ? [reference, undefined] : [reference.slice(0, hash), reference.slice(hash + 1)];
}

/** `uri` resolved against `base`, without its fragment; undefined when it is not a URI reference. */
function resolveUri(uri: string, base: string): string | undefined {
  try {
    const resolved = new URL(uri, base);
    resolved.hash = '';
    return resolved.href;
  } catch {
    return undefined;
  }
}

/** `pattern` and `patternProperties` must be regular expressions; walked without recursion. */
function badPattern(schema: object): string | undefined {
  const stack: unknown[] = [schema];
  while (stack.length) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    const { pattern, patternProperties } = node as { pattern?: unknown; patternProperties?: unknown };
    const patterns = [
      ...(typeof pattern === 'string' ? [pattern] : []),
      ...(typeof patternProperties === 'object' && patternProperties !== null ? Object.keys(patternProperties) : []),
    ];
    for (const source of patterns) {
      try {
        new RegExp(source, 'u');
      } catch {
        return `"${source.slice(0, 100)}" is not a valid regular expression`;
      }
    }
    stack.push(...Object.values(node as Record<string, unknown>));
  }
  return undefined;
}

export interface ClientToolSet {
  /** Definitions to send to the model, next to the agent's own tools. */
  tools: LlmTool[];
  /** Every name whose calls pause the chat (dynamic tools, and ask_user when the agent has it). */
  names: string[];
  /** Freeform tools sent as a one-string-parameter function (endpoints without custom tools). */
  freeformAsFunction: Set<string>;
}

export function clientToolSet(
  dynamicTools: readonly DynamicTool[],
  agentTools: readonly string[],
  customAsFunctions: boolean,
): ClientToolSet {
  const freeformAsFunction = new Set<string>();
  const tools: LlmTool[] = dynamicTools.map((tool) => {
    const description = tool.description ?? '';
    if (tool.type === 'custom') {
      if (!customAsFunctions) return { type: 'custom', custom: { name: tool.name, description } };
      freeformAsFunction.add(tool.name);
      return {
        type: 'function',
        function: {
          name: tool.name,
          description,
          parameters: {
            type: 'object',
            properties: { input: { type: 'string', description: 'The raw text input.' } },
            required: ['input'],
            additionalProperties: false,
          },
        },
      };
    }
    return { type: 'function', function: { name: tool.name, description, parameters: tool.inputSchema } };
  });
  const names = dynamicTools.map((t) => t.name);
  if (agentTools.includes(ASK_USER_TOOL)) names.push(ASK_USER_TOOL);
  return { tools, names, freeformAsFunction };
}
