import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsBoolean, IsNotEmpty, IsObject, IsOptional, IsString, MaxLength } from 'class-validator';
import { schemaRef } from '../common/openapi.schemas';
import { OrderByDto } from '../data/order-by.dto';
import { MAX_GROUP_BY_FIELDS } from '../data/data.types';
import { DEFAULT_MAX_ORDER_BY_FIELDS, MAX_PROJECTION_ITEMS } from '../data/order-by.compiler';
import type { ViewRow } from './view.entity';

/** Body of PUT /views/:view: everything but the name. Checked against the object's fields by ViewService. */
export class ReplaceViewDto {
  @ApiProperty({ example: 'Open deals' }) @IsString() @IsNotEmpty() @MaxLength(255) label: string;

  @ApiPropertyOptional({ description: 'What the view shows and why; the agent reads it as data' })
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  description?: string;

  @ApiPropertyOptional({ allOf: [schemaRef('Where')], description: 'Only records matching this filter' })
  @IsOptional()
  @IsObject()
  where?: Record<string, unknown>;

  @ApiPropertyOptional({ type: [OrderByDto], maxItems: DEFAULT_MAX_ORDER_BY_FIELDS })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(DEFAULT_MAX_ORDER_BY_FIELDS)
  orderBy?: unknown[];

  @ApiPropertyOptional({ type: [String], maxItems: MAX_PROJECTION_ITEMS, description: 'Visible fields, in order' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_PROJECTION_ITEMS)
  @IsString({ each: true })
  @MaxLength(63, { each: true })
  fields?: string[];

  @ApiPropertyOptional({ type: [String], maxItems: MAX_GROUP_BY_FIELDS, description: 'Fields the grid groups rows by' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_GROUP_BY_FIELDS)
  @IsString({ each: true })
  @MaxLength(63, { each: true })
  groupBy?: string[];

  @ApiPropertyOptional({
    default: false,
    description: 'true: a shared view every reader of the object sees (admins only); false: only its owner sees it',
  })
  @IsOptional()
  @IsBoolean()
  shared?: boolean;
}

export class CreateViewDto extends ReplaceViewDto {
  @ApiProperty({ example: 'open_deals', description: 'snake_case, at most 63 characters; unique per object and owner' })
  @IsString()
  name: string;
}

export class ViewResponse {
  @ApiProperty() name: string;
  @ApiProperty() label: string;
  @ApiPropertyOptional() description?: string;
  @ApiPropertyOptional({ allOf: [schemaRef('Where')] }) where?: Record<string, unknown>;
  @ApiPropertyOptional({ type: [OrderByDto] }) orderBy?: unknown[];
  @ApiPropertyOptional({ type: [String] }) fields?: string[];
  @ApiPropertyOptional({ type: [String] }) groupBy?: string[];
  @ApiProperty({ description: 'A shared view (managed by admins) rather than one of the caller' }) shared: boolean;
}

export class ViewListResponse {
  @ApiProperty({ type: [ViewResponse] }) views: ViewResponse[];
}

export function toViewResponse(row: ViewRow): ViewResponse {
  const { name, label, ...parts } = viewDefinition(row);
  return { name, label, shared: row.ownerKeyId === null, ...parts };
}

/** What a view is, whoever owns it: its name and label, and the parts it has (absent ones left out). */
export type ViewDefinition = Omit<ViewResponse, 'shared'>;

export function viewDefinition(row: ViewRow): ViewDefinition {
  const definition: ViewDefinition = { name: row.name, label: row.label };
  if (row.description) definition.description = row.description;
  if (row.where) definition.where = row.where;
  if (row.orderBy) definition.orderBy = row.orderBy;
  if (row.fields) definition.fields = row.fields;
  if (row.groupBy) definition.groupBy = row.groupBy;
  return definition;
}
