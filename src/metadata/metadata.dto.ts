import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsNotEmpty,
  IsOptional,
  IsString,
  MaxLength,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { FORMULA_RESULT_TYPES, type FormulaResultType, MAX_EXPRESSION_LENGTH } from './formula';
import { FIELD_TYPES, MAX_FIELDS, RELATED_KINDS, ROLLUP_FUNCTIONS, type RollupFunction } from './object-metadata.types';

/** Types a field definition may have: the stored types, and the computed ones (computed when read). */
export const DEFINITION_TYPES = [...FIELD_TYPES, 'formula', ...RELATED_KINDS] as const;
export type DefinitionType = (typeof DEFINITION_TYPES)[number];

const EXPRESSION_DESCRIPTION =
  'formula only: an expression over the record\'s fields written {field}, e.g. "{amount} * {probability} / 100" ' +
  '(operators + - * / % & = != < <= > >=, functions IF SWITCH AND OR NOT BLANK COALESCE ROUND FLOOR CEIL ABS MIN MAX SUM AVG ' +
  'CONCAT LEFT RIGHT LOWER UPPER LEN TRIM CONTAINS YEAR MONTH DAY WEEKDAY DATE_DIFF DATE_ADD TODAY NOW)';

/** Options of one select or multiselect field. */
const MAX_OPTIONS = 500;

const INDEXED_DESCRIPTION =
  'Create an index on this field, with id after it: sorting records by the field then pages fast at any depth ' +
  'after a cursor (GIN for multiselect and json)';
const SEARCHABLE_DESCRIPTION =
  'Searched by GET .../records?q= (case- and accent-insensitive, trigram-indexed); text-like fields only ' +
  '(text, textarea, email, url, phone, select)';

export class CreateFieldDto {
  @ApiProperty({ example: 'amount', description: 'snake_case, at most 63 characters' })
  @IsString()
  name: string;

  @ApiProperty({ example: 'Amount' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  label: string;

  @ApiProperty({ enum: DEFINITION_TYPES })
  @IsIn(DEFINITION_TYPES)
  type: DefinitionType;

  @ApiPropertyOptional({ description: EXPRESSION_DESCRIPTION })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_EXPRESSION_LENGTH)
  expression?: string;

  @ApiPropertyOptional({ enum: FORMULA_RESULT_TYPES, description: 'formula only: the type of its value' })
  @IsOptional()
  @IsIn(FORMULA_RESULT_TYPES)
  resultType?: FormulaResultType;

  @ApiPropertyOptional() @IsOptional() @IsBoolean() required?: boolean;
  @ApiPropertyOptional() @IsOptional() @IsBoolean() unique?: boolean;
  @ApiPropertyOptional({ description: INDEXED_DESCRIPTION }) @IsOptional() @IsBoolean() indexed?: boolean;
  @ApiPropertyOptional({ description: SEARCHABLE_DESCRIPTION }) @IsOptional() @IsBoolean() searchable?: boolean;

  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;

  @ApiPropertyOptional({ type: [String], description: 'Allowed values; required for select and multiselect' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_OPTIONS)
  @IsString({ each: true })
  @MaxLength(255, { each: true })
  options?: string[];

  @ApiPropertyOptional({ description: 'Target object name; required for lookup and links' })
  @IsOptional()
  @IsString()
  reference?: string;

  @ApiPropertyOptional({
    description:
      'links only: the name of a links field the target object gets, pointing back (both read and write the same pairs)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  inverse?: string;

  @ApiPropertyOptional({
    example: 'deal.account',
    description:
      'rollup and count: "<object>.<lookup field of that object pointing here>" or "<links field of this object>", the related records',
  })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  relation?: string;

  @ApiPropertyOptional({ description: "lookup_value: this object's lookup field whose record's value it shows" })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  through?: string;

  @ApiPropertyOptional({ description: 'rollup (except count) and lookup_value: the field of the related object' })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  field?: string;

  @ApiPropertyOptional({ enum: ROLLUP_FUNCTIONS, description: 'rollup only' })
  @IsOptional()
  @IsString()
  function?: RollupFunction;

  @ApiPropertyOptional({ description: 'rollup and count: a where over the related records (only those it matches)' })
  @IsOptional()
  filter?: Record<string, unknown>;

  @ApiPropertyOptional({
    description:
      'rollup and count: keep the value in a column, updated in the same transaction as every write of a related record, ' +
      'so it can be `indexed`; an object with records is filled by a job (`fillJobId`)',
  })
  @IsOptional()
  @IsBoolean()
  stored?: boolean;
}

export class CreateObjectDto {
  @ApiProperty({ example: 'deal', description: 'snake_case, at most 63 characters' })
  @IsString()
  name: string;

  @ApiProperty({ example: 'Deal' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  label: string;

  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;

  @ApiPropertyOptional({ type: [CreateFieldDto] })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_FIELDS)
  @ValidateNested({ each: true })
  @Type(() => CreateFieldDto)
  fields?: CreateFieldDto[];
}

/**
 * For PATCH properties that have no null value: absent leaves the property as it is, null is refused
 * like any other wrong type (IsOptional would let it through to the service as "set to null").
 */
const NotNullIfPresent = () => ValidateIf((_dto: object, value: unknown) => value !== undefined);

export class UpdateObjectDto {
  @ApiPropertyOptional() @NotNullIfPresent() @IsString() @IsNotEmpty() @MaxLength(255) label?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;
}

export class UpdateFieldDto {
  @ApiPropertyOptional() @NotNullIfPresent() @IsString() @IsNotEmpty() @MaxLength(255) label?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;
  @ApiPropertyOptional() @NotNullIfPresent() @IsBoolean() required?: boolean;
  @ApiPropertyOptional() @NotNullIfPresent() @IsBoolean() unique?: boolean;
  @ApiPropertyOptional({ description: INDEXED_DESCRIPTION }) @NotNullIfPresent() @IsBoolean() indexed?: boolean;
  @ApiPropertyOptional({ description: SEARCHABLE_DESCRIPTION }) @NotNullIfPresent() @IsBoolean() searchable?: boolean;

  @ApiPropertyOptional({ type: [String] })
  @NotNullIfPresent()
  @IsArray()
  @ArrayMaxSize(MAX_OPTIONS)
  @IsString({ each: true })
  @MaxLength(255, { each: true })
  options?: string[];

  @ApiPropertyOptional({ description: EXPRESSION_DESCRIPTION })
  @NotNullIfPresent()
  @IsString()
  @MaxLength(MAX_EXPRESSION_LENGTH)
  expression?: string;

  @ApiPropertyOptional({ enum: FORMULA_RESULT_TYPES, description: 'formula only: the type of its value' })
  @NotNullIfPresent()
  @IsIn(FORMULA_RESULT_TYPES)
  resultType?: FormulaResultType;
}

export class FieldResponse {
  @ApiProperty() name: string;
  @ApiProperty() label: string;
  @ApiProperty({ enum: DEFINITION_TYPES }) type: DefinitionType;
  @ApiProperty() required: boolean;
  @ApiProperty() unique: boolean;
  @ApiProperty() indexed: boolean;
  @ApiProperty({ description: SEARCHABLE_DESCRIPTION }) searchable: boolean;
  @ApiPropertyOptional() description?: string;
  @ApiPropertyOptional({ type: [String] }) options?: string[];
  @ApiPropertyOptional() reference?: string;
  @ApiPropertyOptional({ description: 'links: the links field of the target object reading the same pairs' }) inverse?: string;
  @ApiPropertyOptional({ description: EXPRESSION_DESCRIPTION }) expression?: string;
  @ApiPropertyOptional({ description: 'formula, rollup, count, lookup_value: the type of its value' }) resultType?: string;
  @ApiPropertyOptional() relation?: string;
  @ApiPropertyOptional() through?: string;
  @ApiPropertyOptional() field?: string;
  @ApiPropertyOptional({ enum: ROLLUP_FUNCTIONS }) function?: RollupFunction;
  @ApiPropertyOptional() filter?: Record<string, unknown>;
  @ApiPropertyOptional({ description: 'rollup and count: the value is kept in a column' }) stored?: boolean;
  @ApiPropertyOptional({ description: 'stored: every record holds its value (until then it is computed when read)' })
  filled?: boolean;
  @ApiPropertyOptional({ description: 'stored, added to an object with records: the job filling it (GET /api/v1/jobs/:id)' })
  fillJobId?: string;
}

export class ObjectResponse {
  @ApiProperty() name: string;
  @ApiProperty() label: string;
  @ApiProperty({ type: 'string', nullable: true }) description: string | null;
  @ApiProperty({ type: [FieldResponse] }) fields: FieldResponse[];
}

export class ObjectSummaryResponse {
  @ApiProperty() name: string;
  @ApiProperty() label: string;
  @ApiProperty({ type: 'string', nullable: true }) description: string | null;
  @ApiProperty({ type: 'integer', minimum: 0 }) fieldCount: number;
}

export class ObjectListResponse {
  @ApiProperty({ type: [ObjectSummaryResponse] }) objects: ObjectSummaryResponse[];
}
