import { ApiProperty, ApiPropertyOptional, getSchemaPath } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsIn,
  IsNotEmpty,
  IsOptional,
  IsString,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { JSON_OBJECT, JSON_VALUE } from '../../common/openapi.schemas';
import { QueryInt } from '../../common/pagination.dto';
import { ChatContextDto } from '../../runtime/chat-context.dto';
import { WITHHELD_REASON } from '../../runtime/conversation';
import { GroundingResponse } from '../../runtime/grounding.dto';
import { proposalsVisibleTo } from './chat-message.mapper';
import {
  CHAT_STATUSES,
  type ChatMessageRow,
  type ChatRow,
  type ChatStatus,
  type PendingToolCall,
  type StepMetadata,
} from './chat.types';

const MAX_MESSAGE = 100_000;

export class CreateChatDto {
  @ApiProperty({ example: 'data_chat' }) @IsString() @IsNotEmpty() @MaxLength(63) agent: string;
  @ApiProperty({ example: 'Which deals did we win last quarter?' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(MAX_MESSAGE)
  message: string;
  @ApiPropertyOptional({ type: ChatContextDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => ChatContextDto)
  context?: ChatContextDto;
  @ApiPropertyOptional({ maxLength: 255 }) @IsOptional() @IsString() @MaxLength(255) title?: string;

  @ApiPropertyOptional({
    description:
      'Tools the client executes: { name, description, inputSchema } or { type: "custom", name, description } (raw text input)',
    type: 'array',
    items: JSON_OBJECT,
  })
  @IsOptional()
  @IsArray()
  dynamicTools?: unknown[];
}

export class PostMessageDto {
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(MAX_MESSAGE) message: string;
}

export class ToolResultDto {
  @ApiProperty() @IsString() @IsNotEmpty() @MaxLength(200) toolCallId: string;
  /** Any JSON value, null included; only a missing `output` is refused (by the service). */
  @ApiProperty({ ...JSON_VALUE, description: 'Any JSON value, null included (text for freeform tools)' })
  @Allow()
  output: unknown;
  @ApiPropertyOptional() @IsOptional() @IsBoolean() isError?: boolean;
}

export class ToolResultsDto {
  @ApiProperty({ type: [ToolResultDto] })
  @IsArray()
  @ArrayNotEmpty({ message: 'results must contain at least one result' })
  @ArrayMaxSize(64)
  @ValidateNested({ each: true })
  @Type(() => ToolResultDto)
  results: ToolResultDto[];
}

export class MessagesQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 0, description: 'Only messages with a larger id (the stream cursor)' })
  @QueryInt(0, Number.MAX_SAFE_INTEGER, 'afterId must be a message id')
  afterId?: number;
}

/** `until` values of a chat stream: `idle` ends it once the chat waits for a message or has failed. */
export const STREAM_UNTIL = ['idle'] as const;

export class ChatStreamQueryDto extends MessagesQueryDto {
  @ApiPropertyOptional({
    enum: STREAM_UNTIL,
    description:
      'idle: the stream sends a final `end` event and closes once the chat is waiting or in error (at once, after the catch-up, when it already is)',
  })
  @IsOptional()
  @IsIn(STREAM_UNTIL, { message: 'until must be idle' })
  until?: (typeof STREAM_UNTIL)[number];
}

export class PendingToolCallResponse {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty({ ...JSON_VALUE, description: 'Parsed JSON arguments; raw text for freeform (custom) tools' })
  arguments: unknown;
}

export class ProposedChangeResponse {
  @ApiProperty({ type: 'string', nullable: true, description: "The record's id; null for a record to be created" })
  id: string | null;
  @ApiProperty({
    type: 'string',
    nullable: true,
    description: "The record's version when proposed, as its ETag; the write runs only while the record is still at it",
  })
  etag: string | null;
  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: true,
    description: 'The fields that change, as they are now (a delete: the whole record); null for a create',
  })
  before: Record<string, unknown> | null;
  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: true,
    description: 'The fields that change, as they would be; null for a delete',
  })
  after: Record<string, unknown> | null;
}

export class WriteProposalResponse {
  @ApiProperty({ description: 'The id of the write tool call; POST /chats/:id/approvals names it' }) toolCallId: string;
  @ApiProperty({ enum: ['create_record', 'update_record', 'delete_record', 'update_records'] }) tool: string;
  @ApiProperty({ ...JSON_VALUE, description: 'The arguments of the call as the model made it' }) arguments: unknown;
  @ApiProperty({ type: [ProposedChangeResponse] }) changes: ProposedChangeResponse[];
  @ApiProperty({
    description:
      'The single-use approval token: signed over the chat, the call, its arguments, every record version and the expiry',
  })
  token: string;
  @ApiProperty({ format: 'date-time' }) expiresAt: string;
}

export class RequiredActionResponse {
  @ApiProperty({ enum: ['approval'] }) type: 'approval';
  @ApiProperty({
    type: [WriteProposalResponse],
    description: "The proposals the caller may see: those made under the caller's access",
  })
  proposals: WriteProposalResponse[];
  @ApiPropertyOptional({
    type: 'boolean',
    enum: [true],
    description:
      'Proposals were made under other access than the caller has (another key of the same owner, or this key before its policies changed): they are left out, records, values and tokens included',
  })
  withheld?: true;
  @ApiPropertyOptional({ enum: [WITHHELD_REASON], description: 'With withheld: why' })
  reason?: typeof WITHHELD_REASON;
}

export class ChatResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({
    nullable: true,
    type: 'string',
    description: 'The id an AI SDK client gave the chat (POST /api/v1/ai/agents/:agentName/chats); null otherwise',
  })
  clientId: string | null;
  @ApiProperty() agent: string;
  @ApiProperty({ type: 'string', nullable: true }) title: string | null;
  @ApiProperty({ enum: CHAT_STATUSES }) status: ChatStatus;
  @ApiProperty({
    nullable: true,
    type: 'object',
    additionalProperties: { type: 'string' },
    description: 'The context the chat was created with (objectName, recordId, viewName)',
  })
  context: Record<string, string> | null;
  @ApiPropertyOptional({ type: [PendingToolCallResponse], description: 'Only while requires_action' })
  pendingToolCalls?: PendingToolCall[];
  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    format: 'date-time',
    description:
      'Only while requires_action: when the pending calls time out; while requires_approval: when the earliest proposal expires',
  })
  actionExpiresAt?: string | null;
  @ApiPropertyOptional({
    type: RequiredActionResponse,
    description: "Only while requires_approval: the agent's write proposals, each waiting for a person's decision",
  })
  requiredAction?: RequiredActionResponse;
  // Inline rather than a $ref: OpenAPI 3.0's nullable does not reach into a referenced schema.
  @ApiProperty({
    type: 'object',
    nullable: true,
    properties: {
      code: { type: 'string', description: 'An error code of the catalog (ErrorCode), e.g. llm_unavailable' },
      message: { type: 'string' },
    },
    required: ['code', 'message'],
    description: 'Why the chat is in error',
  })
  lastError: {
    code: string;
    message: string;
  } | null;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) updatedAt: string;
}

export class ChatListResponse {
  @ApiProperty({ type: [ChatResponse] }) chats: ChatResponse[];
}

export class ChatTextPart {
  @ApiProperty({ enum: ['text'] }) type: 'text';
  @ApiProperty() text: string;
}

export class ChatToolCallPart {
  @ApiProperty({ enum: ['tool-call'] }) type: 'tool-call';
  @ApiProperty() toolCallId: string;
  @ApiProperty() toolName: string;
  @ApiProperty({ ...JSON_VALUE, description: 'The arguments (raw text for freeform tools)' }) input: unknown;
  @ApiPropertyOptional({ enum: ['function', 'custom'] }) kind?: 'function' | 'custom';
}

export class ChatToolResultPart {
  @ApiProperty({ enum: ['tool-result'] }) type: 'tool-result';
  @ApiProperty() toolCallId: string;
  @ApiProperty() toolName: string;
  @ApiPropertyOptional({ ...JSON_VALUE, description: 'What the tool returned; absent when the result is withheld' })
  output?: unknown;
  @ApiProperty() isError: boolean;
  @ApiPropertyOptional({
    type: 'boolean',
    enum: [true],
    description:
      'The result was produced under other access than the caller has (another key of the same owner, or this key before its policies changed): its output is left out, and the model is not sent it again',
  })
  withheld?: true;
  @ApiPropertyOptional({ enum: [WITHHELD_REASON], description: 'With withheld: why' })
  reason?: typeof WITHHELD_REASON;
}

export class ChatMessageUsageResponse {
  @ApiProperty({ type: 'integer', minimum: 0 }) promptTokens: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) completionTokens: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) totalTokens: number;
}

export class ChatMessageMetadataResponse {
  @ApiProperty({ description: 'The model that answered' }) model: string;
  @ApiProperty({ enum: ['stop', 'length', 'max_iterations', 'tool_calls'] }) finishReason: StepMetadata['finishReason'];
  @ApiPropertyOptional({
    type: GroundingResponse,
    description: "Of an answer: which of its numbers the turn's tool results support; absent when the agent's grounding is off",
  })
  grounding?: GroundingResponse;
  @ApiPropertyOptional({
    description:
      'An answer sent back to the model to correct its unsupported numbers (grounding retry); the next answer replaces it',
  })
  superseded?: boolean;
}

/** The parts of a message; the controller registers these classes with @ApiExtraModels. */
export const CHAT_PART_MODELS = [ChatTextPart, ChatToolCallPart, ChatToolResultPart];

export class ChatMessageResponse {
  @ApiProperty({ type: 'integer', minimum: 1, description: 'Increasing within a chat: the stream cursor (afterId)' })
  id: number;
  @ApiProperty({ enum: ['user', 'assistant', 'tool'] }) role: string;
  @ApiProperty({
    type: 'array',
    items: {
      oneOf: CHAT_PART_MODELS.map((model) => ({ $ref: getSchemaPath(model) })),
      discriminator: {
        propertyName: 'type',
        mapping: {
          text: getSchemaPath(ChatTextPart),
          'tool-call': getSchemaPath(ChatToolCallPart),
          'tool-result': getSchemaPath(ChatToolResultPart),
        },
      },
    },
  })
  parts: unknown[];
  @ApiPropertyOptional({
    type: ChatMessageMetadataResponse,
    description: 'Of an assistant message: what answered, why the step ended and, of an answer, its grounding',
  })
  metadata?: ChatMessageMetadataResponse;
  @ApiPropertyOptional({ type: ChatMessageUsageResponse, description: "Of an assistant message: its model step's tokens" })
  usage?: ChatMessageUsageResponse;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
}

export class ChatMessagesResponse {
  @ApiProperty({ type: [ChatMessageResponse] }) messages: ChatMessageResponse[];
}

export class ReplayReceiptDto {
  @ApiProperty({ description: "The stored data call to run again (a receipt's `toolCallId`)", maxLength: 200 })
  @IsString()
  @IsNotEmpty()
  @MaxLength(200)
  toolCallId: string;
}

export class ReceiptChangeResponse {
  @ApiProperty({ description: 'The reference of a figure an answer took from the call, e.g. `r3.2.won_revenue`' }) ref: string;
  @ApiProperty({ ...JSON_VALUE, description: 'The value the answer showed' }) then: unknown;
  @ApiProperty({ ...JSON_VALUE, description: 'The same cell now (null when the row is gone)' }) now: unknown;
}

export class ReceiptReplayResponse {
  @ApiProperty() toolCallId: string;
  @ApiProperty({ format: 'date-time', description: 'When the call ran again' }) ranAt: string;
  @ApiProperty({ type: [ReceiptChangeResponse], description: 'Referenced figures whose cell has another value now' })
  changed: ReceiptChangeResponse[];
  @ApiProperty({ type: 'integer', minimum: 0, description: 'Referenced figures whose cell is the same' }) unchanged: number;
}

/** A chat as a caller whose access has this fingerprint sees it (its write proposals: proposalsVisibleTo). */
export function toChatResponse(chat: ChatRow, fingerprint: string): ChatResponse {
  const response: ChatResponse = {
    id: chat.id,
    clientId: chat.clientId,
    agent: chat.agent,
    title: chat.title,
    status: chat.status,
    context: chat.context,
    lastError: chat.lastError,
    createdAt: chat.createdAt.toISOString(),
    updatedAt: chat.updatedAt.toISOString(),
  };
  if (chat.status === 'requires_action') {
    response.pendingToolCalls = chat.pendingToolCalls ?? [];
    response.actionExpiresAt = chat.actionExpiresAt?.toISOString() ?? null;
  }
  if (chat.status === 'requires_approval') {
    response.requiredAction = requiredActionOf(chat.pendingToolCalls ?? [], fingerprint);
    response.actionExpiresAt = chat.actionExpiresAt?.toISOString() ?? null;
  }
  return response;
}

/** The write proposals among a chat's pending calls that a caller with this access fingerprint may see. */
export function requiredActionOf(pending: readonly PendingToolCall[], fingerprint: string): RequiredActionResponse {
  const visible = proposalsVisibleTo(pending, fingerprint);
  return {
    type: 'approval',
    proposals: visible.proposals.map((call) => ({
      toolCallId: call.id,
      tool: call.name,
      arguments: call.arguments,
      changes: call.proposal.changes,
      token: call.proposal.token,
      expiresAt: call.proposal.expiresAt,
    })),
    ...(visible.withheld ? { withheld: true as const, reason: WITHHELD_REASON } : {}),
  };
}

export function toMessageResponse(message: ChatMessageRow): ChatMessageResponse {
  return {
    id: message.id,
    role: message.role,
    parts: message.parts,
    ...(message.metadata ? { metadata: message.metadata } : {}),
    ...(message.usage ? { usage: message.usage } : {}),
    createdAt: message.createdAt.toISOString(),
  };
}
