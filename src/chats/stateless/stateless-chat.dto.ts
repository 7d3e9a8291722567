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
import { ChatContextDto } from '../../runtime/chat-context.dto';
import { ChatOptionsDto } from '../../runtime/chat-options.dto';
import { MAX_CONVERSATION_MESSAGES } from '../../runtime/conversation';

export class StatelessChatDto {
  @ApiProperty({
    type: 'array',
    items: {
      type: 'object',
      properties: {
        role: { enum: ['user', 'assistant'] },
        content: { type: 'string' },
        parts: { type: 'array', items: { type: 'object', additionalProperties: true } },
      },
    },
    description:
      '`{ role, content }` messages or AI SDK UI messages (`{ role, parts }`: text parts, and tool parts with their output, which reach the model as its earlier tool calls and results)',
  })
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

export class StatelessChatResponse {
  @ApiProperty() content: string;
  @ApiProperty() model: string;
  @ApiProperty({ enum: ['stop', 'length', 'max_iterations'] }) finishReason: 'stop' | 'length' | 'max_iterations';
  @ApiProperty({ type: [ChatToolCallResponse] }) toolCalls: ChatToolCallResponse[];
  @ApiProperty({ type: ChatUsageResponse }) usage: ChatUsageResponse;
}
