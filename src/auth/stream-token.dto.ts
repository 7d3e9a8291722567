import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, MaxLength } from 'class-validator';

export class CreateStreamTokenDto {
  @ApiPropertyOptional({
    description: "Binds the token to this chat: it then opens only that chat's streams. Another owner's chat is a 404.",
    format: 'uuid',
  })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  chatId?: string;
}

export class StreamTokenResponse {
  @ApiProperty({ description: 'Pass as ?token= on an event-stream route; it works for no other route' })
  token: string;

  @ApiProperty({ description: 'Until when the token can open a stream (ISO 8601); an open stream outlives it' })
  expiresAt: string;
}
