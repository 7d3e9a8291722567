import { ApiProperty, ApiPropertyOptional, type ApiPropertyOptions } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsIn, IsNotEmpty, IsObject, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { AGGREGATE_FUNCTIONS } from '../data/data.types';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import type { MetricDefinitionRow } from './metric-definition.entity';
import {
  MAX_METRIC_DIMENSIONS,
  MAX_METRIC_SYNONYMS,
  METRIC_TYPES,
  type MetricDefinition,
  type MetricMeasure,
  type MetricType,
} from './metric.types';

const MEASURE_SCHEMA: ApiPropertyOptions = {
  type: 'object',
  description: 'Simple metrics only: what is computed over the records. count without a field counts records.',
  properties: { function: { type: 'string', enum: [...AGGREGATE_FUNCTIONS] }, field: { type: 'string' } },
  required: ['function'],
  additionalProperties: false,
  example: { function: 'sum', field: 'amount' },
};

const FILTER_SCHEMA: ApiPropertyOptions = {
  type: 'object',
  additionalProperties: true,
  description: 'Simple metrics only: a where object; only the records it matches are measured.',
  example: { stage: 'won' },
};

/** The body of PUT /metrics/:name: a whole definition but its name. */
export class ReplaceMetricDto {
  @ApiProperty({ example: 'Won revenue' }) @IsString() @IsNotEmpty() @MaxLength(255) label: string;

  @ApiPropertyOptional({ description: 'What the metric means, written for the model and for people' })
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  description?: string;

  @ApiProperty({ example: 'deal', description: 'The object whose records the metric measures' })
  @IsString()
  @MaxLength(63)
  object: string;

  @ApiProperty({ enum: METRIC_TYPES }) @IsIn(METRIC_TYPES) type: MetricType;

  @ApiPropertyOptional(MEASURE_SCHEMA) @IsOptional() @IsObject() measure?: MetricMeasure;

  @ApiPropertyOptional(FILTER_SCHEMA) @IsOptional() @IsObject() filter?: Record<string, unknown>;

  @ApiPropertyOptional({ description: 'Ratio only: the metric divided (a simple metric of the same object)' })
  @IsOptional()
  @IsString()
  @MaxLength(63)
  numerator?: string;

  @ApiPropertyOptional({ description: 'Ratio only: the metric divided by (a simple metric of the same object)' })
  @IsOptional()
  @IsString()
  @MaxLength(63)
  denominator?: string;

  @ApiPropertyOptional({ description: 'A date or datetime field: what time grains and from/to apply to', example: 'close_date' })
  @IsOptional()
  @IsString()
  @MaxLength(63)
  timeField?: string;

  @ApiPropertyOptional({
    type: [String],
    description:
      'What the metric may be grouped and filtered by: fields ("owner") or fields through a lookup ("account.industry")',
    example: ['owner', 'account.industry'],
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_METRIC_DIMENSIONS)
  @IsString({ each: true })
  @MaxLength(127, { each: true })
  dimensions?: string[];

  @ApiPropertyOptional({ type: [String], description: 'Other words people use for it', example: ['revenue', 'bookings'] })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_METRIC_SYNONYMS)
  @IsString({ each: true })
  @MaxLength(100, { each: true })
  synonyms?: string[];
}

export class CreateMetricDto extends ReplaceMetricDto {
  @ApiProperty({ example: 'won_revenue', pattern: IDENTIFIER_PATTERN.source, description: 'snake_case, at most 63 characters' })
  @IsString()
  @Matches(IDENTIFIER_PATTERN, {
    message: 'name must be snake_case (a-z, 0-9, _), starting with a letter, at most 63 characters',
  })
  name: string;
}

export class MetricResponse {
  @ApiProperty() name: string;
  @ApiProperty() label: string;
  @ApiPropertyOptional() description?: string;
  @ApiProperty() object: string;
  @ApiProperty({ enum: METRIC_TYPES }) type: MetricType;
  @ApiPropertyOptional(MEASURE_SCHEMA) measure?: MetricMeasure;
  @ApiPropertyOptional(FILTER_SCHEMA) filter?: Record<string, unknown>;
  @ApiPropertyOptional() numerator?: string;
  @ApiPropertyOptional() denominator?: string;
  @ApiPropertyOptional() timeField?: string;
  @ApiProperty({ type: [String] }) dimensions: string[];
  @ApiProperty({ type: [String] }) synonyms: string[];
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) updatedAt: string;
}

export class MetricListResponse {
  @ApiProperty({ type: [MetricResponse] }) metrics: MetricResponse[];
}

/** The stored row as a definition (absent parts left out). */
export function toMetricDefinition(row: MetricDefinitionRow): MetricDefinition {
  const definition: MetricDefinition = {
    name: row.name,
    label: row.label,
    object: row.object,
    type: row.type as MetricType,
    dimensions: row.dimensions,
    synonyms: row.synonyms,
  };
  if (row.description) definition.description = row.description;
  if (row.measure) definition.measure = row.measure;
  if (row.filter) definition.filter = row.filter;
  if (row.numerator) definition.numerator = row.numerator;
  if (row.denominator) definition.denominator = row.denominator;
  if (row.timeField) definition.timeField = row.timeField;
  return definition;
}

export function toMetricResponse(row: MetricDefinitionRow): MetricResponse {
  return { ...toMetricDefinition(row), createdAt: row.createdAt.toISOString(), updatedAt: row.updatedAt.toISOString() };
}
