import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { DurableChatsModule } from '../chats/durable/durable-chats.module';
import { GovernanceModule } from '../governance/governance.module';
import { JobsModule } from '../jobs/jobs.module';
import { SemanticMetricsModule } from '../metrics/metrics.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { ScheduleDeliveryWorker } from './schedule-delivery.worker';
import { ScheduleMailer } from './schedule-mailer';
import { ScheduleRepository } from './schedule.repository';
import { ScheduleRunner } from './schedule-runner';
import { ScheduleTicker } from './schedule-ticker';
import { SchedulesController } from './schedules.controller';
import { SchedulesService } from './schedules.service';

/**
 * Schedules: questions to an agent and metric alerts, run as their owner key on a cron or an interval
 * through the job queue, delivered to the owner's webhooks (signed) and by email.
 */
@Module({
  imports: [AgentsModule, DurableChatsModule, GovernanceModule, JobsModule, SemanticMetricsModule, WebhooksModule],
  controllers: [SchedulesController],
  providers: [ScheduleRepository, SchedulesService, ScheduleRunner, ScheduleTicker, ScheduleDeliveryWorker, ScheduleMailer],
})
export class SchedulesModule {}
