import type { ChatEventOrResync, ChatEvents } from './chat-events.service';
import type { ChatEvent } from './chat.types';

/** What a stream does with the chat it follows. */
export interface ChatFollowing {
  /** Sends what the tables hold beyond what the client has: at the start, and after a lost LISTEN connection. */
  catchUp(): Promise<void>;
  /**
   * One event of the chat (a hint: what goes out is re-read or checked against the tables); `id` is its row
   * in `chat_events`, which orders one chat's events.
   */
  handle(event: ChatEvent, id?: number): void | Promise<void>;
  /** A catch-up or an event threw: the stream cannot go on. */
  failed(error: unknown): void;
}

/**
 * Follows one chat for a stream, on whichever replica the client is connected to: its events and its
 * catch-ups run one at a time through one queue, in the order events arrived, so what a client receives
 * keeps commit order. It subscribes when created and holds back what arrives until `follow`: a route may
 * create it before committing what starts a turn, or before reading where the stream starts, so not even
 * the turn's first event can be missed. Created with the chat's id, it hears that chat's events only (a
 * route that knows the chat already); without, every event until `follow` names the chat.
 * Once stopped, nothing more runs.
 */
export class ChatFollower {
  private unsubscribe: () => void;
  private readonly buffered: Array<[ChatEventOrResync, number | undefined]> = [];
  private chatId?: string;
  private following?: ChatFollowing;
  private queue: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly events: ChatEvents,
    private readonly subscribedTo?: string,
  ) {
    const listener = (event: ChatEventOrResync, id?: number) => {
      if (this.following === undefined) this.buffered.push([event, id]);
      else this.accept(event, id);
    };
    this.unsubscribe = subscribedTo === undefined ? events.subscribe(listener) : events.subscribeChat(subscribedTo, listener);
  }

  /** Caught up first, then what arrived meanwhile and what arrives from now on. */
  follow(chatId: string, following: ChatFollowing): void {
    if (this.stopped) return;
    this.chatId = chatId;
    this.following = following;
    if (this.subscribedTo !== chatId) {
      // From here on only this chat's events reach the stream (found by the chat's id, whatever else the replica streams).
      this.unsubscribe();
      this.unsubscribe = this.events.subscribeChat(chatId, (event, id) => this.accept(event, id));
    }
    this.enqueue(() => following.catchUp());
    for (const [event, id] of this.buffered.splice(0)) this.accept(event, id);
  }

  /** Stops listening; what is queued no longer runs. */
  stop(): void {
    this.stopped = true;
    this.unsubscribe();
    this.buffered.length = 0;
  }

  private accept(event: ChatEventOrResync, id?: number): void {
    if (this.stopped) return;
    if (event.type === 'resync') return this.enqueue(() => this.following!.catchUp());
    if (event.chatId !== this.chatId) return;
    this.enqueue(() => this.following!.handle(event, id));
  }

  private enqueue(task: () => void | Promise<void>): void {
    this.queue = this.queue
      .then(() => (this.stopped ? undefined : task()))
      .catch((error: unknown) => this.following!.failed(error));
  }
}
