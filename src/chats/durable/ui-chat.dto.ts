import { ApiProperty, ApiPropertyOptional, PickType } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsIn, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { DomainError } from '../../common/domain-error';
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
    items: { type: 'object' },
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
  @ApiProperty() promptTokens: number;
  @ApiProperty() completionTokens: number;
  @ApiProperty() totalTokens: number;
}

export class UiMessageMetadataResponse implements UiTurnMetadata {
  @ApiPropertyOptional() model?: string;
  @ApiPropertyOptional({ enum: ['stop', 'length', 'max_iterations', 'tool_calls'] })
  finishReason?: UiTurnMetadata['finishReason'];
  @ApiProperty({ type: UiUsageResponse }) usage: UiUsageResponse;
}

export class UiMessageResponse implements UiMessage {
  @ApiProperty() id: string;
  @ApiProperty({ enum: ['user', 'assistant'] }) role: 'user' | 'assistant';
  @ApiProperty({
    description: 'step-start, text and tool-<name> parts (states input-available, output-available, output-error)',
    type: 'array',
    items: { type: 'object' },
  })
  parts: UiPart[];
  @ApiPropertyOptional({ type: UiMessageMetadataResponse, description: 'Of an answer: model, finish reason and usage' })
  metadata?: UiMessageMetadataResponse;
}

export class UiChatMessagesResponse {
  @ApiProperty({ type: [UiMessageResponse] }) messages: UiMessageResponse[];
}
