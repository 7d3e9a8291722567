import { EntityManager } from '@mikro-orm/postgresql';
import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../../auth/caller';
import { StreamTokenService } from '../../auth/stream-token.service';
import { DomainError } from '../../common/domain-error';
import type { ErrorCode } from '../../common/error-codes';
import { CAP_RETRY_AFTER_SECONDS, clampLimit } from '../../common/limits';
import type { PaginationQueryDto } from '../../common/pagination.dto';
import { isUuid } from '../../common/uuid';
import { APP_CONFIG, type AppConfig } from '../../config/app-config';
import { AccessService } from '../../governance/access.service';
import { AgentRuntime } from '../../runtime/agent-runtime.service';
import { ChatEvents } from './chat-events.service';
import { visibleTo } from './chat-message.mapper';
import { ChatRepository, ChatWrite } from './chat.repository';
import type { StatusChange } from './chat.rows';
import { ChatMessageRow, ChatPart, ChatRow, ChatStatus, PendingToolCall } from './chat.types';
import {
  ChatListResponse,
  ChatMessagesResponse,
  ChatResponse,
  CreateChatDto,
  MessagesQueryDto,
  toChatResponse,
  toMessageResponse,
  ToolResultDto,
} from './chat.dto';
import type { ChatContext } from '../../runtime/chat-context.dto';
import type { DynamicTool } from '../../runtime/client-tools';

/** Messages per GET /messages response; clients page on with ?afterId=. */
const MESSAGES_PAGE = 1000;
const CHATS_DEFAULT_LIMIT = 50;
const CHATS_MAX_LIMIT = 200;
/** Where a new user turn may start from. */
const TURN_STARTS: readonly ChatStatus[] = ['waiting', 'error'];
/** Chats a replica keeps what their next turn is admitted for (see ChatService.postMessage). */
const SEEN_CHATS_MAX = 10_000;

/** What a next message is admitted for without reading its chat: checked again by the write. */
type SeenChat = Pick<ChatRow, 'id' | 'owner' | 'agent' | 'dynamicTools'>;

/**
 * The durable chat API: every state change happens in one transaction under the chat's row lock
 * and publishes its event on commit. Workers (ChatWorker) pick up `pending` chats.
 */
@Injectable()
export class ChatService {
  /** The tail of each owner's queue of turn-starting transactions on this replica. */
  private readonly ownerQueues = new Map<string, Promise<unknown>>();
  /** Chats this replica created or read for a next message, as their turns are admitted (see postMessage). */
  private readonly seen = new Map<string, SeenChat>();

  constructor(
    private readonly em: EntityManager,
    private readonly repo: ChatRepository,
    private readonly events: ChatEvents,
    private readonly runtime: AgentRuntime,
    private readonly access: AccessService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    streamTokens: StreamTokenService,
  ) {
    streamTokens.useChats({
      owns: async (em, chatId, owner) => (await repo.find(em, chatId, owner)) !== undefined,
      ofClientId: async (em, owner, clientId) => (await repo.findByClientId(em, owner, clientId))?.id,
    });
  }

  /**
   * Admitted (AgentRuntime.admit: key, agent, tools, LLM endpoint, quota) before anything is stored.
   * `id`: the chat's id, chosen by a caller that stored it beforehand (a scheduled question's run).
   */
  async create(caller: Caller, dto: CreateChatDto, id?: string): Promise<ChatResponse> {
    const { agent, dynamicTools } = await this.runtime.admit({
      caller,
      agentName: dto.agent,
      declaredTools: { tools: dto.dynamicTools },
    });
    // One statement, a transaction of its own: admission, the chat, its message and their events.
    const { chat } = await this.oneTurnAtATime(caller.owner, () =>
      this.insertChat(this.em.fork(), caller, {
        id,
        agent: agent.name,
        message: dto.message,
        title: dto.title,
        context: dto.context,
        dynamicTools: [...dynamicTools],
      }),
    );
    this.see(chat);
    return toChatResponse(chat, await this.access.fingerprint(caller));
  }

  /**
   * A new chat with its first user message, pending for a worker, in one statement on `em` (in its
   * transaction, if any): the owner's admission (429 at the cap) decides in the same statement. The turn
   * was admitted by the caller (AgentRuntime.admit) and runs as the caller's key. Returns the chat and
   * the message's id.
   */
  async insertChat(em: EntityManager, caller: Caller, input: NewChat): Promise<{ chat: ChatRow; messageId: number }> {
    const id = input.id ?? randomUUID();
    const owner = caller.owner;
    const created = await this.repo.insertChat(
      em,
      {
        id,
        clientId: input.clientId,
        owner,
        ownerRole: caller.role,
        ownerKeyId: caller.keyId,
        agent: input.agent,
        title: input.title ?? input.message.slice(0, 80),
        context: contextOf(input.context),
        dynamicTools: input.dynamicTools,
      },
      {
        admit: { limit: this.config.chatMaxInFlightPerKey },
        messages: [
          { role: 'user', parts: [{ type: 'text', text: input.message }], clientId: input.messageClientId, keyId: caller.keyId },
        ],
        before: [{ type: 'created', chatId: id, owner, status: 'pending' }],
      },
    );
    if (!created) throw await this.tooManyChats(em, owner);
    return { chat: created.chat, messageId: created.messageIds[0] };
  }

  async list(caller: Caller, query: PaginationQueryDto): Promise<ChatListResponse> {
    const limit = clampLimit(query.limit, CHATS_DEFAULT_LIMIT, CHATS_MAX_LIMIT);
    const chats = await this.repo.listOwned(this.em.fork(), caller.owner, limit, query.offset ?? 0);
    const fingerprint = await this.access.fingerprint(caller);
    return { chats: chats.map((chat) => toChatResponse(chat, fingerprint)) };
  }

  async view(caller: Caller, id: string): Promise<ChatResponse> {
    const chat = await this.get(caller, id);
    return toChatResponse(chat, await this.access.fingerprint(caller));
  }

  /** The caller's chat; another owner's chat is as unknown as a missing one. */
  async get(caller: Caller, id: string, em: EntityManager = this.em.fork(), lock = false): Promise<ChatRow> {
    const chat = isUuid(id) ? await this.repo.find(em, id, caller.owner, { lock }) : undefined;
    if (!chat) throw notFound(id);
    return chat;
  }

  /** The caller's chat (as `get`) with its messages after `afterId`, up to `limit`, read in one statement. */
  async getWithMessages(
    caller: Caller,
    id: string,
    afterId: number,
    limit: number,
  ): Promise<{ chat: ChatRow; messages: ChatMessageRow[]; lastEventId: number }> {
    const found = isUuid(id) ? await this.repo.findWithMessages(this.em.fork(), id, caller.owner, afterId, limit) : undefined;
    if (!found) throw notFound(id);
    return found;
  }

  async messages(caller: Caller, id: string, query: MessagesQueryDto): Promise<ChatMessagesResponse> {
    const em = this.em.fork();
    await this.get(caller, id, em);
    const rows = await this.repo.messages(em, id, query.afterId ?? 0, MESSAGES_PAGE);
    return { messages: visibleTo(rows, await this.access.fingerprint(caller)).map(toMessageResponse) };
  }

  /**
   * The last stored result of a tool call in the caller's chat (up to message `upTo`), unless it failed or
   * the caller may not see it: produced under other access than the caller's (see visibleTo).
   */
  async toolResult(
    caller: Caller,
    id: string,
    toolCallId: string,
    upTo = Infinity,
  ): Promise<{ messageId: number; toolName: string; output: unknown } | undefined> {
    const em = this.em.fork();
    await this.get(caller, id, em);
    const rows = await this.repo.messagesWithResult(em, id, toolCallId);
    const row = visibleTo(rows, await this.access.fingerprint(caller))
      .filter((r) => r.id <= upTo)
      .at(-1);
    const part = row?.parts.find((p) => p.type === 'tool-result' && p.toolCallId === toolCallId);
    if (!row || part?.type !== 'tool-result' || part.withheld || part.isError) return undefined;
    return { messageId: row.id, toolName: part.toolName, output: part.output };
  }

  /**
   * A new user turn, run as the caller's key: from waiting or error only, admitted (AgentRuntime.admit)
   * before anything is stored. One statement writes it (status, owner and the cap on chats in flight
   * checked in the write itself). A chat this replica has seen is not read first: its turn is admitted for
   * the agent and client tools seen, and the write also checks that the chat still has them. A refusal (or
   * an admission that fails) goes the long way: the chat read, checked and admitted, written, and, refused
   * again, read once more to say why.
   */
  async postMessage(caller: Caller, id: string, message: string): Promise<void> {
    const seen = this.seen.get(id);
    if (seen?.owner === caller.owner && (await this.postToSeen(caller, seen, message))) return;
    const chat = await this.get(caller, id);
    this.see(chat);
    checkTurnStart(chat);
    await this.admit(caller, chat);
    await this.oneTurnAtATime(caller.owner, async () => {
      const em = this.em.fork();
      const ids = await this.repo.write(em, { ...this.userTurn(chat.id, caller, message), from: TURN_STARTS });
      if (ids) return;
      checkTurnStart(await this.get(caller, id, em));
      throw await this.tooManyChats(em, chat.owner);
    });
  }

  /** Whether the turn was admitted and written for the chat as this replica saw it (see postMessage). */
  private async postToSeen(caller: Caller, chat: SeenChat, message: string): Promise<boolean> {
    try {
      await this.admit(caller, chat);
    } catch {
      return false;
    }
    return this.oneTurnAtATime(caller.owner, async () => {
      const setup = { agent: chat.agent, dynamicTools: chat.dynamicTools };
      const turn = { ...this.userTurn(chat.id, caller, message), from: TURN_STARTS, setup };
      return (await this.repo.write(this.em.fork(), turn)) !== undefined;
    });
  }

  /** Notes what a chat's next turn is admitted for; past SEEN_CHATS_MAX chats it starts over. */
  private see(chat: SeenChat): void {
    if (this.seen.size >= SEEN_CHATS_MAX) this.seen.clear();
    this.seen.set(chat.id, { id: chat.id, owner: chat.owner, agent: chat.agent, dynamicTools: chat.dynamicTools });
  }

  /** The admission of a turn of an existing chat: its agent, for the caller's key as it is now. */
  async admit(caller: Caller, chat: Pick<ChatRow, 'id' | 'agent' | 'dynamicTools'>): Promise<void> {
    await this.runtime.admit({ caller, agentName: chat.agent, dynamicTools: chat.dynamicTools, chatId: chat.id });
  }

  /**
   * Runs the transactions that start turns of one owner one after the other on this replica. They
   * take the owner's admission lock, which they would otherwise wait for inside a transaction, each
   * holding a pooled connection: a burst of one key's requests could take the whole pool from the
   * chats being run. Across replicas the lock still decides.
   */
  oneTurnAtATime<T>(owner: string, work: () => Promise<T>): Promise<T> {
    const previous = this.ownerQueues.get(owner) ?? Promise.resolve();
    const result = previous.then(work, work);
    const tail = result.catch(() => undefined);
    this.ownerQueues.set(owner, tail);
    void tail.then(() => {
      if (this.ownerQueues.get(owner) === tail) this.ownerQueues.delete(owner);
    });
    return result;
  }

  /**
   * A new user turn of `chat` by the caller (admitted already), locked by the caller's transaction: from
   * waiting or error only. Returns the message's id.
   */
  async appendUserMessage(
    em: EntityManager,
    caller: Caller,
    chat: ChatRow,
    message: string,
    messageClientId?: string | null,
  ): Promise<number> {
    checkTurnStart(chat);
    const ids = await this.repo.write(em, this.userTurn(chat.id, caller, message, messageClientId));
    if (!ids) throw await this.tooManyChats(em, chat.owner);
    return ids[0];
  }

  /**
   * The write that starts a user turn as the caller's key: the count of chats in flight, the message,
   * the status, the turn's key and the status event, in one statement.
   */
  private userTurn(chatId: string, caller: Caller, message: string, messageClientId?: string | null): ChatWrite {
    const owner = caller.owner;
    return {
      chatId,
      owner,
      admit: { limit: this.config.chatMaxInFlightPerKey },
      messages: [{ role: 'user', parts: [{ type: 'text', text: message }], clientId: messageClientId, keyId: caller.keyId }],
      status: { status: 'pending', resetTurn: true, lastError: null },
      turnKeyId: caller.keyId,
      after: [{ type: 'status', chatId, owner, status: 'pending' }],
    };
  }

  /**
   * Results for every pending client tool call, in one request. Checked under the row lock, so of
   * concurrent posts exactly one succeeds and the others find the chat no longer waiting (409).
   */
  async postToolResults(caller: Caller, id: string, results: ToolResultDto[]): Promise<void> {
    await this.admit(caller, await this.get(caller, id));
    await this.oneTurnAtATime(caller.owner, () =>
      this.em.fork().transactional(async (em) => {
        const chat = await this.get(caller, id, em, true);
        await this.acceptToolResults(em, caller, chat, results);
      }),
    );
  }

  /**
   * postToolResults for `chat` (admitted already), locked by the caller's transaction: the turn goes on
   * as the caller's key. Returns the id of the message with the results.
   */
  async acceptToolResults(em: EntityManager, caller: Caller, chat: ChatRow, results: ToolResultDto[]): Promise<number> {
    if (chat.status !== 'requires_action') {
      throw new DomainError('chat_not_waiting_for_tools', `The chat is ${chat.status}, not waiting for tool results`, {
        status: chat.status,
      });
    }
    const pending = chat.pendingToolCalls ?? [];
    checkResultIds(pending, results);
    const byId = new Map(pending.map((call) => [call.id, call]));
    const parts: ChatPart[] = results.map((result) => ({
      type: 'tool-result',
      toolCallId: result.toolCallId,
      toolName: byId.get(result.toolCallId)!.name,
      output: result.output,
      isError: result.isError ?? false,
    }));
    const ids = await this.repo.write(em, {
      chatId: chat.id,
      owner: chat.owner,
      admit: { limit: this.config.chatMaxInFlightPerKey },
      // A client's results: no data access of the server produced them, so every caller of the chat sees them.
      messages: [{ role: 'tool', parts, keyId: caller.keyId }],
      status: { status: 'pending' },
      turnKeyId: caller.keyId,
      after: [{ type: 'status', chatId: chat.id, owner: chat.owner, status: 'pending' }],
    });
    if (!ids) throw await this.tooManyChats(em, chat.owner);
    return ids[0];
  }

  /** Any owner's chat, locked for the caller's transaction (who may act on it is the caller's to decide). */
  async lockAnyOwner(em: EntityManager, id: string): Promise<ChatRow | undefined> {
    return isUuid(id) ? this.repo.find(em, id, undefined, { lock: true }) : undefined;
  }

  /** Chats in requires_approval whose earliest proposal expired, locked (skipping those locked elsewhere). */
  lockExpiredApprovals(em: EntityManager, limit: number): Promise<ChatRow[]> {
    return this.repo.lockExpiredActions(em, limit, 'requires_approval');
  }

  /**
   * The results of write proposals of `chat` (locked by the caller's transaction): decided by a person or
   * expired. The model reads each as its call's result. While other proposals still wait the chat stays in
   * requires_approval; after the last one the turn goes on (pending), as the key it ran as. `chat` is
   * updated in place, so several settlements in one transaction see each other.
   */
  async settleProposals(em: EntityManager, chat: ChatRow, results: readonly SettledProposal[]): Promise<void> {
    const pending = chat.pendingToolCalls ?? [];
    const settled = results.filter((result) => pending.some((call) => call.id === result.toolCallId && call.proposal));
    if (!settled.length) return;
    const rest = pending.filter((call) => !settled.some((result) => result.toolCallId === call.id));
    const event = { chatId: chat.id, owner: chat.owner };
    const status: StatusChange = rest.length
      ? {
          status: 'requires_approval',
          pendingToolCalls: rest,
          actionExpiresInMs: Math.max(
            0,
            Math.min(...rest.map((call) => Date.parse(call.proposal?.expiresAt ?? ''))) - Date.now(),
          ),
        }
      : { status: 'pending' };
    await this.repo.write(em, {
      ...event,
      messages: settled.map((result) => ({
        role: 'tool' as const,
        parts: [
          {
            type: 'tool-result' as const,
            toolCallId: result.toolCallId,
            toolName: pending.find((call) => call.id === result.toolCallId)!.name,
            output: result.content,
            isError: result.isError,
          },
        ],
        keyId: result.keyId,
        access: result.access ?? null,
      })),
      status,
      after: [{ type: 'status', ...event, status: status.status }],
    });
    chat.pendingToolCalls = rest.length ? rest : null;
    chat.status = status.status;
  }

  /** Stops the chat: a running model call is cancelled (its worker loses the claim) and the chat waits. */
  async interrupt(caller: Caller, id: string): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const chat = await this.get(caller, id, em, true);
      if (chat.status === 'waiting' || chat.status === 'error') return;
      if (chat.status === 'requires_action' || chat.status === 'requires_approval') {
        await this.writeMissingResults(em, chat, 'interrupted', 'The user interrupted the chat before this tool returned');
      }
      await this.repo.setStatus(em, id, { status: 'waiting', resetTurn: true });
      await this.events.publish({ type: 'interrupt', chatId: id, owner: chat.owner }, em);
      await this.events.publish({ type: 'status', chatId: id, owner: chat.owner, status: 'waiting' }, em);
    });
  }

  async delete(caller: Caller, id: string): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const chat = await this.get(caller, id, em, true);
      await this.repo.deleteChat(em, id);
      await this.events.publish({ type: 'interrupt', chatId: id, owner: chat.owner }, em);
      await this.events.publish({ type: 'deleted', chatId: id, owner: chat.owner }, em);
    });
  }

  /**
   * The 429 of an owner at the cap: one key cannot queue up unbounded work for the shared workers. Every
   * turn start (a new chat's too) counts the owner's chats pending or running in its own write, under the
   * owner's admission lock held until commit, so concurrent requests of one owner cannot both slip under it.
   */
  private async tooManyChats(em: EntityManager, owner: string): Promise<DomainError> {
    const inFlight = await this.repo.countInFlight(em, owner);
    const limit = this.config.chatMaxInFlightPerKey;
    return new DomainError(
      'too_many_chats',
      `This key has ${inFlight} chats pending or running, the most allowed at once; try again when one is answered`,
      { inFlight, limit },
      { retryAfterSeconds: CAP_RETRY_AFTER_SECONDS },
    );
  }

  /**
   * Error results for pending calls nobody answered, so the history stays a valid conversation
   * (every tool call followed by its result) for the next user message.
   */
  async writeMissingResults(em: EntityManager, chat: ChatRow, code: ErrorCode, message: string): Promise<void> {
    const pending: PendingToolCall[] = chat.pendingToolCalls ?? [];
    if (!pending.length) return;
    const parts: ChatPart[] = pending.map((call) => ({
      type: 'tool-result',
      toolCallId: call.id,
      toolName: call.name,
      output: { error: { code, message } },
      isError: true,
    }));
    const messageId = await this.repo.insertMessage(em, chat.id, 'tool', parts);
    await this.events.publish({ type: 'message', chatId: chat.id, owner: chat.owner, messageId }, em);
  }
}

/** The outcome of a write proposal, as its call's result. */
export interface SettledProposal {
  toolCallId: string;
  content: unknown;
  isError: boolean;
  /** The key that decided it; null when it expired. */
  keyId: string | null;
  /** When the result holds record values: the access fingerprint they were read under (see visibleTo). */
  access?: string | null;
}

/** What a new chat starts with; `id` and the client ids only when the caller chose them. */
export interface NewChat {
  id?: string;
  clientId?: string;
  agent: string;
  message: string;
  /** The id a client gave the first message. */
  messageClientId?: string | null;
  title?: string;
  context?: ChatContext | null;
  dynamicTools: DynamicTool[];
}

function notFound(id: string): DomainError {
  return new DomainError('chat_not_found', `Chat "${id}" not found`);
}

/** 409 unless a new user turn may start: the chat waits for the user, or its last turn failed. */
function checkTurnStart(chat: ChatRow): void {
  if (!TURN_STARTS.includes(chat.status)) {
    throw new DomainError('chat_busy', `The chat is ${chat.status}; send the next message when it is waiting`, {
      status: chat.status,
    });
  }
}

/** A context as stored: the present, non-empty values, or null. */
export function contextOf(context: ChatContext | null | undefined): Record<string, string> | null {
  if (!context) return null;
  const entries = Object.entries(context).filter(([, v]) => typeof v === 'string' && v !== '');
  return entries.length ? Object.fromEntries(entries) : null;
}

/** 400 unless the results name each pending call exactly once. */
function checkResultIds(pending: PendingToolCall[], results: ToolResultDto[]): void {
  const withoutOutput = results.find((r) => r.output === undefined);
  if (withoutOutput)
    throw new DomainError('validation_failed', `Result for "${withoutOutput.toolCallId}" has no output (null is fine)`);
  const expected = new Set(pending.map((call) => call.id));
  const seen = new Set<string>();
  const duplicate = results.find((r) => (seen.has(r.toolCallId) ? true : (seen.add(r.toolCallId), false)));
  if (duplicate) throw new DomainError('invalid_tool_results', `Tool call "${duplicate.toolCallId}" has more than one result`);
  const extra = results.filter((r) => !expected.has(r.toolCallId)).map((r) => r.toolCallId);
  if (extra.length)
    throw new DomainError('invalid_tool_results', `Unknown tool call ids: ${extra.join(', ')}`, { expected: [...expected] });
  const missing = [...expected].filter((callId) => !seen.has(callId));
  if (missing.length)
    throw new DomainError('invalid_tool_results', `Missing results for tool calls: ${missing.join(', ')}`, { missing });
}
