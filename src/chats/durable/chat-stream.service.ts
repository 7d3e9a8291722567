import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../../auth/caller';
import { KeyStreams } from '../../auth/key-streams.service';
import type { SseWriter } from '../../common/sse.writer';
import { DomainError } from '../../common/domain-error';
import { AccessService } from '../../governance/access.service';
import { ChatEvents } from './chat-events.service';
import { ChatFollower } from './chat-follower';
import type { ChatEvent, ChatMessageRow, ChatRow, ChatStatus } from './chat.types';
import { ChatRepository } from './chat.repository';
import { ChatService } from './chat.service';
import { toChatResponse, toMessageResponse } from './chat.dto';
import { visibleTo } from './chat-message.mapper';

/** Statuses in which a chat waits for its client's next message: where `?until=idle` ends a stream. */
const IDLE_STATUSES: readonly ChatStatus[] = ['waiting', 'error'];
/** Messages per read of a stream's catch-up. */
const MESSAGES_PAGE = 500;

/**
 * SSE streams of chats. Events over NOTIFY are hints; what a client receives is re-read from the
 * tables, serialised per connection and tracked by message id, so a resumed stream (Last-Event-ID
 * or ?afterId) delivers every persisted message exactly once, on any replica, as the caller may see
 * it: tool results produced under other access than the caller's are withheld (visibleTo).
 */
@Injectable()
export class ChatStreamService {
  constructor(
    private readonly em: EntityManager,
    private readonly repo: ChatRepository,
    private readonly events: ChatEvents,
    private readonly chats: ChatService,
    private readonly streams: KeyStreams,
    private readonly access: AccessService,
  ) {}

  /**
   * Checks the cursor and the chat first and only then calls `open` for the raw response, so a 400
   * or 404 is still a normal JSON error. A Last-Event-ID header wins over ?afterId. With `until:
   * 'idle'` the stream ends with an `end` event once it has sent a `waiting` or `error` status, the
   * catch-up's included, so a client can follow one turn and be done.
   */
  async streamChat(
    caller: Caller,
    chatId: string,
    resume: { lastEventId?: string; afterId?: number; until?: 'idle' },
    open: () => ServerResponse,
  ): Promise<void> {
    let lastId = resume.afterId ?? 0;
    if (resume.lastEventId !== undefined) {
      if (!/^\d{1,18}$/.test(resume.lastEventId))
        throw new DomainError('validation_failed', 'Last-Event-ID must be a message id');
      lastId = Number(resume.lastEventId);
    }
    // Subscribed first, then one read checks the chat and gives where the stream starts: nothing committed after
    // that read can be missed, and a chat the caller may not follow is refused before the response opens.
    const follower = new ChatFollower(this.events, chatId);
    let start: { chat: ChatRow; messages: ChatMessageRow[] } | undefined;
    // The chat's newest event as of that read: a status event up to it (heard while the read ran) is already
    // shown by the read, and sent again it would replay a turn that is over.
    let shownUpTo = 0;
    let writer: SseWriter;
    try {
      const read = await this.chats.getWithMessages(caller, chatId, lastId, MESSAGES_PAGE);
      start = read;
      shownUpTo = read.lastEventId;
      writer = this.streams.open(caller, open);
    } catch (error) {
      follower.stop();
      throw error;
    }
    // Read for each batch: access that changes while the stream is open applies to what it sends next.
    const fingerprint = () => this.access.fingerprint(caller);
    /** Sends the visible ones of a page of messages; whether it was a whole page (more may follow). */
    const sendPage = async (rows: ChatMessageRow[]) => {
      for (const row of visibleTo(rows, await fingerprint())) {
        writer.send(toMessageResponse(row), { event: 'message', id: row.id });
        lastId = row.id;
      }
      return rows.length === MESSAGES_PAGE;
    };
    const sendMessages = async () => {
      while (await sendPage(await this.repo.messages(this.em.fork(), chatId, lastId, MESSAGES_PAGE)));
    };
    /**
     * A status event. Statuses from NOTIFY are sent as they came, in commit order, so every transition
     * shows; requires_action and error (and a catch-up without a known status) re-read the chat for
     * the details only the table has.
     */
    const sendStatus = async (status?: ChatStatus, read?: ChatRow) => {
      let sent: ChatStatus;
      if (status && status !== 'requires_action' && status !== 'requires_approval' && status !== 'error') {
        writer.send({ status, lastError: null }, { event: 'status' });
        sent = status;
      } else {
        const chat = read ?? (await this.repo.find(this.em.fork(), chatId, caller.owner));
        if (!chat) {
          writer.send({ status: 'deleted' }, { event: 'status' });
          writer.close();
          return;
        }
        sent = status ?? chat.status;
        writer.send({ status: sent, lastError: chat.lastError }, { event: 'status' });
        if (chat.status === 'requires_action' && sent === 'requires_action') {
          writer.send(
            { pendingToolCalls: toChatResponse(chat, await fingerprint()).pendingToolCalls },
            { event: 'action_required' },
          );
        }
        if (chat.status === 'requires_approval' && sent === 'requires_approval') {
          writer.send({ requiredAction: toChatResponse(chat, await fingerprint()).requiredAction }, { event: 'action_required' });
        }
      }
      if (resume.until === 'idle' && IDLE_STATUSES.includes(sent)) {
        writer.send({ status: sent }, { event: 'end' });
        writer.close();
      }
    };
    const handle = async (event: ChatEvent, id?: number) => {
      switch (event.type) {
        // A chat's messages commit in id order and their events arrive in that order, so a new message that
        // came with its event is the next one: sent as it is. Otherwise one read sends it and any after it.
        case 'message': {
          if (event.messageId <= lastId) return;
          if (!event.message) return sendMessages();
          const { id, createdAt } = event.message;
          // The same mapping as a message read back (GET /messages): one shape on both paths.
          const row = { ...event.message, chatId, clientId: null, keyId: null, createdAt: new Date(createdAt) };
          const [visible] = visibleTo([row], await fingerprint());
          writer.send(toMessageResponse(visible), { event: 'message', id });
          lastId = id;
          return;
        }
        case 'message_part':
          if (event.access && event.access !== (await fingerprint())) return;
          writer.send({ delta: event.delta }, { event: 'message_part' });
          return;
        // The event's own status, in commit order: a stream shows every transition, not just the latest. The
        // messages committed with it or before it were announced by their own events, which came first.
        case 'status':
          if (id !== undefined && id <= shownUpTo) return;
          return sendStatus(event.status);
        case 'retry':
          writer.send({ attempt: event.attempt, delayMs: event.delayMs, error: event.error }, { event: 'retry' });
          return;
        case 'error':
          writer.send({ code: event.code, message: event.message }, { event: 'error' });
          return;
        case 'deleted':
          return sendStatus();
        default:
          return;
      }
    };
    writer.onClose(() => follower.stop());
    // Everything a client sees goes through the follower's queue: messages, then statuses, in commit order.
    follower.follow(chatId, {
      // The first catch-up sends what the opening read found (the chat's status as of that read, unless more
      // messages than one page came after it); later ones (after a lost LISTEN connection) read again.
      catchUp: async () => {
        const read = start;
        start = undefined;
        if (read && !(await sendPage(read.messages))) return sendStatus(undefined, read.chat);
        await sendMessages();
        await sendStatus();
      },
      handle,
      failed: () => writer.close(),
    });
  }

  /** The caller's chat list changes, for sidebars and inboxes. */
  watch(caller: Caller, open: () => ServerResponse): void {
    const writer = this.streams.open(caller, open);
    const unsubscribe = this.events.subscribe((event) => {
      if (!('owner' in event) || event.owner !== caller.owner) return;
      switch (event.type) {
        case 'created':
          return writer.send({ chatId: event.chatId, status: event.status }, { event: 'created' });
        case 'status':
          return writer.send({ chatId: event.chatId, status: event.status }, { event: 'status_change' });
        case 'action_required':
          return writer.send({ chatId: event.chatId }, { event: 'action_required' });
        case 'deleted':
          return writer.send({ chatId: event.chatId }, { event: 'deleted' });
        default:
          return;
      }
    });
    writer.onClose(unsubscribe);
    writer.send({ subject: caller.subject }, { event: 'ready' });
  }
}
