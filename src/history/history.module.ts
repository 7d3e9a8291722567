import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { DataModule } from '../data/data.module';
import { ChangesModule } from '../changes/changes.module';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { ChangeSetService } from './change-sets.service';
import { ChangeSetsController } from './change-sets.controller';
import { HistoryController } from './history.controller';
import { HistoryService } from './history.service';
import { RecordRetention } from './record-retention.service';
import { TrashService } from './trash.service';

/**
 * Record history, the trash and change sets, read from the change feed's outbox (each write's row as
 * it left it, and what an update replaced): versions, restores, and reverts of a whole change set.
 */
@Module({
  imports: [AuthModule, GovernanceModule, DataModule, ChangesModule, MetadataModule],
  controllers: [HistoryController, ChangeSetsController],
  providers: [HistoryService, TrashService, ChangeSetService, RecordRetention],
  exports: [HistoryService, TrashService, ChangeSetService],
})
export class HistoryModule {}
