import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { GovernanceModule } from '../governance/governance.module';
import { ChangesController } from './changes.controller';
import { ChangesService } from './changes.service';

/**
 * The change feed: the data engine appends one outbox row per record write in the write's own
 * statement (see data/change-outbox.ts); this module pages and streams them as the caller (the history
 * module keeps them to their retention).
 */
@Module({
  imports: [AuthModule, GovernanceModule],
  controllers: [ChangesController],
  providers: [ChangesService],
  exports: [ChangesService],
})
export class ChangesModule {}
