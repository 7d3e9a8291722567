import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Max, MaxLength, Min, ValidateIf } from 'class-validator';
import { MAX_TOKENS_PER_DAY } from './api-key.dto';
import { API_KEY_ROLES, type ApiKey, type ApiKeyRole, type KeyAttributes, type PrincipalKind } from './api-key.entity';

const CLAIM_DOC = 'A claim name, or a dot-separated path into nested claims (a claim named exactly so is taken first)';

/** PUT /api/v1/identity/mapping; parseIdentityMapping checks the nested parts. */
export class IdentityMappingDto {
  @ApiPropertyOptional({ description: `The claim naming the user (its subject). ${CLAIM_DOC}`, default: 'sub' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  subject?: string;

  @ApiPropertyOptional({
    description: 'Attribute name → claim path; row filters read them as "$attr.<name>"',
    type: 'object',
    additionalProperties: { type: 'string' },
    example: { region: 'region' },
  })
  @IsOptional()
  @IsObject()
  attributes?: Record<string, string>;

  @ApiPropertyOptional({
    description: 'Values of `claim` that make the user an admin; every other user is a member',
    type: 'object',
    properties: { admin: { type: 'array', items: { type: 'string' } } },
    example: { admin: ['copilot-admins'] },
  })
  @IsOptional()
  @IsObject()
  role?: { admin?: string[] };

  @ApiPropertyOptional({
    description:
      'Value of `claim` → the access policies it brings; a user runs under the union. A member whose values bring no policy reads nothing.',
    type: 'object',
    additionalProperties: { type: 'array', items: { type: 'string' } },
    example: { sales: ['sales_region'] },
  })
  @IsOptional()
  @IsObject()
  policies?: Record<string, string[]>;

  @ApiPropertyOptional({ description: `The claim holding the group values. ${CLAIM_DOC}`, default: 'groups' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  claim?: string;
}

export class IdentityMappingResponse {
  @ApiProperty() subject: string;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'string' } }) attributes: Record<string, string>;
  @ApiProperty({ type: 'object', properties: { admin: { type: 'array', items: { type: 'string' } } } }) role: { admin: string[] };
  @ApiProperty({ type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } })
  policies: Record<string, string[]>;
  @ApiProperty() claim: string;
}

export class RevokeUserDto {
  @ApiProperty({ description: 'The issuer of the user’s tokens, exactly as configured', example: 'https://idp.example.com/' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(2048)
  issuer: string;

  @ApiProperty({ description: 'The user’s subject (the mapped subject claim)' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  subject: string;
}

/** DELETE /api/v1/identity/revocations: in the body or the query string. */
export class LiftRevocationDto {
  @ApiPropertyOptional({ description: 'The issuer of the user’s tokens, exactly as configured' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(2048)
  issuer?: string;

  @ApiPropertyOptional({ description: 'The user’s subject (the mapped subject claim)' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  subject?: string;
}

export class MeResponse {
  @ApiProperty({ enum: ['key', 'user'] }) kind: PrincipalKind;
  @ApiPropertyOptional({ description: 'The token issuer (users only)' }) issuer?: string;
  @ApiProperty() subject: string;
  @ApiProperty({ enum: API_KEY_ROLES }) role: ApiKeyRole;
  @ApiProperty({
    type: [String],
    description: 'Access policies; none: every right of the role (keys, admins) or nothing (member users)',
  })
  policies: string[];
  @ApiProperty({ type: 'object', additionalProperties: { oneOf: [{ type: 'string' }, { type: 'number' }] } })
  attributes: KeyAttributes;
}

const USER_TOKENS_PER_DAY_DOC = {
  description:
    'Model tokens the user may use per UTC day (every agent together), overriding QUOTA_TOKENS_PER_KEY_DAY; null: that default.',
  type: 'integer',
  nullable: true,
  minimum: 0,
  maximum: MAX_TOKENS_PER_DAY,
} as const;

/** A user of an identity provider as admins see it (GET /api/v1/identity/users). */
export class UserResponse {
  @ApiProperty({ format: 'uuid', description: 'Its id: the keyId of its usage, audit and quota' }) id: string;
  @ApiProperty() issuer: string;
  @ApiProperty() subject: string;
  @ApiProperty({ enum: API_KEY_ROLES }) role: ApiKeyRole;
  @ApiProperty({ type: [String] }) policies: string[];
  @ApiProperty({ type: 'object', additionalProperties: { oneOf: [{ type: 'string' }, { type: 'number' }] } })
  attributes: KeyAttributes;
  @ApiProperty(USER_TOKENS_PER_DAY_DOC) tokensPerDay: number | null;
  @ApiProperty() revoked: boolean;
  @ApiProperty({ format: 'date-time', description: 'When its first token was accepted (or it was revoked unseen)' })
  createdAt: string;
}

export class UserListResponse {
  @ApiProperty({ type: [UserResponse] }) users: UserResponse[];
}

/** What an admin may change on a user: its role, policies and attributes are the identity provider's. */
export class UpdateUserDto {
  @ApiProperty(USER_TOKENS_PER_DAY_DOC)
  @ValidateIf((_dto, value) => value !== null)
  @IsInt()
  @Min(0)
  @Max(MAX_TOKENS_PER_DAY)
  tokensPerDay: number | null;
}

export function toUserResponse(user: ApiKey): UserResponse {
  return {
    id: user.id,
    issuer: user.issuer ?? '',
    subject: user.subject,
    role: user.role,
    policies: user.policies ?? [],
    attributes: user.attributes ?? {},
    tokensPerDay: user.tokensPerDay ?? null,
    revoked: user.revoked,
    createdAt: user.createdAt.toISOString(),
  };
}
