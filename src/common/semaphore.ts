/** How a caller waits for a slot beyond its signal. */
export interface SlotWait {
  /** The API key the slot is for: one key holds at most the semaphore's `perKey` slots at once. None: only `size` applies. */
  key?: string;
  /** The longest wait in the queue; then `onTimeout()`'s error. None: as long as the signal lets it. */
  timeoutMs?: number;
  onTimeout?: () => Error;
}

interface Waiter {
  key?: string;
  grant(): void;
}

/** The slots one key may hold of `size`: `share` (0..1] of them, at least one. */
export function keyShareOf(size: number, share: number): number {
  // The epsilon keeps 10 × 0.3 at 3 rather than 2.
  return Math.min(size, Math.max(1, Math.floor(size * share + 1e-9)));
}

/**
 * A counting semaphore with a FIFO queue: at most `size` holders at once, the others wait in the
 * order they came. A waiter whose signal aborts leaves the queue at once with `onAbort()`'s error.
 *
 * With `perKey` below `size`, one API key holds at most `perKey` slots at once: its excess calls wait
 * for one of its own slots while other keys' calls take the free ones at once, so one key's slow or
 * abandoned calls never hold the whole. A freed slot goes to the first waiter whose key is below its
 * share; slots taken without a key count only towards `size`.
 */
export class Semaphore {
  private held = 0;
  private readonly heldByKey = new Map<string, number>();
  private readonly queue: Waiter[] = [];

  constructor(
    readonly size: number,
    readonly perKey = size,
  ) {}

  /** Holders now. */
  get inUse(): number {
    return this.held;
  }

  /** Callers queued for a slot. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * Resolves with the release function once a slot is free; rejects with `onAbort()` if `signal`
   * aborts first, or with `wait.onTimeout()` once `wait.timeoutMs` passed.
   */
  acquire(signal: AbortSignal | undefined, onAbort: () => Error, wait: SlotWait = {}): Promise<() => void> {
    const { key } = wait;
    if (signal?.aborted) return Promise.reject(onAbort());
    // Free slots are handed to eligible waiters at once: whoever still waits is held back by its key's share.
    if (this.admits(key)) return Promise.resolve(this.take(key));
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const leave = (error: Error) => {
        const index = this.queue.indexOf(waiter);
        if (index < 0) return;
        this.queue.splice(index, 1);
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        reject(error);
      };
      const aborted = () => leave(onAbort());
      const waiter: Waiter = {
        key,
        grant: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', aborted);
          resolve(this.take(key));
        },
      };
      this.queue.push(waiter);
      signal?.addEventListener('abort', aborted, { once: true });
      if (wait.timeoutMs !== undefined) timer = setTimeout(() => leave((wait.onTimeout ?? onAbort)()), wait.timeoutMs);
    });
  }

  /** Runs `work` holding a slot. */
  async run<T>(signal: AbortSignal | undefined, onAbort: () => Error, work: () => Promise<T>, wait?: SlotWait): Promise<T> {
    const release = await this.acquire(signal, onAbort, wait);
    try {
      return await work();
    } finally {
      release();
    }
  }

  private admits(key: string | undefined): boolean {
    return this.held < this.size && (key === undefined || (this.heldByKey.get(key) ?? 0) < this.perKey);
  }

  /** Takes a slot; its release works once and passes the slot on to the first waiter it admits. */
  private take(key: string | undefined): () => void {
    this.held++;
    if (key !== undefined) this.heldByKey.set(key, (this.heldByKey.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
      if (key !== undefined) {
        const left = this.heldByKey.get(key)! - 1;
        if (left) this.heldByKey.set(key, left);
        else this.heldByKey.delete(key);
      }
      while (this.held < this.size) {
        const index = this.queue.findIndex((waiter) => this.admits(waiter.key));
        if (index < 0) break;
        this.queue.splice(index, 1)[0].grant();
      }
    };
  }
}
