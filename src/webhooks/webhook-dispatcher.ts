import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { AccessService } from '../governance/access.service';
import { CommitAnnouncer } from '../database/commit-announcer.service';
import { DomainError } from '../common/domain-error';
import { ChangesService } from '../changes/changes.service';
import { JobQueue } from '../jobs/job-queue.service';
import { PrometheusService } from '../observability/prometheus.service';
import { busyWithRequests, cursorOrderedId, DELIVERY_QUEUE, webhookKey, type DeliveryJobData } from './webhook-jobs';
import { WebhookRepository, type NewDelivery } from './webhook.repository';

/** Changes one dispatch transaction reads from one object's feed. */
const DISPATCH_PAGE = 200;
/**
 * Least time between the starts of two dispatches, ms: under a stream of writes a commit signal comes with
 * every write, and each dispatch then queues one job for what the time gathered rather than one per write.
 */
const DISPATCH_INTERVAL_MS = 100;
/** The same while the replica is busy with API requests (busyWithRequests): fewer, larger dispatches. */
const BUSY_DISPATCH_INTERVAL_MS = 1_000;

/**
 * Turns committed record changes into webhook deliveries, off the request path: writes only append to
 * the change feed (as they always do), and this follows the feed.
 *
 * Each (webhook, object) has a cursor in the feed. On a commit signal (this replica's commits, another
 * replica's announcement), the cursors of the objects whose feeds it names are advanced (every cursor when
 * it names none, and on the poll, the safety net), each in a transaction that locks it (SKIP LOCKED: one
 * replica dispatches it at a time, the others move on), reads the next page of changes as the webhook's
 * owner reads them now (its row filter, the webhook's `where`), inserts a delivery per change of a
 * subscribed kind, queues one job with the page's deliveries, and moves the cursor: all or nothing, so
 * each change is queued exactly once and none is skipped. The dispatcher's own commits name no object.
 *
 * Order: the pages of one webhook (a singletonKey of the queue's key_strict_fifo policy) run in order of
 * (creation time, id), ids sorting by cursor, and each sends its deliveries in order (WebhookDeliveryWorker).
 * A transaction that began before another dispatch of the same cursor committed would stamp its job with
 * an earlier time than that one's: it sees this (`inOrder` false) and starts again.
 */
@Injectable()
export class WebhookDispatcher implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(WebhookDispatcher.name);
  private unsubscribe?: () => void;
  private running?: Promise<void>;
  /** What the next dispatch covers: the cursors of these objects, or every cursor (`all`). */
  private next?: { all: boolean; objects: Set<string> };
  private stopped = false;

  constructor(
    private readonly repo: WebhookRepository,
    private readonly changes: ChangesService,
    private readonly access: AccessService,
    private readonly jobs: JobQueue,
    private readonly announcer: CommitAnnouncer,
    private readonly metrics: PrometheusService,
  ) {}

  onApplicationBootstrap(): void {
    this.unsubscribe = this.announcer.subscribe((signal) => {
      // A commit that says which objects' feeds it appended to moves only their cursors; the poll, all of them.
      if (signal.changes) this.wake(signal.objects);
      else if (signal.source === 'poll' || signal.source === 'resync') this.wake();
    });
    this.wake();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    await this.running;
  }

  /**
   * Dispatches the cursors of `objects` (every cursor without them) now, or once more after the dispatch
   * under way: the wake-ups that come meanwhile are merged into that one.
   */
  wake(objects?: readonly string[]): void {
    if (this.stopped) return;
    const next = (this.next ??= { all: false, objects: new Set() });
    if (objects) for (const object of objects) next.objects.add(object);
    else next.all = true;
    if (this.running) return;
    this.running = (async () => {
      try {
        while (this.next && !this.stopped) {
          const { all, objects } = this.next;
          this.next = undefined;
          const started = performance.now();
          await this.dispatchAll(all ? undefined : [...objects]);
          const interval = busyWithRequests(this.metrics) ? BUSY_DISPATCH_INTERVAL_MS : DISPATCH_INTERVAL_MS;
          const rest = interval - (performance.now() - started);
          if (this.next && rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
        }
      } catch (error) {
        this.logger.warn({ msg: 'webhook dispatch failed', error: (error as Error).message });
      } finally {
        this.running = undefined;
      }
    })();
  }

  /** Dispatches the active webhooks' cursors of `objects` (of every object without them); what it queued. */
  async dispatchAll(objects?: readonly string[]): Promise<number> {
    let queued = 0;
    if (objects && !objects.length) return queued;
    for (const { webhookId, object } of await this.repo.activeCursors(objects)) {
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
        if (inserted.length) {
          await this.jobs.insert(
            DELIVERY_QUEUE,
            [
              {
                id: inserted[0].id,
                data: { deliveryIds: inserted.map((d) => d.id) } satisfies DeliveryJobData,
                singletonKey: webhookKey(webhook.id),
                group: { id: webhook.ownerKeyId },
              },
            ],
            tx,
          );
        }
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
