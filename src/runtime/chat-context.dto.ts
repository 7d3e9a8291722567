import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';

/** Where the user is in the UI; each present value becomes one line of the system message. */
export interface ChatContext {
  objectName?: string;
  recordId?: string;
  viewName?: string;
}

/** One line of text, no line breaks: context values go into the system message. */
const SINGLE_LINE = /^[^\r\n]*$/;

/** The `context` of a chat request, on every front door that takes one. */
export class ChatContextDto implements ChatContext {
  @ApiPropertyOptional({ example: 'deal' })
  @IsOptional()
  @IsString()
  @Matches(IDENTIFIER_PATTERN, { message: 'context.objectName must be an object name' })
  objectName?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @Matches(SINGLE_LINE, { message: 'context.recordId must be one line' })
  recordId?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @Matches(SINGLE_LINE, { message: 'context.viewName must be one line' })
  viewName?: string;
}
