import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { GovernanceModule } from '../governance/governance.module';
import { ChangeRetention } from './change-retention.service';
import { ChangesController } from './changes.controller';
import { ChangesService } from './changes.service';

/**
 * The change feed: the data engine appends one outbox row per record write in the write's own
 * statement (see data/change-outbox.ts); this module pages and streams them as the caller, and keeps
 * them for CHANGE_RETENTION_DAYS.
 */
@Module({
  imports: [AuthModule, GovernanceModule],
  controllers: [ChangesController],
  providers: [ChangesService, ChangeRetention],
  exports: [ChangesService],
})
export class ChangesModule {}
