import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { API_KEY_ROLES, ApiKey, type ApiKeyRole } from './api-key.entity';

export class CreateApiKeyDto {
  @ApiProperty({ example: 'analyst laptop' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  name: string;

  @ApiProperty({ enum: API_KEY_ROLES })
  @IsIn(API_KEY_ROLES)
  role: ApiKeyRole;

  @ApiPropertyOptional({ description: 'Who the key acts for (owner of chats). Defaults to a value derived from the key id.' })
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
    prefix: key.prefix,
    revoked: key.revoked,
    createdAt: key.createdAt.toISOString(),
  };
}
