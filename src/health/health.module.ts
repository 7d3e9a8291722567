import { Module } from '@nestjs/common';
import { DurableChatsModule } from '../chats/durable/durable-chats.module';
import { JobsModule } from '../jobs/jobs.module';
import { HealthController } from './health.controller';
import { HealthRepository } from './health.repository';
import { HealthService } from './health.service';

/** GET /health (as it always was), /health/live and /health/ready (which looks at the chat worker too). */
@Module({
  imports: [DurableChatsModule, JobsModule],
  controllers: [HealthController],
  providers: [HealthService, HealthRepository],
})
export class HealthModule {}
