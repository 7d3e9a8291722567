import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ERRORS, type ErrorCode } from './error-codes';
import { JSON_VALUE } from './openapi.schemas';

/** The body of every error response, as HttpExceptionFilter writes it. */
export class ErrorResponse {
  @ApiProperty({ description: 'What went wrong, for people', example: 'Object "dael" not found' })
  error: string;

  @ApiProperty({
    enum: Object.keys(ERRORS),
    enumName: 'ErrorCode',
    description: 'What went wrong, for programs: stable snake_case codes',
    example: 'object_not_found',
  })
  code: ErrorCode;

  @ApiPropertyOptional({
    ...JSON_VALUE,
    description: 'More about the error, by code (e.g. availableFields of unknown_field, requestId of internal_error)',
  })
  details?: unknown;
}
