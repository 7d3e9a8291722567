import { ApiProperty, ApiPropertyOptional, getSchemaPath, PickType } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsIn, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { DomainError } from '../../common/domain-error';
import { JSON_OBJECT, JSON_VALUE } from '../../common/openapi.schemas';
import { GroundingResponse } from '../../runtime/grounding.dto';
import type { UiMessage, UiPart, UiTurnMetadata } from '../ui-messages';
import { CreateChatDto } from './chat.dto';

/** A chat id an AI SDK client chooses (its `Chat`'s id): what the transport puts in URL paths. */
export const CLIENT_CHAT_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
const CLIENT_CHAT_ID_RULE = 'must be 1 to 128 of A-Z, a-z, 0-9, _ and -';

/**
 * UI messages a client sends with each request: the whole conversation, of which only the last
 * message is read (the rest is stored already). The body limits bound it further.
 */
const MAX_UI_MESSAGES = 10_000;

export const UI_CHAT_TRIGGERS = ['submit-message', 'regenerate-message'] as const;

/** 400 unless `id` is a client chat id; for ids that arrive in a path. */
export function checkClientChatId(id: string): void {
  if (!CLIENT_CHAT_ID_PATTERN.test(id)) throw new DomainError('validation_failed', `The chat id ${CLIENT_CHAT_ID_RULE}`);
}

/**
 * What `DefaultChatTransport` posts (`id`, `messages`, `trigger`, `messageId`), plus the fields a
 * page adds through the transport's `body`: `dynamicTools` and `context`, checked as for POST /chats.
 */
export class UiChatRequestDto extends PickType(CreateChatDto, ['context', 'dynamicTools'] as const) {
  @ApiProperty({ description: "The client's chat id, unique per key", pattern: CLIENT_CHAT_ID_PATTERN.source, maxLength: 128 })
  @IsString()
  @Matches(CLIENT_CHAT_ID_PATTERN, { message: `id ${CLIENT_CHAT_ID_RULE}` })
  id: string;

  @ApiProperty({
    description:
      'AI SDK UI messages; only the last one is read: a user message (its text parts) or the assistant message whose client tool parts now carry their outputs',
    type: 'array',
    items: JSON_OBJECT,
    minItems: 1,
    maxItems: MAX_UI_MESSAGES,
  })
  @IsArray()
  @ArrayNotEmpty({ message: 'messages must contain at least one message' })
  @ArrayMaxSize(MAX_UI_MESSAGES)
  messages: unknown[];

  @ApiProperty({
    enum: UI_CHAT_TRIGGERS,
    description: '`regenerate-message` is refused (400): a durable history is never rewritten',
  })
  @IsString()
  @IsIn(UI_CHAT_TRIGGERS)
  trigger: (typeof UI_CHAT_TRIGGERS)[number];

  @ApiPropertyOptional({ description: 'Sent by the AI SDK; not used' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  messageId?: string;
}

export class UiUsageResponse {
  @ApiProperty({ type: 'integer', minimum: 0 }) promptTokens: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) completionTokens: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) totalTokens: number;
}

export class UiMessageMetadataResponse implements UiTurnMetadata {
  @ApiPropertyOptional({ description: 'The model that answered the last step' }) model?: string;
  @ApiPropertyOptional({ enum: ['stop', 'length', 'max_iterations', 'tool_calls'] })
  finishReason?: UiTurnMetadata['finishReason'];
  @ApiProperty({ type: UiUsageResponse, description: 'Of every step of the answer' }) usage: UiUsageResponse;
  @ApiPropertyOptional({
    type: GroundingResponse,
    description: "Which numbers of the answer the turn's tool results support; absent when the agent's grounding is off",
  })
  grounding?: GroundingResponse;
}

export class UiStepStartPart {
  @ApiProperty({ enum: ['step-start'], description: 'A model step begins' }) type: 'step-start';
}

export class UiTextPart {
  @ApiProperty({ enum: ['text'] }) type: 'text';
  @ApiProperty() text: string;
  @ApiPropertyOptional({ enum: ['done'] }) state?: 'done';
}

export class UiToolInvocationPart {
  @ApiProperty({ pattern: '^tool-', description: "`tool-<name>`: a call of the tool <name>, built-in or the client's" })
  type: string;
  @ApiProperty() toolCallId: string;
  @ApiProperty({
    enum: ['input-available', 'output-available', 'output-error', 'approval-requested'],
    description:
      'input-available: a client tool call still waiting for its output; approval-requested: a write proposal waiting for a decision',
  })
  state: 'input-available' | 'output-available' | 'output-error' | 'approval-requested';
  @ApiProperty({ ...JSON_VALUE, description: 'The arguments of the call' }) input: unknown;
  @ApiPropertyOptional({
    ...JSON_VALUE,
    description:
      'With output-available: what the tool returned, or { "withheld": true, "reason": "access_changed" } for a result produced under other access than the caller has',
  })
  output?: unknown;
  @ApiPropertyOptional({ description: 'With output-error: why the call failed' }) errorText?: string;
  @ApiPropertyOptional({
    type: 'object',
    properties: {
      id: { type: 'string', description: 'The approval id (the call id), for addToolApprovalResponse' },
      descriptor: {
        type: 'object',
        additionalProperties: true,
        description: '{ objectName, operation, changes: [{ id, etag, before, after }], expiresAt }',
      },
      signature: { type: 'string', description: "The proposal's approval token, sent back with the approval response" },
    },
    required: ['id', 'descriptor', 'signature'],
    description: 'With approval-requested: what would change, and the token that approves it',
  })
  approval?: { id: string; descriptor: Record<string, unknown>; signature: string };
}

export class UiGroundingPart {
  @ApiProperty({
    enum: ['data-grounding'],
    description: "After an answer's last step: which of its numbers the tool results support",
  })
  type: 'data-grounding';
  @ApiProperty({ type: GroundingResponse }) data: GroundingResponse;
}

export class UiChartData {
  @ApiProperty({ description: 'The visualize call that drew the chart' }) toolCallId: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: "A Vega-Lite (v6) spec; its inline data are the source result's rows",
  })
  spec: Record<string, unknown>;
}

export class UiChartPart {
  @ApiProperty({ enum: ['data-chart'], description: "Right after a visualize call's output: the chart it drew" })
  type: 'data-chart';
  @ApiProperty({ description: 'The visualize call id: one part per chart' }) id: string;
  @ApiProperty({ type: UiChartData }) data: UiChartData;
}

/** The parts of a UI message; the controller registers these classes with @ApiExtraModels. */
export const UI_PART_MODELS = [UiStepStartPart, UiTextPart, UiToolInvocationPart, UiChartPart, UiGroundingPart];

export class UiMessageResponse implements UiMessage {
  @ApiProperty({ description: "A user message keeps its client's id; an answer's is the `start` part's messageId" })
  id: string;
  @ApiProperty({ enum: ['user', 'assistant'] }) role: 'user' | 'assistant';
  @ApiProperty({
    description:
      'A user message: one text part. An answer (one per turn): per model step a step-start, its text and its tool calls ' +
      '(a visualize call followed by its data-chart); then its grounding',
    type: 'array',
    items: { oneOf: UI_PART_MODELS.map((model) => ({ $ref: getSchemaPath(model) })) },
  })
  parts: UiPart[];
  @ApiPropertyOptional({ type: UiMessageMetadataResponse, description: 'Of an answer: model, finish reason and usage' })
  metadata?: UiMessageMetadataResponse;
}

export class UiChatMessagesResponse {
  @ApiProperty({ type: [UiMessageResponse] }) messages: UiMessageResponse[];
}
