import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsISO8601, IsOptional, IsString, IsUUID, Matches, MaxLength } from 'class-validator';
import { QueryInt } from '../common/pagination.dto';

export const AUDIT_KINDS = ['tool', 'admin'] as const;
export type AuditKind = (typeof AUDIT_KINDS)[number];

export const DEFAULT_AUDIT_LIMIT = 100;
export const MAX_AUDIT_LIMIT = 1000;

export class AuditQueryDto {
  @ApiPropertyOptional({ enum: AUDIT_KINDS, description: 'Tool calls or admin changes; both when absent' })
  @IsOptional()
  @IsIn(AUDIT_KINDS)
  kind?: AuditKind;

  @ApiPropertyOptional({ format: 'uuid', description: 'Only entries of this API key' })
  @IsOptional()
  @IsUUID()
  keyId?: string;

  @ApiPropertyOptional({ description: 'Only tool calls made for this agent' })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  agent?: string;

  @ApiPropertyOptional({ format: 'uuid', description: 'Only tool calls of this durable chat' })
  @IsOptional()
  @IsUUID()
  chatId?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'Entries at or after this time (ISO 8601)' })
  @IsOptional()
  @IsISO8601({ strict: true })
  from?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'Entries before this time (ISO 8601, exclusive)' })
  @IsOptional()
  @IsISO8601({ strict: true })
  to?: string;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    default: DEFAULT_AUDIT_LIMIT,
    description: `Entries per page, newest first; larger values are clamped to ${MAX_AUDIT_LIMIT}`,
  })
  @QueryInt(1, Number.MAX_SAFE_INTEGER)
  limit?: number;

  @ApiPropertyOptional({ description: 'nextCursor of the previous page' })
  @IsOptional()
  @IsString()
  @Matches(/^\d{1,18}$/, { message: 'cursor must be the nextCursor of a previous page' })
  cursor?: string;
}

export class AuditEntryResponse {
  @ApiProperty({ description: 'Increases with every entry' }) id: string;
  @ApiProperty({ format: 'date-time' }) at: string;
  @ApiProperty({ enum: AUDIT_KINDS }) kind: AuditKind;
  @ApiProperty({ format: 'uuid', nullable: true, description: 'The API key (null: the server itself)' }) keyId: string | null;
  @ApiPropertyOptional({ description: 'Tool calls: the agent they were made for' }) agent?: string;
  @ApiPropertyOptional({ format: 'uuid', description: 'Tool calls: the durable chat' }) chatId?: string;
  @ApiPropertyOptional({
    description: 'Tool calls: the id of the call; a write proposal, its decision and its write share it',
  })
  toolCallId?: string;
  @ApiPropertyOptional({ description: 'Tool calls: the tool' }) tool?: string;
  @ApiPropertyOptional({ description: 'Admin changes: what was done, e.g. object.create' }) action?: string;
  @ApiPropertyOptional({ description: 'Admin changes: what it was done to, e.g. deal or deal.amount' }) target?: string;
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'Tool calls: the arguments, without values of fields hidden from the caller',
  })
  arguments?: unknown;
  @ApiPropertyOptional({ description: 'Tool calls: records or rows returned' }) rowCount?: number;
  @ApiPropertyOptional({ description: 'Tool calls: duration' }) durationMs?: number;
  @ApiProperty({ description: '`ok`, or the error code the call ended with' }) outcome: string;
}

export class AuditListResponse {
  @ApiProperty({ type: [AuditEntryResponse] }) entries: AuditEntryResponse[];
  @ApiPropertyOptional({ description: 'Present when older entries remain: pass it as cursor' }) nextCursor?: string;
}
