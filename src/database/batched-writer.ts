import { Logger } from '@nestjs/common';

export interface BatchedWriterOptions {
  /** Entries written per statement. */
  maxBatch: number;
  /** How long an entry waits for others to share its statement, milliseconds. */
  delayMs: number;
  /** Entries held while the database does not take them; past it the oldest are dropped (and logged). */
  maxBuffered: number;
  /** What the entries are, for the log. */
  what: string;
}

/**
 * Rows a request need not wait for (usage of a model call, the audit of a tool call), written in
 * batches: one statement for up to `maxBatch` entries, at most `delayMs` after the first, so a
 * busy replica spends one round trip on many of them. Its owner flushes it on shutdown; a failed
 * write keeps the entries for the next attempt, within `maxBuffered`.
 */
export class BatchedWriter<T> {
  private readonly logger: Logger;
  private buffer: T[] = [];
  private timer?: NodeJS.Timeout;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (batch: T[]) => Promise<void>,
    private readonly options: BatchedWriterOptions,
  ) {
    this.logger = new Logger(`BatchedWriter(${options.what})`);
  }

  /** Entries queued and not yet written. */
  get pending(): number {
    return this.buffer.length;
  }

  push(entry: T): void {
    this.buffer.push(entry);
    if (this.buffer.length > this.options.maxBuffered) {
      const dropped = this.buffer.splice(0, this.buffer.length - this.options.maxBuffered);
      this.logger.error({ msg: `${this.options.what} dropped: the database does not take them`, dropped: dropped.length });
    }
    if (this.buffer.length >= this.options.maxBatch) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.options.delayMs).unref();
  }

  /** Writes every queued entry; resolves once they are in (or their write failed and was logged). */
  flush(): Promise<void> {
    this.clearTimer();
    this.writing = this.writing.then(async () => {
      while (this.buffer.length) {
        const batch = this.buffer.splice(0, this.options.maxBatch);
        try {
          await this.write(batch);
        } catch (error) {
          // Put back for the next attempt (bounded by maxBuffered), and stop this round.
          this.buffer.unshift(...batch);
          this.logger.error({ msg: `could not write ${this.options.what}`, error: (error as Error).message });
          this.timer ??= setTimeout(() => void this.flush(), 5_000).unref();
          return;
        }
      }
    });
    return this.writing;
  }

  /** The last flush, for shutdown: no timer is left behind. */
  async close(): Promise<void> {
    await this.flush();
    this.clearTimer();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
