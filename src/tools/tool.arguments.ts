import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { DomainError } from '../common/domain-error';
import type { JsonSchema } from './tool.types';

/** Enough errors for the model to fix a call, few enough to keep the result small. */
const MAX_REPORTED_ERRORS = 10;
const MAX_ECHO_LENGTH = 100;

export type ArgumentValidator = (args: Record<string, unknown>) => DomainError | undefined;

/**
 * Compiles tool parameter schemas once (at registration) and turns ajv's errors into sentences
 * that name the offending property, so the model can correct its call.
 */
export class ToolArgumentsCompiler {
  // verbose: errors carry the failing value and its parent schema (used to name allowed properties).
  private readonly ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true, verbose: true });

  /** Throws at startup when a schema is not valid JSON Schema. */
  compile(toolName: string, schema: JsonSchema): ArgumentValidator {
    if (schema.type !== 'object') throw new Error(`Tool "${toolName}": parameters must be a JSON Schema of type "object"`);
    const validate: ValidateFunction = this.ajv.compile(schema);
    return (args) => {
      if (validate(args)) return undefined;
      const messages = [...new Set((validate.errors ?? []).map(describeError))].slice(0, MAX_REPORTED_ERRORS);
      return new DomainError(
        'invalid_arguments',
        `Invalid arguments for tool "${toolName}": ${messages.join('; ')}. Fix the arguments and call the tool again.`,
        { errors: messages },
      );
    };
  }
}

/** Parses raw arguments: a JSON text or an object; an empty text means "no arguments". */
/**
 * Arguments as the model sent them, for display and history: parsed when they are JSON, the raw text
 * otherwise (freeform input, or JSON the model got wrong, which the caller should see as sent).
 */
export function readableArguments(raw: string | Record<string, unknown>): unknown {
  if (typeof raw !== 'string') return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

export function parseArguments(toolName: string, raw: unknown): Record<string, unknown> | DomainError {
  let value = raw;
  if (typeof raw === 'string') {
    if (raw.trim() === '') return {};
    try {
      value = JSON.parse(raw);
    } catch {
      return new DomainError(
        'invalid_arguments',
        `Arguments for tool "${toolName}" are not valid JSON. Send a JSON object, e.g. {"objectName": "deal"}.`,
      );
    }
  }
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    return new DomainError(
      'invalid_arguments',
      `Arguments for tool "${toolName}" must be a JSON object, got ${Array.isArray(value) ? 'an array' : typeof value}.`,
    );
  }
  return value as Record<string, unknown>;
}

function describeError(error: ErrorObject): string {
  const path = toPath(error.instancePath);
  const where = path || 'arguments';
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `missing required property "${join(path, String(params.missingProperty))}"`;
    case 'additionalProperties': {
      const allowed = Object.keys((error.parentSchema?.properties as Record<string, unknown> | undefined) ?? {});
      const name = join(path, String(params.additionalProperty));
      return `unknown property "${name}"` + (allowed.length ? ` (allowed: ${allowed.join(', ')})` : '');
    }
    case 'enum':
      return `${where}: ${echo(error.data)} is not allowed; use one of ${(params.allowedValues as unknown[]).map(String).join(', ')}`;
    case 'type':
      return `${where} must be ${String(params.type).replace(',', ' or ')}, got ${typeName(error.data)}`;
    default:
      return `${where} ${error.message ?? 'is invalid'}`;
  }
}

/** `/aggregations/0/function` → `aggregations[0].function`. */
function toPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

function join(path: string, name: string): string {
  return path ? `${path}.${name}` : name;
}

function echo(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > MAX_ECHO_LENGTH ? `${text.slice(0, MAX_ECHO_LENGTH)}…` : text;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${echo(value)}`;
}
