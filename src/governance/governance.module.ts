import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { ApiKeyEntity } from '../auth/api-key.entity';
import { MetadataModule } from '../metadata/metadata.module';
import { AccessPolicyController } from './access-policy.controller';
import { AccessPolicyEntity } from './access-policy.entity';
import { AccessPolicyService } from './access-policy.service';
import { AccessService } from './access.service';

/** Access policies and each key's access compiled from them; the data engine applies it. */
@Module({
  imports: [MikroOrmModule.forFeature([AccessPolicyEntity, ApiKeyEntity]), MetadataModule],
  controllers: [AccessPolicyController],
  providers: [AccessPolicyService, AccessService],
  exports: [AccessService],
})
export class GovernanceModule {}
