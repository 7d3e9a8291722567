import { Module } from '@nestjs/common';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { DataService } from './data.service';

@Module({
  imports: [MetadataModule, GovernanceModule],
  providers: [DataService],
  exports: [DataService],
})
export class DataModule {}
