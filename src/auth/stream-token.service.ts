import { EntityManager } from '@mikro-orm/postgresql';
import { Inject, Injectable } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { generateStreamToken, hashSecret, STREAM_TOKEN_PATTERN } from './api-key.secret';
import type { Caller } from './caller';
import { StreamTokenResponse } from './stream-token.dto';
import { StreamTokenGrant, StreamTokenRepository } from './stream-token.repository';

/**
 * The chats a token may be bound to. Durable chats own them and sit above auth, so they register this
 * lookup at start-up; auth never reads their table.
 */
export interface StreamTokenChats {
  /** Whether `owner` owns the chat (read in `em`'s transaction). */
  owns(em: EntityManager, chatId: string, owner: string): Promise<boolean>;
  /** The id of `owner`'s chat that its AI SDK client named `clientId`, if any. */
  ofClientId(em: EntityManager, owner: string, clientId: string): Promise<string | undefined>;
}

/**
 * Stream tokens: a browser's EventSource cannot send Authorization, so a page trades its key for a
 * token that opens event streams, and nothing else, for STREAM_TOKEN_TTL_MS. Tokens are random and
 * stored hashed in the shared database rather than signed with a secret: every replica can check
 * them without a key to distribute, a revoked key's tokens stop at once (checked on every use), and
 * the per-key cap can count them.
 */
@Injectable()
export class StreamTokenService {
  constructor(
    private readonly em: EntityManager,
    private readonly repo: StreamTokenRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private chats?: StreamTokenChats;

  useChats(chats: StreamTokenChats): void {
    this.chats = chats;
  }

  private chatLookup(): StreamTokenChats {
    if (!this.chats) throw new Error('No stream token chats registered: the durable chats module is not loaded');
    return this.chats;
  }

  /** A token for the caller's key, bound to `chatId` when given (a chat the caller does not own is a 404). */
  async create(caller: Caller, chatId?: string): Promise<StreamTokenResponse> {
    const em = this.em.fork();
    // Expired tokens go as new ones come, so the table holds little more than the live ones.
    await this.repo.deleteExpired(em);
    const token = generateStreamToken();
    const expiresAt = await em.transactional(async (tx) => {
      // The key's row lock serialises its creations, so two at once cannot both pass the cap.
      if (!(await this.repo.lockActiveKey(tx, caller.keyId))) {
        throw new DomainError('unauthorized', 'Unknown or revoked API key');
      }
      if (chatId !== undefined && !(isUuid(chatId) && (await this.chatLookup().owns(tx, chatId, caller.owner)))) {
        throw new DomainError('chat_not_found', `Chat "${chatId}" not found`);
      }
      const live = await this.repo.live(tx, caller.keyId);
      const limit = this.config.streamTokensPerKey;
      if (live.count >= limit) {
        throw new DomainError(
          'too_many_stream_tokens',
          `This key has ${live.count} unexpired stream tokens, the most allowed at once; use one or wait until one expires`,
          { live: live.count, limit },
          { retryAfterSeconds: Math.max(1, Math.ceil(live.firstExpiresInMs / 1000)) },
        );
      }
      return this.repo.insert(tx, {
        hash: hashSecret(token),
        keyId: caller.keyId,
        chatId: chatId?.toLowerCase() ?? null,
        ttlMs: this.config.streamTokenTtlMs,
      });
    });
    return { token, expiresAt: expiresAt.toISOString() };
  }

  /** The id of the caller's chat that its AI SDK client named `clientId`; undefined when there is none. */
  chatOfClientId(caller: Caller, clientId: string): Promise<string | undefined> {
    return this.chatLookup().ofClientId(this.em.fork(), caller.owner, clientId);
  }

  /** What an unexpired token of an active key grants; undefined for anything else. */
  async verify(token: string): Promise<StreamTokenGrant | undefined> {
    if (!STREAM_TOKEN_PATTERN.test(token)) return undefined;
    return this.repo.findValid(this.em.fork(), hashSecret(token));
  }
}
