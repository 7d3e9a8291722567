import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { PgPubSub } from '../../database/pg-pubsub.service';
import type { ChatEvent } from './chat.types';

export type ChatEventOrResync = ChatEvent | { type: 'resync' };

type Listener = (event: ChatEventOrResync) => void;

/**
 * Typed chat events over the Postgres pub/sub: publish inside the writing transaction, subscribe
 * anywhere. A listener of one chat is found by the chat's id, so each event costs the same however
 * many streams are open on the replica.
 */
@Injectable()
export class ChatEvents {
  private readonly byChat = new Map<string, Set<Listener>>();
  private routing?: () => void;

  constructor(private readonly pubsub: PgPubSub) {}

  publish(event: ChatEvent, em?: EntityManager): Promise<void> {
    return this.pubsub.publish(event, em);
  }

  /** Every event of every chat. */
  subscribe(listener: Listener): () => void {
    return this.pubsub.subscribe((event) => listener(event as unknown as ChatEventOrResync));
  }

  /** The events of one chat, and `resync` after a lost LISTEN connection. */
  subscribeChat(chatId: string, listener: Listener): () => void {
    this.routing ??= this.subscribe((event) => this.route(event));
    let listeners = this.byChat.get(chatId);
    if (!listeners) this.byChat.set(chatId, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (!listeners.size && this.byChat.get(chatId) === listeners) this.byChat.delete(chatId);
    };
  }

  private route(event: ChatEventOrResync): void {
    if (event.type === 'resync') {
      for (const listeners of [...this.byChat.values()]) for (const listener of [...listeners]) listener(event);
      return;
    }
    const listeners = this.byChat.get(event.chatId);
    if (listeners) for (const listener of [...listeners]) listener(event);
  }
}
