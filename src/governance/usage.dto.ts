import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsISO8601, IsOptional, IsString, IsUUID, MaxLength } from 'class-validator';

export const USAGE_GROUP_BY = ['key', 'agent', 'day'] as const;
export type UsageGroupBy = (typeof USAGE_GROUP_BY)[number];

/** Most rows one usage report answers with (groups); a longer report is cut, oldest or smallest last. */
export const MAX_USAGE_ROWS = 1000;

export class UsageQueryDto {
  @ApiPropertyOptional({ enum: USAGE_GROUP_BY, default: 'key', description: 'One row per key, per agent, or per UTC day' })
  @IsOptional()
  @IsIn(USAGE_GROUP_BY)
  groupBy?: UsageGroupBy;

  @ApiPropertyOptional({
    format: 'date-time',
    description: 'Model calls at or after this time (ISO 8601; a date is its UTC midnight)',
  })
  @IsOptional()
  @IsISO8601({ strict: true })
  from?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'Model calls before this time (ISO 8601, exclusive)' })
  @IsOptional()
  @IsISO8601({ strict: true })
  to?: string;

  @ApiPropertyOptional({ format: 'uuid', description: "Only this key's calls (a member key always sees its own only)" })
  @IsOptional()
  @IsUUID()
  keyId?: string;

  @ApiPropertyOptional({ description: "Only this agent's calls" })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  agent?: string;
}

export class UsageRowResponse {
  @ApiPropertyOptional({ format: 'uuid', nullable: true, description: 'groupBy=key (null: calls of no key, the server itself)' })
  keyId?: string | null;
  @ApiPropertyOptional({ nullable: true, description: 'groupBy=agent' }) agent?: string | null;
  @ApiPropertyOptional({ format: 'date', description: 'groupBy=day: the UTC day' }) day?: string;
  @ApiProperty({ description: 'Model calls' }) calls: number;
  @ApiProperty() promptTokens: number;
  @ApiProperty() completionTokens: number;
  @ApiProperty() totalTokens: number;
}

export class UsageReportResponse {
  @ApiProperty({ type: [UsageRowResponse] }) rows: UsageRowResponse[];
}
