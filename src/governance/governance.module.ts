import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Global, Module } from '@nestjs/common';
import { ApiKeyEntity } from '../auth/api-key.entity';
import { MetadataModule } from '../metadata/metadata.module';
import { OBJECT_LENS } from '../metadata/object-lens';
import { AccessPolicyController } from './access-policy.controller';
import { AccessPolicyEntity } from './access-policy.entity';
import { AccessPolicyService } from './access-policy.service';
import { AccessService } from './access.service';

/**
 * Access policies and each key's access compiled from them; the data engine applies it. Global so
 * that metadata's read routes get the OBJECT_LENS without importing this module (which needs metadata).
 */
@Global()
@Module({
  imports: [MikroOrmModule.forFeature([AccessPolicyEntity, ApiKeyEntity]), MetadataModule],
  controllers: [AccessPolicyController],
  providers: [AccessPolicyService, AccessService, { provide: OBJECT_LENS, useExisting: AccessService }],
  exports: [AccessService, OBJECT_LENS],
})
export class GovernanceModule {}
