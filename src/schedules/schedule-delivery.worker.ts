import { Inject, Injectable, Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { AccessService } from '../governance/access.service';
import { JobQueue, type QueuedJob } from '../jobs/job-queue.service';
import { deliveryQueueSettings } from '../webhooks/webhook-jobs';
import { WebhooksService } from '../webhooks/webhooks.service';
import type { ScheduleEvent } from './schedule-runner';
import { SCHEDULE_DELIVERY_QUEUE, type ScheduleDeliveryJobData } from './schedule-jobs';
import { ScheduleMailer, type Email } from './schedule-mailer';
import { ScheduleRepository } from './schedule.repository';

/** Why an attempt failed, so that the queue retries it (the delivery row holds the details). */
class AttemptFailed extends Error {}

/**
 * Works the schedule delivery jobs: one attempt per job run. A webhook target gets the run's event
 * signed like record events (Standard Webhooks, the delivery's id as `webhook-id`, the same on every
 * retry); an email target a plain-text email over SMTP_URL from SMTP_FROM. A failed attempt is retried
 * by the queue with the webhooks' backoff (WEBHOOK_RETRY_DELAY_S ..., WEBHOOK_MAX_ATTEMPTS attempts);
 * without SMTP_URL an email delivery fails at once with `email_not_configured`. Nothing is sent once
 * the schedule's owner key is revoked.
 */
@Injectable()
export class ScheduleDeliveryWorker {
  private readonly logger = new Logger(ScheduleDeliveryWorker.name);

  constructor(
    private readonly repo: ScheduleRepository,
    private readonly webhooks: WebhooksService,
    private readonly mailer: ScheduleMailer,
    private readonly access: AccessService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    jobs: JobQueue,
  ) {
    jobs.define<ScheduleDeliveryJobData>({
      queue: {
        name: SCHEDULE_DELIVERY_QUEUE,
        ...deliveryQueueSettings(config),
        notify: true,
      },
      groupConcurrency: config.webhookOwnerConcurrency,
      handler: (job) => this.deliver(job),
    });
  }

  async deliver(job: QueuedJob<ScheduleDeliveryJobData>): Promise<void> {
    const delivery = await this.repo.deliveryToSend(job.data.deliveryId);
    if (!delivery || delivery.status !== 'pending') return;
    const event = delivery.payload as ScheduleEvent | null;
    if (!event) {
      await this.repo.recordAttempt(delivery.id, { status: 'failed', error: 'The run has nothing to deliver' });
      return;
    }
    try {
      await this.access.keyCaller(delivery.ownerKeyId, { fresh: true });
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      await this.repo.recordAttempt(delivery.id, {
        status: 'failed',
        errorCode: 'key_revoked',
        error: "Not sent: the owner's API key was revoked",
      });
      return;
    }
    if (delivery.kind === 'email' && !this.mailer.configured) {
      await this.repo.recordAttempt(delivery.id, {
        status: 'failed',
        errorCode: 'email_not_configured',
        error: 'Email is not configured on this server (SMTP_URL is not set)',
      });
      return;
    }
    if (delivery.kind === 'webhook') {
      // A webhook deleted or disabled since: no attempt can succeed, so none is retried.
      const webhook = await this.webhooks.targetOf(delivery.target, delivery.ownerKeyId);
      if (webhook?.status !== 'active') {
        await this.repo.recordAttempt(delivery.id, {
          status: 'failed',
          error: webhook ? 'Not sent: the webhook is disabled' : 'Not sent: the webhook was deleted',
        });
        return;
      }
    }
    const attempt = await this.repo.startAttempt(delivery.id);
    let result: { ok: boolean; status?: number; error?: string };
    if (delivery.kind === 'webhook') {
      result = await this.webhooks.sendSigned(delivery.target, delivery.id, JSON.stringify(event));
    } else {
      result = await this.mailer.send(emailOf(delivery.target, event)).then(
        () => ({ ok: true }),
        (error: Error) => ({ ok: false, error: `SMTP: ${error.message}` }),
      );
    }
    if (result.ok) {
      await this.repo.recordAttempt(delivery.id, { status: 'succeeded', responseStatus: result.status });
      return;
    }
    const final = attempt >= this.config.webhookMaxAttempts || job.retryCount >= job.retryLimit;
    await this.repo.recordAttempt(delivery.id, {
      status: final ? 'failed' : 'pending',
      responseStatus: result.status,
      error: result.error,
    });
    this.logger.debug({ msg: 'schedule delivery attempt failed', deliveryId: delivery.id, final, error: result.error });
    if (!final) throw new AttemptFailed(result.error ?? 'The attempt failed');
  }
}

/** The plain-text email of an event: the answer, or the rows that fired. */
export function emailOf(to: string, event: ScheduleEvent): Email {
  const name = event.data.schedule.name;
  if (event.type === 'question.answered') {
    return {
      to,
      subject: `${name}: answer`,
      text: `${event.data.answer}\n\n--\nScheduled question "${name}", chat ${event.data.chatId}, ${event.timestamp}\n`,
    };
  }
  const { metric, condition, rows } = event.data;
  const rule = `${metric} ${condition.op === 'change_pct_gt' ? `changed by more than ${condition.value}% over the previous ${condition.period ?? 'day'}` : `${condition.op} ${condition.value}`}`;
  const lines = rows.map((row) =>
    Object.entries(row)
      .map(
        ([key, value]) =>
          `${key}: ${value === null ? '(none)' : typeof value === 'object' ? JSON.stringify(value) : String(value as string | number)}`,
      )
      .join(', '),
  );
  return {
    to,
    subject: `${name}: alert fired (${rows.length} ${rows.length === 1 ? 'row' : 'rows'})`,
    text: `Alert "${name}": ${rule}\n\n${lines.join('\n')}\n\n--\n${event.timestamp}\n`,
  };
}
