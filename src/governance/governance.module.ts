import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Global, Module } from '@nestjs/common';
import { ApiKeyEntity } from '../auth/api-key.entity';
import { MetadataModule } from '../metadata/metadata.module';
import { OBJECT_LENS } from '../metadata/object-lens';
import { AccessPolicyController } from './access-policy.controller';
import { AccessPolicyEntity } from './access-policy.entity';
import { AccessPolicyService } from './access-policy.service';
import { AccessService } from './access.service';
import { AuditController } from './audit.controller';
import { AuditLog } from '../audit/audit-log.service';
import { UsageController } from './usage.controller';
import { UsageService } from './usage.service';

/**
 * Access policies and each key's access compiled from them (the data engine applies it), token
 * quotas and usage, and the audit trail. Global so that metadata's read routes get the OBJECT_LENS,
 * and metadata's writes the audit log, without importing this module (which needs metadata).
 */
@Global()
@Module({
  imports: [MikroOrmModule.forFeature([AccessPolicyEntity, ApiKeyEntity]), MetadataModule],
  controllers: [AccessPolicyController, UsageController, AuditController],
  providers: [AccessPolicyService, AccessService, { provide: OBJECT_LENS, useExisting: AccessService }, UsageService, AuditLog],
  exports: [AccessService, OBJECT_LENS, UsageService, AuditLog],
})
export class GovernanceModule {}
