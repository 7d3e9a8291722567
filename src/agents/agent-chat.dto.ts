import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize, ArrayNotEmpty, IsArray, IsBoolean, IsObject, IsOptional, IsString, Matches, MaxLength, ValidateNested,
} from 'class-validator';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import type { ChatContext } from './agent-runtime.service';

/** One line of text, no line breaks: context values go into the system message. */
const SINGLE_LINE = /^[^\r\n]*$/;

export class ChatContextDto implements ChatContext {
  @ApiPropertyOptional({ example: 'deal' })
  @IsOptional() @IsString() @Matches(IDENTIFIER_PATTERN, { message: 'context.objectName must be an object name' }) objectName?: string;

  @ApiPropertyOptional()
  @IsOptional() @IsString() @MaxLength(200) @Matches(SINGLE_LINE, { message: 'context.recordId must be one line' }) recordId?: string;

  @ApiPropertyOptional()
  @IsOptional() @IsString() @MaxLength(200) @Matches(SINGLE_LINE, { message: 'context.viewName must be one line' }) viewName?: string;
}

export class AgentChatDto {
  @ApiProperty({ type: 'array', items: { type: 'object', properties: { role: { enum: ['user', 'assistant'] }, content: { type: 'string' } } } })
  @IsArray()
  @ArrayNotEmpty({ message: 'messages must contain at least one message' })
  @ArrayMaxSize(500)
  messages: unknown[];

  @ApiPropertyOptional({ type: ChatContextDto })
  @IsOptional() @ValidateNested() @Type(() => ChatContextDto) context?: ChatContextDto;

  @ApiPropertyOptional({ description: 'temperature (0..2), maxTokens (positive integer, not above the agent\'s), stop (string or up to 4 strings); other keys are ignored' })
  @IsOptional() @IsObject() options?: Record<string, unknown>;

  @ApiPropertyOptional({ default: false, description: 'Stream the Vercel AI SDK UI message stream (v1)' })
  @IsOptional() @IsBoolean() stream?: boolean;

  /** Sent by AI SDK `useChat` clients; accepted and ignored. */
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(200) id?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(200) trigger?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(200) messageId?: string;
}

export class ChatUsageResponse {
  @ApiProperty() promptTokens: number;
  @ApiProperty() completionTokens: number;
  @ApiProperty() totalTokens: number;
}

export class ChatToolCallResponse {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty() arguments: unknown;
  @ApiProperty() result: unknown;
  @ApiProperty() isError: boolean;
}

export class AgentChatResponse {
  @ApiProperty() content: string;
  @ApiProperty() model: string;
  @ApiProperty({ enum: ['stop', 'length', 'max_iterations'] }) finishReason: 'stop' | 'length' | 'max_iterations';
  @ApiProperty({ type: [ChatToolCallResponse] }) toolCalls: ChatToolCallResponse[];
  @ApiProperty({ type: ChatUsageResponse }) usage: ChatUsageResponse;
}
