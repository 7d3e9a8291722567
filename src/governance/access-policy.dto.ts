import { ApiProperty, ApiPropertyOptional, type ApiPropertyOptions } from '@nestjs/swagger';
import { IsNotEmpty, IsObject, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import type { AccessPolicyRow } from './access-policy.entity';
import type { PolicyObjects } from './access-policy.types';

/** Policy names: like object names, plus `-`. */
export const POLICY_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

const OBJECTS_SCHEMA: ApiPropertyOptions = {
  type: 'object',
  description:
    'Object name (or "*" for every object; a named entry replaces "*" for that object) → what the policy grants on it: ' +
    '{ read?, create?, update?, delete? (booleans, default false), rowFilter? (a where object; "$subject" is the key\'s ' +
    'subject, "$attr.<name>" one of its attributes), hiddenFields? (field names) }.',
  additionalProperties: {
    type: 'object',
    properties: {
      read: { type: 'boolean' },
      create: { type: 'boolean' },
      update: { type: 'boolean' },
      delete: { type: 'boolean' },
      rowFilter: { type: 'object', additionalProperties: true, example: { owner: '$subject' } },
      hiddenFields: { type: 'array', items: { type: 'string' } },
    },
    additionalProperties: false,
  },
  example: { deal: { read: true, update: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount'] } },
};

export class CreatePolicyDto {
  @ApiProperty({ example: 'sales-rep', pattern: POLICY_NAME_PATTERN.source })
  @IsString()
  @Matches(POLICY_NAME_PATTERN, { message: 'name must be lowercase letters, digits, _ or -, starting with a letter, at most 63' })
  name: string;

  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;

  @ApiProperty(OBJECTS_SCHEMA)
  @IsObject()
  objects: PolicyObjects;
}

export class ReplacePolicyDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @IsNotEmpty() @MaxLength(2000) description?: string;

  @ApiProperty(OBJECTS_SCHEMA)
  @IsObject()
  objects: PolicyObjects;
}

export class PolicyResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() name: string;
  @ApiProperty({ type: String, nullable: true }) description: string | null;
  @ApiProperty(OBJECTS_SCHEMA) objects: PolicyObjects;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) updatedAt: string;
}

export class PolicyListResponse {
  @ApiProperty({ type: [PolicyResponse] }) policies: PolicyResponse[];
}

export function toPolicyResponse(row: AccessPolicyRow): PolicyResponse {
  return {
    id: row.id,
    name: row.name,
    description: row.description ?? null,
    objects: row.objects,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
