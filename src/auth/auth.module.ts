import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiKeyController } from './api-key.controller';
import { ApiKeyEntity } from './api-key.entity';
import { ApiKeyGuard } from './api-key.guard';
import { ApiKeyService } from './api-key.service';
import { KeyStreams } from './key-streams.service';
import { StreamTokenController } from './stream-token.controller';
import { StreamTokenRepository } from './stream-token.repository';
import { StreamTokenService } from './stream-token.service';

@Module({
  imports: [MikroOrmModule.forFeature([ApiKeyEntity])],
  controllers: [ApiKeyController, StreamTokenController],
  providers: [
    ApiKeyService,
    KeyStreams,
    StreamTokenRepository,
    StreamTokenService,
    { provide: APP_GUARD, useClass: ApiKeyGuard },
  ],
  exports: [ApiKeyService, KeyStreams],
})
export class AuthModule {}
