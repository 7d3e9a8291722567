import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { AuditModule } from '../audit/audit.module';
import { MetadataModule } from '../metadata/metadata.module';
import { AccessPolicyController } from './access-policy.controller';
import { AccessPolicyEntity } from './access-policy.entity';
import { AccessPolicyService } from './access-policy.service';
import { AccessService } from './access.service';
import { AuditController } from './audit.controller';
import { ObjectCatalogController } from './object-catalog.controller';
import { UsageController } from './usage.controller';
import { UsageRepository } from './usage.repository';
import { UsageService } from './usage.service';

/**
 * Access policies and each key's access compiled from them (the data engine applies it), the objects
 * as a caller sees them, token quotas and usage, and the audit trail's read route.
 */
@Module({
  imports: [MikroOrmModule.forFeature([AccessPolicyEntity]), AuditModule, AuthModule, MetadataModule],
  controllers: [ObjectCatalogController, AccessPolicyController, UsageController, AuditController],
  providers: [AccessPolicyService, AccessService, UsageService, UsageRepository],
  exports: [AccessPolicyService, AccessService, UsageService],
})
export class GovernanceModule {}
