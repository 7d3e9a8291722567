import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDefined, IsInt, IsOptional, IsString, MaxLength, Min, ValidateIf } from 'class-validator';
import { PaginationQueryDto } from '../common/pagination.dto';

/** Query string of GET /records. JSON-valued parameters are parsed and checked by the service. */
export class RecordsQueryDto extends PaginationQueryDto {
  @ApiPropertyOptional({ description: 'JSON filter, e.g. {"stage":"won","amount":{"$gt":1000}}' })
  @IsOptional()
  @IsString()
  @MaxLength(20_000)
  where?: string;

  @ApiPropertyOptional({ description: 'JSON, e.g. [{"field":"amount","order":"desc"}]' })
  @IsOptional()
  @IsString()
  @MaxLength(2_000)
  orderBy?: string;

  @ApiPropertyOptional({ description: 'Comma-separated field names; id is always included' })
  @IsOptional()
  @IsString()
  @MaxLength(5_000)
  fields?: string;
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
  /** null is refused like any other non-number, hence ValidateIf rather than IsOptional. */
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    description: 'Groups returned; larger values are clamped to 1000; default 50',
  })
  @ValidateIf((dto: AggregateDto) => dto.limit !== undefined)
  @IsInt({ message: 'limit must be a positive whole number' })
  @Min(1, { message: 'limit must be a positive whole number' })
  limit?: number;
}
