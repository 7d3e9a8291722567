import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsObject,
  IsOptional,
  IsString,
  MaxLength,
  ValidateNested,
} from 'class-validator';
import { JSON_OBJECT, JSON_VALUE } from '../../common/openapi.schemas';
import { ChatContextDto } from '../../runtime/chat-context.dto';
import { GroundingResponse } from '../../runtime/grounding.dto';
import { ChatOptionsDto } from '../../runtime/chat-options.dto';
import { MAX_CONVERSATION_MESSAGES } from '../../runtime/conversation';

/** One message of the history (documentation only: the service checks each). */
export class StatelessChatMessageDto {
  @ApiProperty({ enum: ['user', 'assistant'] }) role: 'user' | 'assistant';
  @ApiPropertyOptional({ maxLength: 100_000, description: 'The text; or, from AI SDK clients, parts instead' })
  content?: string;
  @ApiPropertyOptional({
    type: 'array',
    items: JSON_OBJECT,
    description:
      'AI SDK UI message parts: text parts, and tool parts with their output (`tool-<name>`, `dynamic-tool`), which reach the model as its earlier tool calls and results; other parts are ignored',
  })
  parts?: Record<string, unknown>[];
}

export class StatelessChatDto {
  @ApiProperty({ type: [StatelessChatMessageDto], minItems: 1, maxItems: 500 })
  @IsArray()
  @ArrayNotEmpty({ message: 'messages must contain at least one message' })
  @ArrayMaxSize(MAX_CONVERSATION_MESSAGES)
  messages: unknown[];

  @ApiPropertyOptional({ type: ChatContextDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => ChatContextDto)
  context?: ChatContextDto;

  /** Checked by the runtime against ChatOptionsDto; keys other than its three are ignored, never forwarded. */
  @ApiPropertyOptional({ type: ChatOptionsDto, description: "maxTokens may not exceed the agent's; other keys are ignored" })
  @IsOptional()
  @IsObject()
  options?: Record<string, unknown>;

  @ApiPropertyOptional({
    description:
      'Stream the Vercel AI SDK UI message stream (v1). Absent: streams for AI SDK clients (a body with `trigger`, or `Accept: text/event-stream`), JSON otherwise',
  })
  @IsOptional()
  @IsBoolean()
  stream?: boolean;

  /** Sent by AI SDK `useChat` clients: the chat id is ignored (nothing is kept); a trigger asks for the stream. */
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(200) id?: string;
  @ApiPropertyOptional({
    description: 'Sent by AI SDK `useChat` (`submit-message`, `regenerate-message`); the answer then streams',
  })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  trigger?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(200) messageId?: string;
}

export class ChatUsageResponse {
  @ApiProperty({ type: 'integer', minimum: 0 }) promptTokens: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) completionTokens: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) totalTokens: number;
}

export class ChatToolCallResponse {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty({ ...JSON_VALUE, description: 'The arguments the model sent' }) arguments: unknown;
  @ApiProperty({ ...JSON_VALUE, description: 'What the tool returned, or { error } when isError' })
  result: unknown;
  @ApiProperty() isError: boolean;
}

export class StatelessChatResponse {
  @ApiProperty() content: string;
  @ApiProperty() model: string;
  @ApiProperty({ enum: ['stop', 'length', 'max_iterations'] }) finishReason: 'stop' | 'length' | 'max_iterations';
  @ApiProperty({ type: [ChatToolCallResponse] }) toolCalls: ChatToolCallResponse[];
  @ApiProperty({ type: ChatUsageResponse }) usage: ChatUsageResponse;
  @ApiPropertyOptional({
    type: GroundingResponse,
    description: "Which numbers of the answer the turn's tool results support; absent when the agent's grounding is off",
  })
  grounding?: GroundingResponse;
}
