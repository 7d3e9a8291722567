import type OpenAI from 'openai';
import { DomainError } from '../common/domain-error';
import type { ErrorCode } from '../common/error-codes';
import type { ToolDefinition, ToolErrorContent, ToolOutcome } from './tool.types';

/** What a tool name may be: what the OpenAI API accepts for function names. */
export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/** Identity with type inference: keeps a tool's argument type next to its schema. */
export function defineTool<Args>(definition: ToolDefinition<Args>): ToolDefinition<Args> {
  return definition;
}

/** What an agent's model reads about a tool: its description, and how to cite its results in the answer. */
export function offeredDescription(definition: Pick<ToolDefinition<never>, 'description' | 'citation'>): string {
  return definition.citation ? `${definition.description} ${definition.citation}` : definition.description;
}

/** A registered tool as an agent's model is offered it. */
export function toOpenAiTool(
  definition: Pick<ToolDefinition<never>, 'name' | 'description' | 'citation' | 'parameters'>,
): OpenAI.Chat.Completions.ChatCompletionFunctionTool {
  return {
    type: 'function',
    function: { name: definition.name, description: offeredDescription(definition), parameters: definition.parameters },
  };
}

export function errorContent(code: ErrorCode, message: string, details?: unknown): ToolErrorContent {
  return details === undefined ? { error: { code, message } } : { error: { code, message, details } };
}

export function errorOutcome(code: ErrorCode, message: string, details?: unknown): ToolOutcome {
  return { content: errorContent(code, message, details), isError: true };
}

export function domainErrorOutcome(error: DomainError): ToolOutcome {
  return errorOutcome(error.code, error.message, error.details);
}

/** The error code of an outcome, if it is an error result built by the helpers above. */
export function outcomeErrorCode(outcome: ToolOutcome): string | undefined {
  if (!outcome.isError) return undefined;
  const content = outcome.content as Partial<ToolErrorContent> | null;
  return typeof content?.error?.code === 'string' ? content.error.code : undefined;
}
