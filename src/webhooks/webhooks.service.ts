import { Inject, Injectable } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { ChangesService } from '../changes/changes.service';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { AccessService } from '../governance/access.service';
import { JobQueue } from '../jobs/job-queue.service';
import { cursorOrderedId, DELIVERY_QUEUE, recordKey, type DeliveryJobData } from './webhook-jobs';
import { SignedSender, type AttemptResult } from './webhook-sender';
import { resolveTarget } from './webhook-target';
import {
  CreateWebhookDto,
  DeliveriesQueryDto,
  DeliveriesResponse,
  DeliveryResponse,
  toDeliveryResponse,
  toWebhookResponse,
  UpdateWebhookDto,
  WebhookCreatedResponse,
  WebhookResponse,
  WebhooksResponse,
} from './webhook.dto';
import { WebhookRepository, type WebhookRow } from './webhook.repository';

/**
 * Webhooks as their owners manage them: a member sees and changes only its own key's webhooks (any other
 * is webhook_not_found, like one that does not exist), an admin every one. What a webhook subscribes to
 * is checked as its owner: each object readable by it, the where compiled against its view of each.
 */
@Injectable()
export class WebhooksService {
  constructor(
    private readonly repo: WebhookRepository,
    private readonly changes: ChangesService,
    private readonly access: AccessService,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** A new webhook, following its objects' changes from now on; its secret is returned here only. */
  async create(caller: Caller, dto: CreateWebhookDto): Promise<WebhookCreatedResponse> {
    await resolveTarget(dto.url, this.config.webhookAllowPrivate);
    await this.checkSubscription(caller, dto.objects, dto.where);
    const cursors = await this.startCursors(dto.objects);
    const id = randomUUID();
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    await this.repo.transaction((tx) =>
      this.repo.insert(
        tx,
        {
          id,
          ownerKeyId: caller.keyId,
          url: dto.url,
          objects: dto.objects,
          events: dto.events,
          where: dto.where ?? null,
          description: dto.description ?? null,
          secret,
        },
        cursors,
      ),
    );
    return { id, secret };
  }

  async list(caller: Caller): Promise<WebhooksResponse> {
    const rows = await this.repo.list(caller.role === 'admin' ? undefined : caller.keyId);
    return { webhooks: rows.map(toWebhookResponse) };
  }

  async get(caller: Caller, id: string): Promise<WebhookResponse> {
    return toWebhookResponse(await this.owned(caller, id));
  }

  /** Changes what is given; objects added are followed from now on, objects removed are no longer. */
  async update(caller: Caller, id: string, dto: UpdateWebhookDto): Promise<WebhookResponse> {
    const webhook = await this.owned(caller, id);
    if (dto.url !== undefined) await resolveTarget(dto.url, this.config.webhookAllowPrivate);
    const objects = dto.objects ?? webhook.objects;
    const where = dto.where === undefined ? webhook.where : dto.where;
    // Checked as the owner, whoever edits it: the deliveries are what the owner may read.
    const owner = await this.ownerOf(webhook);
    if (dto.objects !== undefined || dto.where !== undefined) await this.checkSubscription(owner, objects, where);
    const added = objects.filter((o) => !webhook.objects.includes(o));
    const enabling = dto.status === 'active' && webhook.status !== 'active';
    // Enabled again: it follows from now on, as a new webhook would (what it missed while disabled is not sent).
    const cursors = await this.startCursors(enabling ? objects : added);
    await this.repo.transaction(async (tx) => {
      await this.repo.update(tx, id, {
        url: dto.url,
        objects: dto.objects,
        events: dto.events,
        where: dto.where,
        description: dto.description,
        status: dto.status,
      });
      if (dto.objects !== undefined) await this.repo.removeCursorsExcept(tx, id, objects);
      if (enabling) await this.repo.removeCursorsExcept(tx, id, []);
      await this.repo.addCursors(tx, id, cursors);
    });
    return toWebhookResponse((await this.repo.find(id))!);
  }

  async delete(caller: Caller, id: string): Promise<void> {
    await this.owned(caller, id);
    await this.repo.delete(id);
  }

  async deliveries(caller: Caller, id: string, query: DeliveriesQueryDto): Promise<DeliveriesResponse> {
    await this.owned(caller, id);
    const rows = await this.repo.listDeliveries(id, { status: query.status, limit: query.limit ?? 100 });
    return { deliveries: rows.map(toDeliveryResponse) };
  }

  /**
   * Sends a delivery again, as its owner may read the change now: back to pending with its attempts
   * and its 24 h starting over, same webhook-id (receivers that saw it already may ignore it). A delivery
   * still pending is `delivery_pending`.
   */
  async redeliver(caller: Caller, id: string, deliveryId: string): Promise<DeliveryResponse> {
    const webhook = await this.owned(caller, id);
    const delivery = isUuid(deliveryId) ? await this.repo.findDelivery(id, deliveryId) : undefined;
    if (!delivery) throw new DomainError('delivery_not_found', `Webhook ${id} has no delivery ${deliveryId}`);
    await this.repo.transaction(async (tx) => {
      if (!(await this.repo.requeue(tx, delivery.id))) {
        throw new DomainError('delivery_pending', 'The delivery is still pending: its next attempt is queued');
      }
      await this.jobs.insert(
        DELIVERY_QUEUE,
        [
          {
            id: cursorOrderedId(delivery.cursor),
            data: { deliveryIds: [delivery.id], record: true } satisfies DeliveryJobData,
            singletonKey: recordKey(webhook.id, delivery.recordId),
            group: { id: webhook.ownerKeyId },
          },
        ],
        tx,
      );
    });
    this.jobs.wake(DELIVERY_QUEUE);
    return toDeliveryResponse((await this.repo.findDelivery(id, deliveryId))!);
  }

  /** A webhook as a target of other deliveries (schedules): its id and status, when `ownerKeyId` owns it. */
  async targetOf(id: string, ownerKeyId: string): Promise<Pick<WebhookRow, 'id' | 'status'> | undefined> {
    const webhook = isUuid(id) ? await this.repo.find(id) : undefined;
    return webhook && webhook.ownerKeyId === ownerKeyId ? { id: webhook.id, status: webhook.status } : undefined;
  }

  /**
   * One attempt of another kind of event (a schedule's): `body` signed like record events (Standard
   * Webhooks, `messageId` as webhook-id, the same on retries), posted to the webhook's checked and
   * pinned target. A deleted or disabled webhook is a failed attempt. Never throws.
   */
  async sendSigned(id: string, messageId: string, body: string): Promise<AttemptResult> {
    const webhook = isUuid(id) ? await this.repo.find(id) : undefined;
    if (!webhook) return { ok: false, durationMs: 0, error: 'The webhook was deleted' };
    if (webhook.status !== 'active') {
      return { ok: false, durationMs: 0, error: `The webhook is disabled (${webhook.disabledReason ?? 'no reason given'})` };
    }
    const sender = new SignedSender(webhook, this.config.webhookTimeoutMs, this.config.webhookAllowPrivate);
    try {
      return await sender.send(messageId, body);
    } finally {
      sender.close();
    }
  }

  /** The webhook, when the caller may manage it; webhook_not_found otherwise. */
  private async owned(caller: Caller, id: string): Promise<WebhookRow> {
    const webhook = isUuid(id) ? await this.repo.find(id) : undefined;
    if (!webhook || (caller.role !== 'admin' && webhook.ownerKeyId !== caller.keyId)) {
      throw new DomainError('webhook_not_found', `No webhook ${id}`);
    }
    return webhook;
  }

  private async ownerOf(webhook: WebhookRow): Promise<Caller> {
    try {
      return await this.access.keyCaller(webhook.ownerKeyId, { fresh: true });
    } catch {
      throw new DomainError('validation_failed', "The webhook's owner key was revoked: it can no longer change what it follows");
    }
  }

  /** Each object readable by the owner (object_not_found otherwise), the where compiled against each. */
  private async checkSubscription(owner: Caller, objects: string[], where: unknown): Promise<void> {
    for (const object of objects) await this.changes.checkWhere(owner, object, where ?? undefined);
  }

  private async startCursors(objects: string[]): Promise<{ object: string; cursor: string }[]> {
    return Promise.all(objects.map(async (object) => ({ object, cursor: await this.changes.latestCursor(object) })));
  }
}
