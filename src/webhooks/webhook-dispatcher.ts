import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AccessService } from '../governance/access.service';
import { CommitAnnouncer } from '../database/commit-announcer.service';
import { DomainError } from '../common/domain-error';
import { ChangesService } from '../changes/changes.service';
import { JobQueue } from '../jobs/job-queue.service';
import { cursorOrderedId, DELIVERY_QUEUE, recordKey, type DeliveryJobData } from './webhook-jobs';
import { WebhookRepository, type NewDelivery } from './webhook.repository';

/** Changes one dispatch transaction reads from one object's feed. */
const DISPATCH_PAGE = 200;

/**
 * Turns committed record changes into webhook deliveries, off the request path: writes only append to
 * the change feed (as they always do), and this follows the feed.
 *
 * Each (webhook, object) has a cursor in the feed. On every commit signal (this replica's commits,
 * another replica's announcement, the poll), each cursor is advanced in a transaction that locks it
 * (SKIP LOCKED: one replica dispatches it at a time, the others move on), reads the next page of
 * changes as the webhook's owner reads them now (its row filter, the webhook's `where`), inserts a
 * delivery per change of a subscribed kind, queues a job per delivery, and moves the cursor: all or
 * nothing, so each change is queued exactly once and none is skipped.
 *
 * Order: the jobs of one record (a singletonKey of the queue's key_strict_fifo policy) run in order of
 * (creation time, id), ids sorting by cursor. A transaction that began before another dispatch of the
 * same cursor committed would stamp its jobs with an earlier time than that one's: it sees this
 * (`inOrder` false) and starts again.
 */
@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WebhookDispatcher.name);
  private unsubscribe?: () => void;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly repo: WebhookRepository,
    private readonly changes: ChangesService,
    private readonly access: AccessService,
    private readonly jobs: JobQueue,
    private readonly announcer: CommitAnnouncer,
  ) {}

  onApplicationBootstrap(): void {
    this.unsubscribe = this.announcer.subscribe((signal) => {
      if (signal.changes || signal.source === 'poll' || signal.source === 'resync') this.wake();
    });
    this.wake();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    await this.running;
  }

  /** Runs a dispatch now, or once more after the one under way. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.dispatchAll();
        } while (this.again && !this.stopped);
      } catch (error) {
        this.logger.warn({ msg: 'webhook dispatch failed', error: (error as Error).message });
      } finally {
        this.running = undefined;
      }
    })();
  }

  /** Dispatches every active webhook's objects; what it queued. */
  async dispatchAll(): Promise<number> {
    let queued = 0;
    for (const { webhookId, object } of await this.repo.activeCursors()) {
      if (this.stopped) break;
      try {
        queued += await this.dispatch(webhookId, object);
      } catch (error) {
        this.logger.warn({ msg: 'webhook dispatch failed', webhookId, object, error: (error as Error).message });
      }
    }
    return queued;
  }

  /** Moves one cursor to the end of its object's feed; the deliveries queued. */
  async dispatch(webhookId: string, object: string): Promise<number> {
    let queued = 0;
    for (let pages = 0; pages < 1000 && !this.stopped; pages++) {
      const step = await this.repo.transaction(async (tx) => {
        const locked = await this.repo.lockCursor(tx, webhookId, object);
        if (!locked) return { done: true, queued: 0 };
        if (!locked.inOrder) return { done: false, queued: 0 };
        const { webhook } = locked;
        let owner;
        try {
          // This replica's cache of keys, cleared on every replica when a key is revoked; each attempt checks afresh.
          owner = await this.access.keyCaller(webhook.ownerKeyId);
        } catch (error) {
          if (!(error instanceof DomainError)) throw error;
          await this.repo.disable(webhook.id, "The owner's API key was revoked", tx);
          return { done: true, queued: 0 };
        }
        let page;
        try {
          page = await this.changes.follow(owner, object, { after: locked.cursor, limit: DISPATCH_PAGE, where: webhook.where });
        } catch (error) {
          if (!(error instanceof DomainError) || error.code === 'database_busy' || error.code === 'query_timeout') throw error;
          // The owner may no longer read the object (or a field of the webhook's where): nothing of it can be sent.
          await this.repo.disable(webhook.id, `The owner can no longer follow "${object}": ${error.message}`, tx);
          return { done: true, queued: 0 };
        }
        const wanted: NewDelivery[] = page.changes
          .filter((change) => webhook.events.includes(change.op))
          .map((change) => ({
            id: cursorOrderedId(change.cursor),
            object,
            recordId: change.id,
            cursor: change.cursor,
            op: change.op,
          }));
        const inserted = await this.repo.insertDeliveries(tx, webhook.id, wanted);
        await this.jobs.insert(
          DELIVERY_QUEUE,
          inserted.map((d) => ({
            id: d.id,
            data: { deliveryId: d.id } satisfies DeliveryJobData,
            singletonKey: recordKey(webhook.id, d.recordId),
            group: { id: webhook.ownerKeyId },
          })),
          tx,
        );
        if (page.nextCursor !== locked.cursor) await this.repo.moveCursor(tx, webhook.id, object, page.nextCursor);
        return { done: page.read < DISPATCH_PAGE, queued: inserted.length };
      });
      queued += step.queued;
      if (step.queued) this.jobs.wake(DELIVERY_QUEUE);
      if (step.done) break;
    }
    return queued;
  }
}
