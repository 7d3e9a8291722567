import { Inject, Injectable, Logger } from '@nestjs/common';
import { Webhook } from 'standardwebhooks';
import type { Caller } from '../auth/caller';
import type { ChangeResponse } from '../changes/changes.dto';
import { ChangesService } from '../changes/changes.service';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { AccessService } from '../governance/access.service';
import { JobQueue, type QueuedJob } from '../jobs/job-queue.service';
import { PrometheusService } from '../observability/prometheus.service';
import { postOnce, type AttemptResult } from './webhook-sender';
import { resolveTarget } from './webhook-target';
import { DELIVERY_QUEUE, deliveryQueueSettings, type DeliveryJobData } from './webhook-jobs';
import { WebhookRepository, type DeliveryRow, type WebhookRow } from './webhook.repository';

/** The type of a record event, by the change's op. */
const EVENT_TYPES = { create: 'record.created', update: 'record.updated', delete: 'record.deleted' } as const;

/** A webhook's body: its type, when the change was written, and the change as the owner reads it. */
export interface WebhookEvent {
  type: (typeof EVENT_TYPES)[keyof typeof EVENT_TYPES];
  timestamp: string;
  data: ChangeResponse;
}

/** Why an attempt failed, so that pg-boss retries it (the delivery row holds the details). */
class AttemptFailed extends Error {}

/**
 * Works the delivery jobs: one attempt per job run. Before each attempt the change is read again as
 * the owner reads it NOW (its key, its row filter and hidden fields, the webhook's where): a change it
 * may no longer see is `skipped`, never sent; an owner revoked disables the webhook. Then the target is
 * resolved and checked (WEBHOOK_ALLOW_PRIVATE), the body signed (Standard Webhooks: the delivery's id is
 * `webhook-id`, the same on every retry, for receivers to deduplicate) and posted to the pinned address.
 *
 * A failed attempt throws, and the queue retries it with exponential backoff (WEBHOOK_RETRY_DELAY_S, at
 * most WEBHOOK_RETRY_DELAY_MAX_S apart) until WEBHOOK_MAX_ATTEMPTS attempts or WEBHOOK_MAX_AGE_HOURS:
 * then the delivery is `failed` and the job completes, so the record's next change goes out (a record's
 * jobs run one at a time, in order). A webhook whose every attempt failed for WEBHOOK_DISABLE_AFTER_HOURS
 * is disabled, with its reason.
 */
@Injectable()
export class WebhookDeliveryWorker {
  private readonly logger = new Logger(WebhookDeliveryWorker.name);

  constructor(
    private readonly repo: WebhookRepository,
    private readonly changes: ChangesService,
    private readonly access: AccessService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: PrometheusService,
    jobs: JobQueue,
  ) {
    jobs.define<DeliveryJobData>({
      queue: {
        name: DELIVERY_QUEUE,
        policy: 'key_strict_fifo',
        ...deliveryQueueSettings(config),
      },
      groupConcurrency: config.webhookOwnerConcurrency,
      handler: (job) => this.run(job),
    });
  }

  /** One attempt of the job's delivery. */
  async run(job: QueuedJob<DeliveryJobData>): Promise<void> {
    const delivery = await this.repo.deliveryById(job.data.deliveryId);
    if (!delivery || delivery.status !== 'pending') return; // deleted with its webhook, or settled by an earlier run
    const webhook = await this.repo.find(delivery.webhookId);
    if (!webhook) return;
    if (webhook.status !== 'active') {
      await this.settle(
        delivery.id,
        'failed',
        `Not sent: the webhook is disabled (${webhook.disabledReason ?? 'no reason given'})`,
      );
      return;
    }
    let owner: Caller;
    try {
      owner = await this.access.keyCaller(webhook.ownerKeyId, { fresh: true });
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      await this.repo.disable(webhook.id, "The owner's API key was revoked");
      await this.settle(delivery.id, 'failed', "Not sent: the owner's API key was revoked");
      return;
    }
    const change = await this.readAsOwner(owner, webhook, delivery);
    if (!change) return;

    const attempt = await this.repo.startAttempt(delivery.id);
    if (attempt > this.config.webhookMaxAttempts || delivery.ageSeconds >= this.config.webhookMaxAgeHours * 3600) {
      await this.settle(delivery.id, 'failed', delivery.error ?? 'No attempt succeeded in time');
      return;
    }
    const result = await this.attempt(webhook, delivery, change);
    this.metrics.observeWebhookAttempt(result.ok);
    if (result.ok) {
      await this.repo.recordAttempt(delivery.id, { status: 'succeeded', ...outcome(result) });
      await this.repo.succeeded(webhook.id);
      this.metrics.observeWebhookDelivery('succeeded');
      return;
    }
    const disabled = await this.repo.failed(webhook.id, this.config.webhookDisableAfterHours);
    const final =
      disabled ||
      attempt >= this.config.webhookMaxAttempts ||
      delivery.ageSeconds >= this.config.webhookMaxAgeHours * 3600 ||
      job.retryCount >= job.retryLimit;
    await this.repo.recordAttempt(delivery.id, { status: final ? 'failed' : 'pending', ...outcome(result) });
    if (final) this.metrics.observeWebhookDelivery('failed');
    // The last attempt completes the job (the record's next change may go); any other is retried with backoff.
    if (!final) throw new AttemptFailed(result.error ?? 'The attempt failed');
  }

  /**
   * The delivery's change as the owner reads it now: undefined (and the delivery settled) when the
   * owner may not see it any more, or may not read the object or a field of the webhook's where.
   */
  private async readAsOwner(owner: Caller, webhook: WebhookRow, delivery: DeliveryRow): Promise<ChangeResponse | undefined> {
    try {
      const page = await this.changes.follow(owner, delivery.object, {
        after: (BigInt(delivery.cursor) - 1n).toString(),
        limit: 1,
        where: webhook.where,
      });
      const [change] = page.changes;
      if (change?.cursor === delivery.cursor) return change;
      await this.settle(
        delivery.id,
        'skipped',
        'Not sent: the owner may no longer read this change (or it no longer matches the where)',
      );
    } catch (error) {
      if (!(error instanceof DomainError) || error.code === 'database_busy' || error.code === 'query_timeout') throw error;
      await this.repo.disable(webhook.id, `The owner can no longer follow "${delivery.object}": ${error.message}`);
      await this.settle(delivery.id, 'failed', `Not sent: ${error.message}`);
    }
    return undefined;
  }

  /** A delivery ended without (another) attempt. */
  private async settle(deliveryId: string, status: 'failed' | 'skipped', error: string): Promise<void> {
    await this.repo.settle(deliveryId, status, error);
    this.metrics.observeWebhookDelivery(status);
  }

  private async attempt(webhook: WebhookRow, delivery: DeliveryRow, change: ChangeResponse): Promise<AttemptResult> {
    let target;
    try {
      // Resolved and checked at every attempt, and the connection pinned to what was checked.
      target = await resolveTarget(webhook.url, this.config.webhookAllowPrivate);
    } catch (error) {
      return { ok: false, durationMs: 0, error: (error as Error).message };
    }
    const event: WebhookEvent = { type: EVENT_TYPES[change.op], timestamp: change.at, data: change };
    const body = JSON.stringify(event);
    const now = new Date();
    const signature = new Webhook(webhook.secret).sign(delivery.id, now, body);
    const headers = {
      'webhook-id': delivery.id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': signature,
      'user-agent': 'data-copilot-webhooks',
    };
    const result = await postOnce(target, headers, body, this.config.webhookTimeoutMs);
    if (!result.ok)
      this.logger.debug({ msg: 'webhook attempt failed', webhookId: webhook.id, deliveryId: delivery.id, error: result.error });
    return result;
  }
}

function outcome(result: AttemptResult) {
  return { responseStatus: result.status, responseBody: result.body, durationMs: result.durationMs, error: result.error };
}
