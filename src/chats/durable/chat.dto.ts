import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsNotEmpty,
  IsOptional,
  IsString,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { QueryInt } from '../../common/pagination.dto';
import { ChatContextDto } from '../../runtime/chat-context.dto';
import { CHAT_STATUSES, type ChatMessageRow, type ChatRow, type ChatStatus, type PendingToolCall } from './chat.types';

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
    items: { type: 'object' },
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
  @ApiProperty({ description: 'Any JSON value, null included (text for freeform tools)' }) @Allow() output: unknown;
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

export class PendingToolCallResponse {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty() arguments: unknown;
}

export class ChatResponse {
  @ApiProperty() id: string;
  @ApiProperty({
    nullable: true,
    type: String,
    description: 'The id an AI SDK client gave the chat (POST /api/v1/ai/agents/:agentName/chats); null otherwise',
  })
  clientId: string | null;
  @ApiProperty() agent: string;
  @ApiProperty({ nullable: true }) title: string | null;
  @ApiProperty({ enum: CHAT_STATUSES }) status: ChatStatus;
  @ApiProperty({ nullable: true, type: 'object', additionalProperties: true }) context: Record<string, string> | null;
  @ApiPropertyOptional({ type: [PendingToolCallResponse] }) pendingToolCalls?: PendingToolCall[];
  @ApiPropertyOptional({ nullable: true }) actionExpiresAt?: string | null;
  @ApiProperty({ nullable: true, type: 'object', additionalProperties: true }) lastError: {
    code: string;
    message: string;
  } | null;
  @ApiProperty() createdAt: string;
  @ApiProperty() updatedAt: string;
}

export class ChatListResponse {
  @ApiProperty({ type: [ChatResponse] }) chats: ChatResponse[];
}

export class ChatMessageResponse {
  @ApiProperty() id: number;
  @ApiProperty({ enum: ['user', 'assistant', 'tool'] }) role: string;
  @ApiProperty({ type: 'array', items: { type: 'object' } }) parts: unknown[];
  @ApiProperty() createdAt: string;
}

export class ChatMessagesResponse {
  @ApiProperty({ type: [ChatMessageResponse] }) messages: ChatMessageResponse[];
}

export function toChatResponse(chat: ChatRow): ChatResponse {
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
  return response;
}

export function toMessageResponse(message: ChatMessageRow): ChatMessageResponse {
  return { id: message.id, role: message.role, parts: message.parts, createdAt: message.createdAt.toISOString() };
}
