import { readRecordFields, type GridRecord } from './grid-api';
import { affectedRows, type Dependency } from './grid-computed';
import { ChangeFeed } from './grid-feed';

/** How long changes of related records gather before the rows they touch are read again. */
const DEBOUNCE_MS = 250;
/** Most rows one read asks for (a page is 25, but pasted rows join it). */
const MAX_ROWS_PER_READ = 100;
/** Most objects followed for one grid (besides its own object's feed). */
const MAX_FEEDS = 6;

/** What following related objects needs of the grid around it. */
export interface RelatedContext {
  key(): string | undefined;
  /** The object the grid shows. */
  object: string;
  /** The rows shown, by id, with the values they hold (their lookups among them). */
  rows(): ReadonlyMap<string, GridRecord>;
  /** The computed fields shown: what is read again. */
  fields(): string[];
  /** Fresh values of some rows' computed fields. */
  refreshed(records: GridRecord[]): void;
}

/**
 * Keeps the computed values of the rows shown up to date when records of other objects change: follows the change
 * feed of each object the shown computed fields read (a rollup's or count's related object, a lookup value's
 * target), and reads the affected rows' computed fields again. Bounded work per change: the rows to read gather
 * for a moment, at most one read is in flight, and what arrives meanwhile is read once after it.
 */
export class RelatedFeeds {
  private readonly feeds: ChangeFeed[] = [];
  /** Rows to read again at the next read. */
  private readonly pending = new Set<string>();
  private timer?: ReturnType<typeof setTimeout>;
  private inFlight?: AbortController;
  private stopped = false;

  constructor(
    private readonly ctx: RelatedContext,
    dependencies: Map<string, Dependency[]>,
    fallbackKey: string,
  ) {
    // Each feed is one of the key's event streams, of which the server allows a few: the nearest objects first.
    for (const [object, list] of [...dependencies].slice(0, MAX_FEEDS)) {
      this.feeds.push(
        new ChangeFeed(() => this.ctx.key() ?? fallbackKey, object, {
          change: (change) => this.schedule(affectedRows(change, list, this.ctx.rows())),
          state: () => undefined, // the grid's status shows its own object's feed
        }),
      );
    }
  }

  /** Settles once every related feed is open (or stopped): changes committed after that reach the rows. */
  get ready(): Promise<void> {
    return Promise.all(this.feeds.map((feed) => feed.ready)).then(() => undefined);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.inFlight?.abort();
    for (const feed of this.feeds) feed.stop();
  }

  private schedule(ids: string[]): void {
    if (this.stopped || !ids.length) return;
    for (const id of ids) this.pending.add(id);
    if (this.timer === undefined && !this.inFlight) this.timer = setTimeout(() => void this.read(), DEBOUNCE_MS);
  }

  private async read(): Promise<void> {
    this.timer = undefined;
    const key = this.ctx.key();
    const fields = this.ctx.fields();
    const shown = this.ctx.rows();
    // Rows that left the page meanwhile are read with the next page; many rows (pasted ones too) a batch at a time.
    for (const id of this.pending) if (!shown.has(id)) this.pending.delete(id);
    const ids = [...this.pending].slice(0, MAX_ROWS_PER_READ);
    for (const id of ids) this.pending.delete(id);
    if (this.stopped || !key || !fields.length) this.pending.clear();
    if (this.stopped || !key || !ids.length || !fields.length) return;
    const reading = new AbortController();
    this.inFlight = reading;
    try {
      const records = await readRecordFields(key, this.ctx.object, ids, fields, reading.signal);
      if (!this.stopped) this.ctx.refreshed(records);
    } catch {
      // Aborted (the grid moved on), or the server refused: the next change or page read shows the values.
    } finally {
      this.inFlight = undefined;
      // Rows left for another batch, or changes that arrived during the read: one more read, after the same pause.
      if (!this.stopped && this.pending.size) this.timer = setTimeout(() => void this.read(), DEBOUNCE_MS);
    }
  }
}
