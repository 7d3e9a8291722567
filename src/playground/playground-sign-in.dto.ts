import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

/** GET /playground/sign-in: public settings of the playground's sign-in, never a secret. */
export class PlaygroundSignInResponse {
  @ApiProperty({ description: 'Whether the playground may sign in with the identity provider (PLAYGROUND_OIDC_CLIENT_ID)' })
  enabled: boolean;

  @ApiPropertyOptional({ description: 'The issuer to sign in with (its discovery document names the endpoints)' })
  issuer?: string;

  @ApiPropertyOptional({ description: 'The public client id (authorization code with PKCE, no secret)' })
  clientId?: string;

  @ApiPropertyOptional({ type: [String], description: 'The scopes to ask for' })
  scopes?: string[];

  @ApiPropertyOptional({ description: "The API's audience, asked for as the access token's resource" })
  resource?: string;
}
