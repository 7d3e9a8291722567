import { randomBytes } from 'node:crypto';

/** The job queue of webhook deliveries. */
export const DELIVERY_QUEUE = 'webhook-deliveries';

/** What a delivery job carries: only the delivery's id; everything else is read when it runs. */
export interface DeliveryJobData {
  deliveryId: string;
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
