import { ViewsModule } from '../views/views.module';
import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { DataModule } from '../data/data.module';
import { GovernanceModule } from '../governance/governance.module';
import { JobsModule } from '../jobs/jobs.module';
import { MetadataModule } from '../metadata/metadata.module';
import { ExportService } from './export.service';
import { ExportSlots } from './export-slots.service';
import { ImportService } from './import.service';
import { JobRepository } from './job.repository';
import { JobsService } from './jobs.service';
import { StoredFillService } from './stored-fill.service';
import { JobsController, TransferController } from './transfer.controller';

/** CSV in and out: imports as jobs with progress, streamed exports. */
@Module({
  imports: [AuthModule, DataModule, GovernanceModule, JobsModule, MetadataModule, ViewsModule],
  controllers: [TransferController, JobsController],
  providers: [ImportService, ExportService, ExportSlots, JobsService, JobRepository, StoredFillService],
})
export class TransferModule {}
