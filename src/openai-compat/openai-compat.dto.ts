import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import type { AgentResponse } from '../agents/agent.dto';

/** Who owns every model this server lists. */
export const OWNED_BY = 'data-copilot';

export class ModelResponse {
  @ApiProperty({ description: 'The agent name', example: 'data_chat' }) id: string;
  @ApiProperty({ enum: ['model'] }) object: 'model';
  @ApiProperty({ description: 'When the agent was created, Unix seconds' }) created: number;
  @ApiProperty({ example: OWNED_BY }) owned_by: string;
}

export class ModelListResponse {
  @ApiProperty({ enum: ['list'] }) object: 'list';
  @ApiProperty({ type: [ModelResponse] }) data: ModelResponse[];
}

export function toModelResponse(agent: AgentResponse): ModelResponse {
  return { id: agent.name, object: 'model', created: Math.floor(Date.parse(agent.createdAt) / 1000), owned_by: OWNED_BY };
}

class ChatMessageDoc {
  @ApiProperty({ enum: ['system', 'developer', 'user', 'assistant', 'tool'] }) role: string;
  @ApiPropertyOptional({
    oneOf: [
      { type: 'string' },
      {
        type: 'array',
        items: { type: 'object', properties: { type: { enum: ['text'] }, text: { type: 'string' } } },
      },
    ],
    nullable: true,
  })
  content?: unknown;
  @ApiPropertyOptional({
    description: 'assistant: the tool calls it made (client tools)',
    type: 'array',
    items: { type: 'object' },
  })
  tool_calls?: unknown[];
  @ApiPropertyOptional({ description: 'tool: the id of the call this message answers' }) tool_call_id?: string;
}

class FunctionToolDoc {
  @ApiProperty({ enum: ['function'] }) type: 'function';
  @ApiProperty({
    type: 'object',
    properties: {
      name: { type: 'string' },
      description: { type: 'string' },
      parameters: { type: 'object', additionalProperties: true },
    },
  })
  function: unknown;
}

class StreamOptionsDoc {
  @ApiPropertyOptional() include_usage?: boolean;
}

/**
 * OpenAI's Chat Completions request, as far as this server reads it (for the docs: the route reads
 * the body itself, and ignores fields not listed here).
 */
export class ChatCompletionRequestDoc {
  @ApiProperty({ description: 'The agent to run (GET /v1/models)', example: 'data_chat' }) model: string;
  @ApiProperty({ type: [ChatMessageDoc], minItems: 1, maxItems: 500 }) messages: ChatMessageDoc[];
  @ApiPropertyOptional({ minimum: 0, maximum: 2 }) temperature?: number;
  @ApiPropertyOptional({ minimum: 1, type: 'integer', description: "At most the agent's maxTokens" }) max_tokens?: number;
  @ApiPropertyOptional({ minimum: 1, type: 'integer', description: 'Same as max_tokens' }) max_completion_tokens?: number;
  @ApiPropertyOptional({ oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' }, maxItems: 4 }] })
  stop?: string | string[];
  @ApiPropertyOptional() stream?: boolean;
  @ApiPropertyOptional({ type: StreamOptionsDoc }) stream_options?: StreamOptionsDoc;
  @ApiPropertyOptional({ maxLength: 256, description: 'The end user, passed on to the model endpoint' }) user?: string;
  @ApiPropertyOptional({ type: [FunctionToolDoc], maxItems: 64, description: 'Tools the client executes itself' })
  tools?: FunctionToolDoc[];
  @ApiPropertyOptional({
    oneOf: [
      { enum: ['none', 'auto'] },
      {
        type: 'object',
        properties: {
          type: { enum: ['function'] },
          function: { type: 'object', properties: { name: { type: 'string' } } },
        },
      },
    ],
  })
  tool_choice?: unknown;
  @ApiPropertyOptional({ description: 'Only 1' }) n?: number;
}

export class CompletionToolCall {
  @ApiProperty() id: string;
  @ApiProperty({ enum: ['function'] }) type: 'function';
  @ApiProperty({ type: 'object', properties: { name: { type: 'string' }, arguments: { type: 'string' } } })
  function: { name: string; arguments: string };
}

export class CompletionMessage {
  @ApiProperty({ enum: ['assistant'] }) role: 'assistant';
  @ApiProperty({ type: 'string', nullable: true }) content: string | null;
  @ApiProperty({ type: 'string', nullable: true }) refusal: null;
  @ApiPropertyOptional({ type: [CompletionToolCall], description: 'Client tool calls (finish_reason tool_calls)' })
  tool_calls?: CompletionToolCall[];
}

export class CompletionChoice {
  @ApiProperty() index: number;
  @ApiProperty({ type: CompletionMessage }) message: CompletionMessage;
  @ApiProperty({ type: 'object', additionalProperties: true, nullable: true }) logprobs: null;
  @ApiProperty({ enum: ['stop', 'length', 'tool_calls'] }) finish_reason: 'stop' | 'length' | 'tool_calls';
}

export class CompletionUsage {
  @ApiProperty() prompt_tokens: number;
  @ApiProperty() completion_tokens: number;
  @ApiProperty() total_tokens: number;
}

export class ChatCompletionResponse {
  @ApiProperty() id: string;
  @ApiProperty({ enum: ['chat.completion'] }) object: 'chat.completion';
  @ApiProperty() created: number;
  @ApiProperty({ description: 'The agent name' }) model: string;
  @ApiProperty({ type: [CompletionChoice] }) choices: CompletionChoice[];
  @ApiProperty({ type: CompletionUsage, description: 'All model calls of the turn, built-in tool rounds included' })
  usage: CompletionUsage;
}

export class OpenAiErrorDetail {
  @ApiProperty() message: string;
  @ApiProperty() type: string;
  @ApiProperty({ type: 'string', nullable: true }) param: string | null;
  @ApiProperty({ type: 'string', nullable: true }) code: string | null;
}

export class OpenAiErrorResponse {
  @ApiProperty({ type: OpenAiErrorDetail }) error: OpenAiErrorDetail;
}
