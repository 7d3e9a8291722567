import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS, DATA_ERRORS, WHERE_ERRORS } from '../common/api-route.decorator';
import {
  CreateWebhookDto,
  DeliveriesQueryDto,
  DeliveriesResponse,
  DeliveryResponse,
  UpdateWebhookDto,
  WebhookCreatedResponse,
  WebhookResponse,
  WebhooksResponse,
} from './webhook.dto';
import { WebhooksService } from './webhooks.service';

@ApiTags('webhooks')
@Controller('api/v1/webhooks')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Post()
  @Roles('admin', 'member')
  @ApiRoute({
    summary:
      "Subscribe a URL to record changes of objects (signed per Standard Webhooks, at least once, in order per record), as the caller's key reads them",
    status: 201,
    type: WebhookCreatedResponse,
    errors: [...BODY_ERRORS, 'webhook_url_refused', 'object_not_found', ...WHERE_ERRORS, ...DATA_ERRORS],
  })
  create(@Caller() caller: Caller, @Body() dto: CreateWebhookDto): Promise<WebhookCreatedResponse> {
    return this.webhooks.create(caller, dto);
  }

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({ summary: "The caller's webhooks (admins: every webhook)", type: WebhooksResponse })
  list(@Caller() caller: Caller): Promise<WebhooksResponse> {
    return this.webhooks.list(caller);
  }

  @Get(':id')
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'Read a webhook (its secret is never shown again)', type: WebhookResponse, errors: ['webhook_not_found'] })
  get(@Caller() caller: Caller, @Param('id') id: string): Promise<WebhookResponse> {
    return this.webhooks.get(caller, id);
  }

  @Patch(':id')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Change a webhook: URL, objects, events, where, description, or enable/disable it',
    type: WebhookResponse,
    errors: [...BODY_ERRORS, 'webhook_not_found', 'webhook_url_refused', 'object_not_found', ...WHERE_ERRORS, ...DATA_ERRORS],
  })
  update(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: UpdateWebhookDto): Promise<WebhookResponse> {
    return this.webhooks.update(caller, id, dto);
  }

  @Delete(':id')
  @Roles('admin', 'member')
  @HttpCode(204)
  @ApiRoute({ summary: 'Delete a webhook and its delivery log', status: 204, errors: ['webhook_not_found'] })
  async delete(@Caller() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.webhooks.delete(caller, id);
  }

  @Get(':id/deliveries')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "A webhook's delivery log, newest first: status, attempts, last response status and duration, error",
    type: DeliveriesResponse,
    errors: ['validation_failed', 'webhook_not_found'],
  })
  deliveries(@Caller() caller: Caller, @Param('id') id: string, @Query() query: DeliveriesQueryDto): Promise<DeliveriesResponse> {
    return this.webhooks.deliveries(caller, id, query);
  }

  @Post(':id/deliveries/:deliveryId/redeliver')
  @Roles('admin', 'member')
  @HttpCode(202)
  @ApiRoute({
    summary: 'Send a delivery again (attempts start over; the change as the owner may read it now)',
    status: 202,
    type: DeliveryResponse,
    errors: ['webhook_not_found', 'delivery_not_found', 'delivery_pending'],
  })
  redeliver(
    @Caller() caller: Caller,
    @Param('id') id: string,
    @Param('deliveryId') deliveryId: string,
  ): Promise<DeliveryResponse> {
    return this.webhooks.redeliver(caller, id, deliveryId);
  }
}
