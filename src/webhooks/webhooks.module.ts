import { Module } from '@nestjs/common';
import { ChangesModule } from '../changes/changes.module';
import { GovernanceModule } from '../governance/governance.module';
import { JobsModule } from '../jobs/jobs.module';
import { WebhookDeliveryWorker } from './webhook-delivery.worker';
import { WebhookDispatcher } from './webhook-dispatcher';
import { WebhookRepository } from './webhook.repository';
import { WebhooksController } from './webhooks.controller';
import { WebhooksService } from './webhooks.service';

/**
 * Webhooks on record changes: subscriptions owned by a key, a dispatcher that follows the change feed
 * into deliveries, and a worker of the job queue that signs and sends them.
 */
@Module({
  imports: [ChangesModule, GovernanceModule, JobsModule],
  controllers: [WebhooksController],
  providers: [WebhookRepository, WebhookDispatcher, WebhookDeliveryWorker, WebhooksService],
  exports: [WebhooksService],
})
export class WebhooksModule {}
