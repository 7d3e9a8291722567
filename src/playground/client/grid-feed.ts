import { changeStreamUrl, streamToken, type Change } from './grid-api';

export type FeedState = 'connecting' | 'live' | 'reconnecting' | 'off';

/** Longest wait between two attempts to reopen a stream the server closed. */
const MAX_RETRY_MS = 30_000;
/** Failed reopenings after which the feed starts again from now rather than from its last cursor (expired, 410). */
const RESUME_ATTEMPTS = 3;

/**
 * Follows one object's change feed with the browser's EventSource. EventSource cannot send the API key, so each
 * connection opens with a fresh stream token; the browser resumes a dropped connection by itself (Last-Event-ID),
 * and when the server refuses that (the token expired, the key lost access), a new token resumes after the last
 * change received.
 */
export class ChangeFeed {
  private source?: EventSource;
  private lastCursor?: string;
  private failures = 0;
  private retry?: ReturnType<typeof setTimeout>;
  private stopped = false;
  private opened!: () => void;
  /** Settles once the stream is first open (or the feed stopped): changes committed after that reach the grid. */
  readonly ready = new Promise<void>((resolve) => (this.opened = resolve));

  constructor(
    /** The Bearer at each (re)connection: a sign-in's access token may have been renewed since the last one. */
    private readonly key: () => string,
    private readonly object: string,
    private readonly handlers: { change: (change: Change) => void; state: (state: FeedState) => void },
  ) {
    void this.open();
  }

  stop(): void {
    this.stopped = true;
    this.opened();
    clearTimeout(this.retry);
    this.source?.close();
    this.source = undefined;
    this.handlers.state('off');
  }

  private async open(): Promise<void> {
    this.handlers.state(this.failures ? 'reconnecting' : 'connecting');
    let token: string;
    try {
      token = await streamToken(this.key());
    } catch {
      this.scheduleRetry();
      return;
    }
    if (this.stopped) return;
    const after = this.failures < RESUME_ATTEMPTS ? this.lastCursor : undefined;
    const source = new EventSource(changeStreamUrl(this.object, token, after));
    this.source = source;
    source.onopen = () => {
      this.failures = 0;
      this.opened();
      this.handlers.state('live');
    };
    source.addEventListener('change', (event) => {
      this.lastCursor = event.lastEventId || this.lastCursor;
      this.handlers.change(JSON.parse(event.data as string) as Change);
    });
    source.onerror = () => {
      if (source !== this.source) return;
      if (source.readyState === EventSource.CLOSED) this.scheduleRetry();
      else this.handlers.state('reconnecting');
    };
  }

  private scheduleRetry(): void {
    if (this.stopped) return;
    this.source?.close();
    this.source = undefined;
    this.failures++;
    this.handlers.state('reconnecting');
    this.retry = setTimeout(() => void this.open(), Math.min(MAX_RETRY_MS, 1000 * 2 ** this.failures));
  }
}
