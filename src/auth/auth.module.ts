import { AuditModule } from '../audit/audit.module';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiKeyController } from './api-key.controller';
import { ApiKeyEntity } from './api-key.entity';
import { ApiKeyGuard } from './api-key.guard';
import { ApiKeyRepository } from './api-key.repository';
import { ApiKeyService } from './api-key.service';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { KeyStreams } from './key-streams.service';
import { AuthFailureThrottle } from './rate-limits';
import { IdentityController } from './identity.controller';
import { IdentityMappingRepository } from './identity-mapping.repository';
import { OidcTokenVerifier } from './oidc-token.verifier';
import { StreamTokenController } from './stream-token.controller';
import { UserPrincipalService } from './user-principal.service';
import { StreamTokenRepository } from './stream-token.repository';
import { StreamTokenService } from './stream-token.service';

@Module({
  imports: [MikroOrmModule.forFeature([ApiKeyEntity]), AuditModule],
  controllers: [ApiKeyController, StreamTokenController, IdentityController],
  providers: [
    ApiKeyService,
    ApiKeyRepository,
    KeyStreams,
    StreamTokenRepository,
    StreamTokenService,
    OidcTokenVerifier,
    IdentityMappingRepository,
    UserPrincipalService,
    {
      provide: AuthFailureThrottle,
      useFactory: (config: AppConfig) => new AuthFailureThrottle(config.authFailuresPerMinute),
      inject: [APP_CONFIG],
    },
    { provide: APP_GUARD, useClass: ApiKeyGuard },
  ],
  exports: [ApiKeyService, KeyStreams, StreamTokenService],
})
export class AuthModule {}
