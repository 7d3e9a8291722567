import { ApiProperty, ApiPropertyOptional, PickType, type ApiPropertyOptions } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  IsArray,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
} from 'class-validator';
import { API_KEY_ROLES, ApiKey, type ApiKeyRole, type KeyAttributes } from './api-key.entity';

/** Most policies one key runs under. */
export const MAX_KEY_POLICIES = 20;
/** Most attributes one key carries. */
export const MAX_KEY_ATTRIBUTES = 50;

const POLICIES_DOC: ApiPropertyOptions = {
  description: 'Names of the access policies the key runs under (the union of their grants). None: every right of its role.',
  type: [String],
  maxItems: MAX_KEY_POLICIES,
};
/** Largest per-key daily token quota (the column is a 32-bit integer). */
export const MAX_TOKENS_PER_DAY = 2_000_000_000;

const TOKENS_PER_DAY_DOC: ApiPropertyOptions = {
  description:
    'Model tokens the key may use per UTC day (every agent together), overriding QUOTA_TOKENS_PER_KEY_DAY; null: that default.',
  type: 'integer',
  nullable: true,
  minimum: 0,
  maximum: MAX_TOKENS_PER_DAY,
};
const ATTRIBUTES_DOC: ApiPropertyOptions = {
  description: 'Values that row filters read as "$attr.<name>" (strings or numbers), e.g. {"region": "emea"}.',
  type: 'object',
  additionalProperties: { oneOf: [{ type: 'string' }, { type: 'number' }] },
  example: { region: 'emea' },
};

export class CreateApiKeyDto {
  @ApiProperty({ example: 'analyst laptop' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  name: string;

  @ApiProperty({ enum: API_KEY_ROLES })
  @IsIn(API_KEY_ROLES)
  role: ApiKeyRole;

  @ApiPropertyOptional({
    description:
      'Who the key acts for (owner of chats; not starting with "oidc:", which names users). Defaults to a value derived from the key id.',
  })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  subject?: string;

  @ApiPropertyOptional(POLICIES_DOC)
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_KEY_POLICIES)
  @IsString({ each: true })
  @Matches(/^[a-z][a-z0-9_-]{0,62}$/, { each: true, message: 'each policy is a policy name' })
  policies?: string[];

  @ApiPropertyOptional(ATTRIBUTES_DOC)
  @IsOptional()
  @IsObject()
  attributes?: KeyAttributes;

  @ApiPropertyOptional(TOKENS_PER_DAY_DOC)
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(MAX_TOKENS_PER_DAY)
  tokensPerDay?: number | null;
}

/** What an admin may change on a key; fields left out stay as they are (the create DTO's checks). */
export class UpdateApiKeyDto extends PickType(CreateApiKeyDto, ['policies', 'attributes', 'tokensPerDay'] as const) {
  @ApiPropertyOptional({ description: 'Who the key acts for; row filters read it as "$subject" (not starting with "oidc:")' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  subject?: string;
}

export class ApiKeyResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() name: string;
  @ApiProperty({ enum: API_KEY_ROLES }) role: ApiKeyRole;
  @ApiProperty() subject: string;
  @ApiProperty({ type: [String], description: 'Access policies; none: every right of its role' }) policies: string[];
  @ApiProperty(ATTRIBUTES_DOC) attributes: KeyAttributes;
  @ApiProperty(TOKENS_PER_DAY_DOC) tokensPerDay: number | null;
  @ApiProperty({ description: 'First characters of the secret' }) prefix: string;
  @ApiProperty() revoked: boolean;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
}

export class CreatedApiKeyResponse extends ApiKeyResponse {
  @ApiProperty({ description: 'The secret. Shown only in this response.' }) secret: string;
}

export class ApiKeyListResponse {
  @ApiProperty({ type: [ApiKeyResponse] }) apiKeys: ApiKeyResponse[];
}

export function toApiKeyResponse(key: ApiKey): ApiKeyResponse {
  return {
    id: key.id,
    name: key.name,
    role: key.role,
    subject: key.subject,
    policies: key.policies ?? [],
    attributes: key.attributes ?? {},
    tokensPerDay: key.tokensPerDay ?? null,
    prefix: key.prefix,
    revoked: key.revoked,
    createdAt: key.createdAt.toISOString(),
  };
}
