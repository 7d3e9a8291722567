import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDefined, IsOptional, IsString, Matches, MaxLength } from 'class-validator';

/** Query string of GET /records. JSON-valued parameters are parsed and checked by the service. */
export class RecordsQueryDto {
  @ApiPropertyOptional({ description: 'JSON filter, e.g. {"stage":"won","amount":{"$gt":1000}}' })
  @IsOptional() @IsString() @MaxLength(20_000) where?: string;

  @ApiPropertyOptional({ description: 'JSON, e.g. [{"field":"amount","order":"desc"}]' })
  @IsOptional() @IsString() @MaxLength(2_000) orderBy?: string;

  @ApiPropertyOptional({ description: 'Comma-separated field names; id is always included' })
  @IsOptional() @IsString() @MaxLength(5_000) fields?: string;

  @ApiPropertyOptional({ description: 'Page size, 1..1000 (larger values are clamped); default 50' })
  @IsOptional() @Matches(/^\d{1,9}$/, { message: 'limit must be a whole number' }) limit?: string;

  @ApiPropertyOptional({ description: 'Records to skip; default 0' })
  @IsOptional() @Matches(/^\d{1,9}$/, { message: 'offset must be a whole number' }) offset?: string;
}

export class RecordListResponse {
  @ApiProperty({ type: 'array', items: { type: 'object' } }) records: Record<string, unknown>[];
  @ApiProperty() total: number;
  @ApiProperty() limit: number;
  @ApiProperty() offset: number;
}

export class AggregateResponse {
  @ApiProperty({ type: 'array', items: { type: 'object' } }) rows: Record<string, unknown>[];
}

/** Body of POST /aggregate; checked field by field by the data engine. */
export class AggregateDto {
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) @IsOptional() where?: unknown;
  @ApiPropertyOptional({ type: [String] }) @IsOptional() groupBy?: unknown;
  @ApiProperty({ type: 'array', items: { type: 'object' }, example: [{ function: 'sum', field: 'amount', alias: 'total' }] })
  @IsDefined()
  aggregations: unknown;
  @ApiPropertyOptional({ type: 'array', items: { type: 'object' } }) @IsOptional() orderBy?: unknown;
  @ApiPropertyOptional({ description: 'Groups returned, 1..1000; default 50' }) @IsOptional() limit?: unknown;
}
