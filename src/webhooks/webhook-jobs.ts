import { randomBytes } from 'node:crypto';
import type { AppConfig } from '../config/app-config';
import type { PrometheusService } from '../observability/prometheus.service';

/** The job queue of webhook deliveries. */
export const DELIVERY_QUEUE = 'webhook-deliveries';

/** Retries pg-boss allows beyond WEBHOOK_MAX_ATTEMPTS: attempts of replicas that died mid-attempt (already counted). */
const RETRY_SLACK = 3;

/**
 * The retry, lease and retention settings of a queue of signed deliveries (record events, schedule events): retried
 * with backoff up to WEBHOOK_MAX_ATTEMPTS; an attempt takes WEBHOOK_TIMEOUT_MS at most, so a job active much longer
 * lost its replica.
 */
export function deliveryQueueSettings(config: AppConfig) {
  return {
    retryLimit: config.webhookMaxAttempts - 1 + RETRY_SLACK,
    retryDelay: config.webhookRetryDelayS,
    retryBackoff: true,
    retryDelayMax: config.webhookRetryDelayMaxS,
    expireInSeconds: Math.ceil(config.webhookTimeoutMs / 1000) + config.jobLeaseMarginS,
    retentionSeconds: (config.webhookMaxAgeHours + 24) * 3600,
  };
}

/**
 * What a delivery job carries: the ids of deliveries of one webhook, in the order they are sent (by
 * cursor); everything else is read when it runs.
 */
export interface DeliveryJobData {
  deliveryIds: string[];
  /**
   * All of one record (the job's key is the record's): a failed attempt retries the job, and the record's
   * later deliveries wait behind it. Without it, a page of the dispatcher (the webhook's key): a record
   * whose attempt fails goes on in a job of its own, and the others are sent.
   */
  record?: boolean;
  /** The first delivery's attempt failed just before this job was queued: the first run only waits for the backoff. */
  backoff?: boolean;
  /** A job queued by an earlier build: one delivery. */
  deliveryId?: string;
}

/** The deliveries of a job, in order. */
export function deliveryIdsOf(data: DeliveryJobData): string[] {
  return data.deliveryIds ?? (data.deliveryId ? [data.deliveryId] : []);
}

/**
 * An id that sorts by the change's cursor: the first 16 hex digits are the cursor, the rest random.
 * Jobs of one record run in order of (creation time, id) (the queue's `key_strict_fifo` policy), and
 * several changes of one record are queued by one statement (one creation time): their ids order them.
 */
export function cursorOrderedId(cursor: string): string {
  const hex = BigInt(cursor).toString(16).padStart(16, '0');
  const random = randomBytes(8).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${random.slice(0, 4)}-${random.slice(4)}`;
}

/** The jobs of one record of one webhook run one at a time, in order. */
export function recordKey(webhookId: string, recordId: string): string {
  return `${webhookId}:${recordId}`;
}

/** The dispatcher's pages of one webhook run one at a time, in order. */
export function webhookKey(webhookId: string): string {
  return webhookId;
}

/**
 * API requests per second from which this replica counts as busy: its webhook work (dispatching, delivering)
 * is background work and gives the CPU to requests then (longer dispatch intervals, rounds that wait).
 */
const BUSY_REQUESTS_PER_S = 200;

export function busyWithRequests(metrics: Pick<PrometheusService, 'apiRequestsPerSecond'>): boolean {
  return metrics.apiRequestsPerSecond() >= BUSY_REQUESTS_PER_S;
}
