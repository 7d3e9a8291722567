import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import type { ChangeResponse } from '../changes/changes.dto';
import { ChangesService } from '../changes/changes.service';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { AccessService } from '../governance/access.service';
import { JobQueue, type QueuedJob } from '../jobs/job-queue.service';
import { PrometheusService } from '../observability/prometheus.service';
import { SignedSender, type AttemptResult } from './webhook-sender';
import {
  busyWithRequests,
  DELIVERY_QUEUE,
  deliveryIdsOf,
  deliveryQueueSettings,
  recordKey,
  type DeliveryJobData,
} from './webhook-jobs';
import { WebhookRepository, type DeliveryOutcome, type DeliveryRow, type WebhookRow } from './webhook.repository';

/** The type of a record event, by the change's op. */
const EVENT_TYPES = { create: 'record.created', update: 'record.updated', delete: 'record.deleted' } as const;

/** A webhook's body: its type, when the change was written, and the change as the owner reads it. */
export interface WebhookEvent {
  type: (typeof EVENT_TYPES)[keyof typeof EVENT_TYPES];
  timestamp: string;
  data: ChangeResponse;
}

/** Why a run of a job failed, so that pg-boss retries it (the delivery rows hold the details). */
class AttemptFailed extends Error {}

/** Records of one object whose changes are read for a job in one page at most this far apart (in cursors); else one by one. */
const READ_SPAN = 1_000;

/** Deliveries read, counted and recorded together in a run (a round); a round starts no attempt after ROUND_MS. */
const ROUND_SIZE = 50;
const ROUND_MS = 1_000;

/**
 * Deliveries are background work: while this replica is busy answering API requests (busyWithRequests), a
 * round waits (in steps) before it sends, up to YIELD_MAX_MS a round, so that a backlog of deliveries does not
 * take the CPU from the writes that made it; it catches up once the burst is over.
 */
const YIELD_STEP_MS = 50;
const YIELD_MAX_MS = 1_000;

/** What one run of a job hands on: a record's deliveries left for a job of its own (of the record's key). */
interface HandOff {
  ids: string[];
  /** Its first delivery's attempt failed in this run: the new job waits for the backoff first. */
  backoff: boolean;
}

/** One run of a job, across its rounds. */
interface RunState {
  job: QueuedJob<DeliveryJobData>;
  webhook: WebhookRow;
  handOffs: Map<string, HandOff>;
  sender: SignedSender;
  /** No attempt begins after this (performance.now()): it might outlast the job's lease. */
  until: number;
  /** An attempt was made in this run. */
  progressed: boolean;
  /** An attempt succeeded since the webhook's failures were last recorded. */
  succeededSince: boolean;
  /** A job of one record is retried (a failed attempt, or the rest of it after the lease's time): why. */
  retry?: string;
  /** The run sends no more: the webhook was disabled, or the lease's time is up (or the replica stops). */
  stop?: 'disabled' | 'lease';
}

/** The record's hand-off in this run, made when it has none. */
function handOff(state: RunState, recordId: string, backoff = false): HandOff {
  let found = state.handOffs.get(recordId);
  if (!found) state.handOffs.set(recordId, (found = { ids: [], backoff }));
  return found;
}

/**
 * Works the delivery jobs. A job holds deliveries of one webhook in cursor order: a page of the
 * dispatcher (the webhook's key: its pages run one at a time, in order), or the deliveries of one record
 * (the record's key). A run reads the webhook, its owner's access and the changes once, and sends the
 * deliveries one after the other (each job is one request in flight: WEBHOOK_OWNER_CONCURRENCY bounds the
 * owner's), on one kept-alive connection to the target resolved and checked (WEBHOOK_ALLOW_PRIVATE) for
 * this run; their attempts are counted in one statement before the first is made (a replica that dies
 * during one has still used it) and their outcomes written in one statement after the last.
 *
 * Before it is sent, the change is read as the owner reads it NOW (its key, its row filter and hidden
 * fields, the webhook's where): a change it may no longer see is `skipped`, never sent; an owner revoked
 * disables the webhook. The body is signed (Standard Webhooks: the delivery's id is `webhook-id`, the same
 * on every retry, for receivers to deduplicate).
 *
 * Order per record: in a page, a record with an earlier change still pending in another job (a retry) is
 * handed on to a job of the record's key, which runs after that one; a record whose attempt fails is
 * handed on likewise (that job first waits for the backoff), and the page's other records are sent. A job
 * of one record whose attempt fails is retried by pg-boss with exponential backoff (WEBHOOK_RETRY_DELAY_S,
 * at most WEBHOOK_RETRY_DELAY_MAX_S apart), the record's later jobs waiting behind it, until
 * WEBHOOK_MAX_ATTEMPTS attempts or WEBHOOK_MAX_AGE_HOURS: then the delivery is `failed` and the record's
 * next change goes out. A run stops sending once another attempt might outlast the job's lease (or the
 * replica stops), handing the rest on. A webhook whose every attempt failed for WEBHOOK_DISABLE_AFTER_HOURS
 * is disabled, with its reason.
 */
@Injectable()
export class WebhookDeliveryWorker {
  private readonly logger = new Logger(WebhookDeliveryWorker.name);
  private readonly settings: ReturnType<typeof deliveryQueueSettings>;

  constructor(
    private readonly repo: WebhookRepository,
    private readonly changes: ChangesService,
    private readonly access: AccessService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: PrometheusService,
    private readonly jobs: JobQueue,
  ) {
    this.settings = deliveryQueueSettings(config);
    jobs.define<DeliveryJobData>({
      queue: {
        name: DELIVERY_QUEUE,
        policy: 'key_strict_fifo',
        ...this.settings,
      },
      groupConcurrency: config.webhookOwnerConcurrency,
      handler: (job) => this.run(job),
    });
  }

  /** One run of the job: each of its pending deliveries attempted once, in order, or handed on. */
  async run(job: QueuedJob<DeliveryJobData>): Promise<void> {
    if (job.data.backoff && job.retryCount === 0) throw new AttemptFailed('Waiting for the backoff of the failed attempt');
    // A page's retry (its replica died after handing records on) leaves what it handed on to their jobs.
    const pending = (await this.repo.deliveriesByIds(deliveryIdsOf(job.data))).filter(
      (d) => d.status === 'pending' && (job.data.record === true || !d.handedOn),
    );
    if (!pending.length) return; // deleted with their webhook, or settled by an earlier run
    const webhook = await this.repo.find(pending[0].webhookId);
    if (!webhook) return;
    if (webhook.status !== 'active') {
      await this.fail(pending, `Not sent: the webhook is disabled (${webhook.disabledReason ?? 'no reason given'})`);
      return;
    }
    const state: RunState = {
      job,
      webhook,
      handOffs: new Map(),
      sender: new SignedSender(webhook, this.config.webhookTimeoutMs, this.config.webhookAllowPrivate),
      // Attempts begin while one more would still end within the job's lease.
      until: performance.now() + Math.max(0, (this.settings.expireInSeconds - 1) * 1000 - this.config.webhookTimeoutMs),
      progressed: false,
      succeededSince: false,
    };
    if (!job.data.record) {
      for (const recordId of await this.repo.heldRecords(webhook.id, pending))
        state.handOffs.set(recordId, { ids: [], backoff: false });
    }
    let next = 0;
    try {
      while (next < pending.length && !state.retry && !state.stop) next = await this.round(state, pending, next);
    } finally {
      state.sender.close();
      if (state.succeededSince) await this.repo.succeeded(webhook.id);
    }
    // What no round reached: of records handed on, into their hand-offs; the rest as the run ended.
    const left = pending.slice(next).filter((d) => d.status === 'pending');
    const rest = left.filter((d) => !state.handOffs.has(d.recordId));
    for (const d of left) state.handOffs.get(d.recordId)?.ids.push(d.id);
    if (state.stop === 'disabled') {
      await this.fail(
        rest,
        `Not sent: the webhook is disabled (Every delivery attempt failed for ${this.config.webhookDisableAfterHours} hours)`,
      );
    } else if (state.stop === 'lease' && rest.length) {
      // In a job of one record, by retrying this one (the record's later jobs wait behind it); else handed on.
      if (job.data.record) state.retry = 'Continued in a later run';
      else for (const d of rest) handOff(state, d.recordId).ids.push(d.id);
    }
    await this.handOn(webhook, state.handOffs);
    // A failed attempt of a job of one record: pg-boss retries it with backoff, and its later deliveries with it.
    if (state.retry) throw new AttemptFailed(state.retry);
  }

  /**
   * One round of a run, from `pending[from]`: the owner's access and the changes of at most ROUND_SIZE
   * deliveries read afresh, their attempts counted, then sent in order for at most ROUND_MS, their outcomes
   * written. Where the next round begins.
   */
  private async round(state: RunState, pending: readonly DeliveryRow[], from: number): Promise<number> {
    const { job, webhook, handOffs } = state;
    for (let waited = 0; waited < YIELD_MAX_MS && busyWithRequests(this.metrics); waited += YIELD_STEP_MS) {
      if (job.signal?.aborted || performance.now() + YIELD_STEP_MS > state.until) break;
      await sleep(YIELD_STEP_MS);
    }
    const candidates = pending.slice(from, from + ROUND_SIZE);
    const outcomes: DeliveryOutcome[] = [];
    let owner: Caller;
    try {
      owner = await this.access.keyCaller(webhook.ownerKeyId, { fresh: true });
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      await this.repo.disable(webhook.id, "The owner's API key was revoked");
      await this.fail(pending.slice(from), "Not sent: the owner's API key was revoked");
      return pending.length;
    }
    const visible = await this.readAsOwner(
      owner,
      webhook,
      candidates.filter((d) => !handOffs.has(d.recordId) && d.status === 'pending'),
      outcomes,
    );
    if (!visible) {
      await this.fail(
        pending.slice(from),
        `Not sent: the owner can no longer follow "${candidates[0].object}" (or a field of the webhook's where)`,
      );
      return pending.length;
    }
    const attempts = await this.repo.startAttempts([...visible.keys()]);
    const ends = performance.now() + ROUND_MS;
    let i = 0;
    try {
      for (; i < candidates.length; i++) {
        const delivery = candidates[i];
        const change = visible.get(delivery.id);
        const held = handOffs.get(delivery.recordId);
        if (state.retry || held) {
          held?.ids.push(delivery.id);
          if (attempts.has(delivery.id))
            outcomes.push({ id: delivery.id, kind: 'unsent', lastAttemptAt: delivery.lastAttemptAt });
          continue;
        }
        const attempt = attempts.get(delivery.id);
        // Skipped (readAsOwner), or no longer pending (settled in an earlier round, deleted with its webhook).
        if (!change || attempt === undefined) continue;
        const expired = delivery.ageSeconds >= this.config.webhookMaxAgeHours * 3600;
        if (attempt > this.config.webhookMaxAttempts || expired) {
          outcomes.push({
            id: delivery.id,
            kind: 'settled',
            status: 'failed',
            error: delivery.error ?? 'No attempt succeeded in time',
          });
          this.metrics.observeWebhookDelivery('failed');
          continue;
        }
        if (state.progressed && (performance.now() > state.until || job.signal?.aborted)) {
          state.stop = 'lease';
          break;
        }
        // The rest of the round is read again first: what is sent is what the owner may read now.
        if (i > 0 && performance.now() > ends) break;
        const event: WebhookEvent = { type: EVENT_TYPES[change.op], timestamp: change.at, data: change };
        const result = await state.sender.send(delivery.id, JSON.stringify(event));
        state.progressed = true;
        this.metrics.observeWebhookAttempt(result.ok);
        if (result.ok) {
          outcomes.push({ id: delivery.id, kind: 'sent', status: 'succeeded', ...outcome(result) });
          this.metrics.observeWebhookDelivery('succeeded');
          state.succeededSince = true;
          continue;
        }
        this.logger.debug({ msg: 'webhook attempt failed', webhookId: webhook.id, deliveryId: delivery.id, error: result.error });
        // Its failures are counted from its first failure after its last success.
        if (state.succeededSince) await this.repo.succeeded(webhook.id);
        state.succeededSince = false;
        const disabled = await this.repo.failed(webhook.id, this.config.webhookDisableAfterHours);
        const final =
          disabled ||
          attempt >= this.config.webhookMaxAttempts ||
          expired ||
          (job.data.record === true && job.retryCount >= job.retryLimit);
        outcomes.push({ id: delivery.id, kind: 'sent', status: final ? 'failed' : 'pending', ...outcome(result) });
        if (final) this.metrics.observeWebhookDelivery('failed');
        if (disabled) {
          state.stop = 'disabled';
          i++;
          break;
        }
        if (final) continue;
        if (job.data.record) state.retry = result.error ?? 'The attempt failed';
        else handOff(state, delivery.recordId, true).ids.push(delivery.id);
      }
      // Counted, not attempted: the next round (or the job they are handed on to) counts them again.
      for (const delivery of candidates.slice(i)) {
        if (attempts.has(delivery.id)) outcomes.push({ id: delivery.id, kind: 'unsent', lastAttemptAt: delivery.lastAttemptAt });
      }
      return from + i;
    } finally {
      await this.repo.recordOutcomes(outcomes);
    }
  }

  /**
   * The changes of `deliveries` as the owner reads them now, by delivery id: those it may not see any more
   * (or that no longer match the where) are `skipped` into `outcomes`. Undefined (and the webhook disabled)
   * when the owner may not read the object or a field of the webhook's where any more.
   */
  private async readAsOwner(
    owner: Caller,
    webhook: WebhookRow,
    deliveries: DeliveryRow[],
    outcomes: DeliveryOutcome[],
  ): Promise<Map<string, ChangeResponse> | undefined> {
    const visible = new Map<string, ChangeResponse>();
    try {
      for (const [object, ofObject] of groupBy(deliveries, (d) => d.object)) {
        const found = new Map<string, ChangeResponse>();
        const first = BigInt(ofObject[0].cursor);
        const span = BigInt(ofObject[ofObject.length - 1].cursor) - first + 1n;
        // One page from the first cursor to the last (cursors of one object only grow), unless they lie far apart.
        const ranges =
          span <= BigInt(READ_SPAN)
            ? [{ after: first - 1n, limit: Number(span) }]
            : ofObject.map((d) => ({ after: BigInt(d.cursor) - 1n, limit: 1 }));
        for (const range of ranges) {
          const page = await this.changes.follow(owner, object, {
            after: range.after.toString(),
            limit: range.limit,
            where: webhook.where,
          });
          for (const change of page.changes) found.set(change.cursor, change);
        }
        for (const delivery of ofObject) {
          const change = found.get(delivery.cursor);
          if (change) visible.set(delivery.id, change);
          else {
            delivery.status = 'skipped'; // not read again by a later round
            outcomes.push({
              id: delivery.id,
              kind: 'settled',
              status: 'skipped',
              error: 'Not sent: the owner may no longer read this change (or it no longer matches the where)',
            });
            this.metrics.observeWebhookDelivery('skipped');
          }
        }
      }
      return visible;
    } catch (error) {
      if (!(error instanceof DomainError) || error.code === 'database_busy' || error.code === 'query_timeout') throw error;
      await this.repo.disable(webhook.id, `The owner can no longer follow "${deliveries[0]?.object ?? ''}": ${error.message}`);
      outcomes.length = 0;
      return undefined;
    }
  }

  /** Deliveries `failed` without an attempt. */
  private async fail(deliveries: readonly DeliveryRow[], error: string): Promise<void> {
    await this.repo.recordOutcomes(
      deliveries.map((d): DeliveryOutcome => ({ id: d.id, kind: 'settled', status: 'failed', error })),
    );
    for (let i = 0; i < deliveries.length; i++) this.metrics.observeWebhookDelivery('failed');
  }

  /** Queues each record's handed-on deliveries as a job of the record's key (after this run's outcomes are written). */
  private async handOn(webhook: WebhookRow, handOffs: Map<string, HandOff>): Promise<void> {
    const jobs = [...handOffs].filter(([, handOff]) => handOff.ids.length);
    if (!jobs.length) return;
    // One transaction: a delivery is marked handed on exactly when a job of its record holds it.
    await this.repo.transaction(async (tx) => {
      await this.repo.markHandedOn(
        tx,
        jobs.flatMap(([, handOff]) => handOff.ids),
      );
      await this.jobs.insert(
        DELIVERY_QUEUE,
        jobs.map(([recordId, handOff]) => ({
          data: {
            deliveryIds: handOff.ids,
            record: true,
            ...(handOff.backoff ? { backoff: true } : {}),
          } satisfies DeliveryJobData,
          singletonKey: recordKey(webhook.id, recordId),
          group: { id: webhook.ownerKeyId },
          // Its retries are the attempts of each of its deliveries in turn.
          retryLimit: this.settings.retryLimit * handOff.ids.length,
        })),
        tx,
      );
    });
    this.jobs.wake(DELIVERY_QUEUE);
  }
}

function outcome(result: AttemptResult) {
  return { responseStatus: result.status, responseBody: result.body, durationMs: result.durationMs, error: result.error };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(key(item));
    if (group) group.push(item);
    else groups.set(key(item), [item]);
  }
  return groups;
}
