/**
 * A counting semaphore with a FIFO queue: at most `size` holders at once, the others wait in the
 * order they came. A waiter whose signal aborts leaves the queue at once with `onAbort()`'s error.
 */
export class Semaphore {
  private held = 0;
  private readonly queue: Array<{ grant: () => void }> = [];

  constructor(readonly size: number) {}

  /** Holders now. */
  get inUse(): number {
    return this.held;
  }

  /** Callers queued for a slot. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Resolves with the release function once a slot is free; rejects with `onAbort()` if `signal` aborts first. */
  acquire(signal: AbortSignal | undefined, onAbort: () => Error): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(onAbort());
    if (this.held < this.size && this.queue.length === 0) {
      this.held++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal?.removeEventListener('abort', leave);
          resolve(this.releaser());
        },
      };
      const leave = () => {
        const index = this.queue.indexOf(waiter);
        if (index >= 0) this.queue.splice(index, 1);
        reject(onAbort());
      };
      signal?.addEventListener('abort', leave, { once: true });
      this.queue.push(waiter);
    });
  }

  /** Runs `work` holding a slot. */
  async run<T>(signal: AbortSignal | undefined, onAbort: () => Error, work: () => Promise<T>): Promise<T> {
    const release = await this.acquire(signal, onAbort);
    try {
      return await work();
    } finally {
      release();
    }
  }

  /** A release that works once: the slot passes straight to the next waiter, if any. */
  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      if (next) next.grant();
      else this.held--;
    };
  }
}
