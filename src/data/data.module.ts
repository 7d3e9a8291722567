import { Module } from '@nestjs/common';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { DataService } from './data.service';
import { PolicyChecksRegistration } from './policy-checks';

@Module({
  imports: [MetadataModule, GovernanceModule],
  providers: [DataService, PolicyChecksRegistration],
  exports: [DataService],
})
export class DataModule {}
