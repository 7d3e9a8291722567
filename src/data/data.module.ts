import { Module } from '@nestjs/common';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { ViewsModule } from '../views/views.module';
import { DataService } from './data.service';
import { RecordsController } from '../records/records.controller';
import { RecordsService } from '../records/records.service';

@Module({
  imports: [MetadataModule, GovernanceModule, ViewsModule],
  controllers: [RecordsController],
  providers: [DataService, RecordsService],
  exports: [DataService],
})
export class DataModule {}
