import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsDefined,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  MaxLength,
  Min,
  ValidateIf,
} from 'class-validator';
import { schemaRef } from '../common/openapi.schemas';
import { PaginationQueryDto, QueryInt } from '../common/pagination.dto';
import { AGGREGATE_FUNCTIONS, MAX_AGGREGATIONS, MAX_GROUP_BY_FIELDS, TOTAL_MODES, type TotalMode } from '../data/data.types';
import { MAX_CURSOR_LENGTH } from '../data/keyset';
import { OrderByDto } from '../data/order-by.dto';
import { BATCH_MAX_OPERATIONS } from '../data/record-batch';
import { MAX_SEARCH_LENGTH } from '../data/where.compiler';

/** Query string of GET /records. JSON-valued parameters are parsed and checked by the service. */
export class RecordsQueryDto extends PaginationQueryDto {
  @ApiPropertyOptional({
    maxLength: 20_000,
    description: 'A Where filter as JSON text, e.g. {"stage":"won","amount":{"$gt":1000}}',
  })
  @IsOptional()
  @IsString()
  @MaxLength(20_000)
  where?: string;

  @ApiPropertyOptional({ maxLength: 2_000, description: 'Sort order as JSON text, e.g. [{"field":"amount","order":"desc"}]' })
  @IsOptional()
  @IsString()
  @MaxLength(2_000)
  orderBy?: string;

  @ApiPropertyOptional({ maxLength: 5_000, description: 'Comma-separated field names; id is always included' })
  @IsOptional()
  @IsString()
  @MaxLength(5_000)
  fields?: string;

  @ApiPropertyOptional({
    maxLength: 63,
    description:
      "A saved view's name: its where is ANDed with this request's, its orderBy and fields apply unless this request gives them " +
      '(a view using a field hidden from the caller is view_not_found)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(63)
  view?: string;

  @ApiPropertyOptional({
    maxLength: MAX_SEARCH_LENGTH,
    description:
      'Search: records where any searchable field contains this text, ignoring case and accents (ANDed with where and view)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_SEARCH_LENGTH)
  q?: string;

  @ApiPropertyOptional({
    maxLength: MAX_CURSOR_LENGTH,
    description:
      'Keyset paging: the nextCursor of the previous page, with the same where and orderBy. Pages after a cursor ' +
      'skip and repeat nothing while records are inserted or deleted, cost the same at any depth, and carry no total',
  })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_CURSOR_LENGTH)
  cursor?: string;

  @ApiPropertyOptional({
    enum: TOTAL_MODES,
    default: 'estimate',
    description:
      'The total of an offset page: estimate counts exactly up to RECORDS_COUNT_CAP (default 10000) and gives the ' +
      "planner's estimate beyond (totalExact false); exact counts every match (bounded by QUERY_TIMEOUT_MS); none " +
      'counts nothing and omits total. A page after a cursor has no total',
  })
  @IsOptional()
  @IsIn(TOTAL_MODES)
  total?: TotalMode;
}

/** Query string of GET /fields/:field/values. */
export class FieldValuesQueryDto {
  @ApiPropertyOptional({ maxLength: MAX_SEARCH_LENGTH, description: 'Only values containing this text, ignoring case' })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_SEARCH_LENGTH)
  q?: string;

  @ApiPropertyOptional({ maxLength: 20_000, description: 'Count only records matching this Where filter (JSON text)' })
  @IsOptional()
  @IsString()
  @MaxLength(20_000)
  where?: string;

  @ApiPropertyOptional({
    maxLength: 63,
    description: "Count only the records of this saved view (its where, ANDed with where's)",
  })
  @IsOptional()
  @IsString()
  @MaxLength(63)
  view?: string;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    description: 'Values returned; larger values are clamped to 1000; default 50',
  })
  @QueryInt(1, Number.MAX_SAFE_INTEGER)
  limit?: number;
}

export class FieldValueCount {
  @ApiProperty({
    allOf: [schemaRef('FieldValue')],
    description: 'A value of the field (an option of a multiselect); null counts records without one',
  })
  value: unknown;
  @ApiProperty({ type: 'integer', minimum: 1 }) count: number;
}

export class FieldValuesResponse {
  @ApiProperty({ type: [FieldValueCount], description: 'Most frequent first, then by value' }) values: FieldValueCount[];
}

export class RecordListResponse {
  @ApiProperty({ type: 'array', items: schemaRef('RecordResponse') }) records: Record<string, unknown>[];
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    description:
      "Records matching the filter, all pages: exact up to RECORDS_COUNT_CAP (default 10000), else the planner's " +
      'estimate (see totalExact). Absent on a page after a cursor and with total=none',
  })
  total?: number;
  @ApiPropertyOptional({
    description: "Whether total is a count (true) or the planner's estimate (false); present with total",
  })
  totalExact?: boolean;
  @ApiProperty({ type: 'integer', minimum: 1, description: 'The page size used (after clamping)' }) limit: number;
  @ApiProperty({ type: 'integer', minimum: 0 }) offset: number;
  @ApiProperty({
    type: 'string',
    nullable: true,
    description: 'Cursor of the next page (send it as cursor, with the same where and orderBy); null on the last page',
  })
  nextCursor: string | null;
}

export class AggregateResponse {
  @ApiProperty({
    type: 'array',
    items: { type: 'object', additionalProperties: schemaRef('FieldValue') },
    description:
      'One row per group: the group-by fields and one column per aggregation alias. Over no rows (or no values) ' +
      'count is 0 and sum, avg, min and max are null. min and max keep their field type: a date or datetime ' +
      'field gives an ISO string as records do.',
    example: [{ stage: 'won', total: 125000 }],
  })
  rows: Record<string, unknown>[];
}

/** One aggregation of POST /aggregate (documentation only: the aggregate compiler checks them). */
export class AggregationDto {
  @ApiProperty({ enum: AGGREGATE_FUNCTIONS }) function: string;
  @ApiPropertyOptional({ description: 'The field aggregated; omitted only for count (count of records)' }) field?: string;
  @ApiProperty({ description: 'Name of the result column' }) alias: string;
}

/** Body of POST /aggregate; checked field by field by the data engine. */
export class AggregateDto {
  @ApiPropertyOptional({ allOf: [schemaRef('Where')], description: 'Only records matching this filter' })
  @IsOptional()
  where?: unknown;
  @ApiPropertyOptional({ type: [String], maxItems: MAX_GROUP_BY_FIELDS }) @IsOptional() groupBy?: unknown;
  @ApiProperty({
    type: [AggregationDto],
    minItems: 1,
    maxItems: MAX_AGGREGATIONS,
    example: [{ function: 'sum', field: 'amount', alias: 'total' }],
  })
  @IsDefined()
  aggregations: unknown;
  @ApiPropertyOptional({ type: [OrderByDto], description: 'Top-N when combined with limit' }) @IsOptional() orderBy?: unknown;
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

/** Body of POST /records/batch; each operation is checked by the data engine, which names it by index. */
export class BatchRecordsDto {
  @ApiProperty({
    type: 'array',
    minItems: 1,
    maxItems: BATCH_MAX_OPERATIONS,
    description:
      'Applied in order, in one transaction. create: { op, record }; update: { op, id, record, ifMatch? }; ' +
      'delete: { op, id, ifMatch? }. ifMatch is an ETag as the record was read (e.g. "\\"1234\\""): the operation ' +
      'fails with 412 precondition_failed when the record changed since.',
    items: {
      type: 'object',
      required: ['op'],
      properties: {
        op: { type: 'string', enum: ['create', 'update', 'delete'] },
        id: { type: 'string', format: 'uuid' },
        record: schemaRef('RecordInput'),
        ifMatch: { type: 'string' },
      },
    },
    example: [
      { op: 'create', record: { name: 'Acme' } },
      { op: 'update', id: '7d8e3c55-0f59-4c1e-9d0e-1b0f3f1f9e55', record: { stage: 'won' }, ifMatch: '"1234"' },
      { op: 'delete', id: '0b8f6a5e-7c33-4f7b-8c3e-6f0a3d9a2c11' },
    ],
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(BATCH_MAX_OPERATIONS)
  operations: unknown[];

  @ApiPropertyOptional({
    default: true,
    description: 'true: all or nothing (any failure writes nothing); false: apply what can be applied, report the rest',
  })
  @IsOptional()
  @IsBoolean()
  atomic?: boolean;
}

export class BatchOperationErrorDto {
  @ApiProperty() code: string;
  @ApiProperty() error: string;
  @ApiPropertyOptional({ description: 'The field to blame, when one is' }) field?: string;
}

export class BatchOperationResultDto {
  @ApiProperty({ type: 'integer', minimum: 0, description: 'Position of the operation in the request' }) index: number;
  @ApiProperty({ type: 'string', nullable: true, description: "The record's id (null for a create that failed)" })
  id: string | null;
  @ApiProperty({ type: 'integer', description: '201 created, 200 updated, 204 deleted, or the status of its error' })
  status: number;
  @ApiPropertyOptional({ description: 'The version after the write (creates and updates), as an ETag' }) etag?: string;
  @ApiPropertyOptional({ type: BatchOperationErrorDto }) error?: BatchOperationErrorDto;
}

export class BatchRecordsResponse {
  @ApiProperty({ type: [BatchOperationResultDto] }) results: BatchOperationResultDto[];
  @ApiProperty({
    format: 'uuid',
    description: 'The change set of the batch: undo it as one with POST /api/v1/change-sets/{id}/revert',
  })
  changeSetId: string;
}
