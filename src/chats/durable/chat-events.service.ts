import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { PgPubSub } from '../../database/pg-pubsub.service';
import type { ChatEvent } from './chat.types';

export type ChatEventOrResync = ChatEvent | { type: 'resync' };

/** Typed chat events over the Postgres pub/sub: publish inside the writing transaction, subscribe anywhere. */
@Injectable()
export class ChatEvents {
  constructor(private readonly pubsub: PgPubSub) {}

  publish(event: ChatEvent, em?: EntityManager): Promise<void> {
    return this.pubsub.publish(event, em);
  }

  subscribe(listener: (event: ChatEventOrResync) => void): () => void {
    return this.pubsub.subscribe((event) => listener(event as unknown as ChatEventOrResync));
  }
}
