import type { CompiledQuery } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSession } from './data-pool';

/** Rows one statement of a retention cleanup changes at most, and the pause after each full batch. */
export const RETENTION_BATCH = 1000;
const RETENTION_PAUSE_MS = 50;

/**
 * Runs a cleanup statement (`batch(limit)` changes at most `limit` rows and answers how many, as `n`) until it
 * changes fewer than a full batch; how many rows in all. Each batch is a statement of its own and a pause
 * follows each full one, so a large cleanup never holds locks for long and leaves writers the CPU.
 */
export async function drainBatches(
  session: DataSession,
  batch: (limit: number) => CompiledQuery<{ n: string }>,
): Promise<number> {
  let total = 0;
  for (;;) {
    const [row] = await session.query(batch(RETENTION_BATCH));
    const n = Number(row.n);
    total += n;
    if (n < RETENTION_BATCH) return total;
    await sleep(RETENTION_PAUSE_MS);
  }
}
