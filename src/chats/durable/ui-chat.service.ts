import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../../auth/caller';
import { KeyStreams } from '../../auth/key-streams.service';
import { DomainError } from '../../common/domain-error';
import { isPlainObject } from '../../common/plain-object';
import { sqlState, UNIQUE_VIOLATION } from '../../common/pg-errors';
import { AccessService } from '../../governance/access.service';
import { AgentRuntime } from '../../runtime/agent-runtime.service';
import type { ConversationPart } from '../../runtime/conversation';
import { fromClientMessage, toUiMessages } from '../ui-messages';
import { ChatEvents } from './chat-events.service';
import { proposalsVisibleTo, visibleTo } from './chat-message.mapper';
import { ChatRepository } from './chat.repository';
import { ChatService, contextOf } from './chat.service';
import { ApprovalGateway, type ApprovalDecision } from './approval-gateway';
import { ChatReceiptsService } from './chat-receipts.service';
import type { ReceiptReplayResponse, ToolResultDto } from './chat.dto';
import type { ChatRow } from './chat.types';
import { checkClientChatId, CLIENT_CHAT_ID_PATTERN, UiChatMessagesResponse, UiChatRequestDto } from './ui-chat.dto';
import { UI_MESSAGE_STREAM_HEADERS } from '../ui-message-stream.writer';
import { TurnStreamOrigin, UiTurnStream } from './ui-turn-stream';

/** What the last UI message of a request asks for. */
type Submission =
  | { kind: 'message'; text: string; clientId: string | null }
  | { kind: 'tool-results'; results: ToolResultDto[] }
  | { kind: 'approvals'; decisions: ApprovalDecision[] };

/**
 * Durable chats for AI SDK clients (`useChat` with a stock `DefaultChatTransport`): the client's
 * chat id names the chat, each request's last UI message is a new user message or the outputs of
 * the client's tool calls, and the answer is the turn's UI message stream, produced by the worker of
 * whichever replica runs it (UiTurnStream). The rules are those of the chat API underneath
 * (ChatService): the same states, 409s, caps and checks.
 */
@Injectable()
export class UiChatService {
  constructor(
    private readonly em: EntityManager,
    private readonly repo: ChatRepository,
    private readonly events: ChatEvents,
    private readonly chats: ChatService,
    private readonly runtime: AgentRuntime,
    private readonly access: AccessService,
    private readonly streams: KeyStreams,
    private readonly approvals: ApprovalGateway,
    private readonly receipts: ChatReceiptsService,
  ) {}

  /**
   * A new chat, its next user message, or its client tool results; then the turn's stream on the
   * raw response `open` hands over. Every refusal comes before the response opens (a JSON error).
   */
  async send(caller: Caller, agentName: string, dto: UiChatRequestDto, open: () => ServerResponse): Promise<void> {
    if (dto.trigger === 'regenerate-message') {
      throw new DomainError(
        'unsupported_trigger',
        'Regenerating an answer is not supported: a durable chat keeps every answer; send a new message instead',
      );
    }
    const submission = readSubmission(dto.messages);
    // The turn runs as the caller's key whoever started the chat: admitted before anything is stored.
    const declared = dto.dynamicTools !== undefined;
    const admission = await this.runtime.admit({
      caller,
      agentName,
      declaredTools: declared ? { tools: dto.dynamicTools } : undefined,
    });
    const agent = admission.agent;
    const dynamicTools = declared ? [...admission.dynamicTools] : undefined;
    this.streams.check(caller);
    // Listening before the commit that starts the turn: the stream misses nothing of it.
    const stream = new UiTurnStream(this.em, this.repo, this.events, await this.access.fingerprint(caller));
    let origin: TurnStreamOrigin;
    try {
      if (submission.kind === 'approvals') {
        origin = await this.decide(caller, agent.name, dto.id, submission.decisions);
        stream.start(origin, this.streams.open(caller, open, { headers: UI_MESSAGE_STREAM_HEADERS }));
        return;
      }
      origin = await this.chats.oneTurnAtATime(caller.owner, () =>
        this.em.fork().transactional(async (em) => {
          const chat = await this.repo.findByClientId(em, caller.owner, dto.id, { lock: true });
          if (!chat) {
            if (submission.kind !== 'message') throw notFound(dto.id);
            const created = await this.chats.insertChat(em, caller, {
              clientId: dto.id,
              agent: agent.name,
              message: submission.text,
              messageClientId: submission.clientId,
              context: dto.context,
              dynamicTools: dynamicTools ?? [],
            });
            return { chatId: created.chat.id, turnStart: created.messageId, cursor: created.messageId };
          }
          if (chat.agent !== agent.name) {
            throw new DomainError('chat_agent_mismatch', `Chat "${dto.id}" is a chat with agent "${chat.agent}"`, {
              agent: chat.agent,
            });
          }
          if (submission.kind === 'tool-results') {
            // The answer's UI message holds every call of the turn with its output; the pending ones are the results.
            const pending = new Set((chat.pendingToolCalls ?? []).map((call) => call.id));
            const results = submission.results.filter((result) => pending.has(result.toolCallId));
            const cursor = await this.chats.acceptToolResults(em, caller, chat, results);
            return { chatId: chat.id, turnStart: await this.repo.lastUserMessageId(em, chat.id, cursor), cursor };
          }
          const messageId = await this.chats.appendUserMessage(em, caller, chat, submission.text, submission.clientId);
          // The transport sends the page's tools and context with every message: the turn runs with them.
          await this.repo.updateSetup(em, chat.id, {
            dynamicTools,
            context: dto.context === undefined ? undefined : contextOf(dto.context),
          });
          return { chatId: chat.id, turnStart: messageId, cursor: messageId };
        }),
      );
      stream.start(origin, this.streams.open(caller, open, { headers: UI_MESSAGE_STREAM_HEADERS }));
    } catch (error) {
      stream.dispose();
      if (sqlState(error) === UNIQUE_VIOLATION) {
        throw new DomainError('chat_busy', `Chat "${dto.id}" was created by another request at the same time`);
      }
      throw error;
    }
  }

  /**
   * The client's decisions on write proposals (`addToolApprovalResponse`), each taken as POST
   * /chats/:id/approvals takes it (ApprovalGateway): approve with the token the approval request carried
   * as its signature, or reject with the client's reason. Returns where the stream of the turn goes on:
   * after the step that proposed, with the decided calls waiting for their results.
   */
  private async decide(caller: Caller, agentName: string, id: string, decisions: ApprovalDecision[]): Promise<TurnStreamOrigin> {
    const em = this.em.fork();
    const chat = await this.find(em, caller, agentName, id);
    const pending = new Set((chat.pendingToolCalls ?? []).filter((call) => call.proposal).map((call) => call.id));
    const decided = decisions.filter((decision) => pending.has(decision.toolCallId));
    if (!decided.length) {
      throw new DomainError('approval_invalid', 'No proposal of the chat waits for the approval responses sent');
    }
    const turnStart = await this.repo.lastUserMessageId(em, chat.id);
    const cursor = (await this.repo.messages(em, chat.id, turnStart, null)).at(-1)?.id ?? turnStart;
    for (const decision of decided) await this.approvals.decide(caller, chat.id, decision);
    return { chatId: chat.id, turnStart, cursor, awaiting: decided.map((decision) => decision.toolCallId) };
  }

  /**
   * The running turn's stream from its start (what was produced, then live), for a client that
   * reconnects; false when no turn runs (the route answers 204).
   */
  async resume(caller: Caller, agentName: string, id: string, open: () => ServerResponse): Promise<boolean> {
    checkClientChatId(id);
    const stream = new UiTurnStream(this.em, this.repo, this.events, await this.access.fingerprint(caller));
    try {
      const em = this.em.fork();
      const chat = await this.find(em, caller, agentName, id);
      if (chat.status !== 'pending' && chat.status !== 'running') {
        stream.dispose();
        return false;
      }
      const turnStart = await this.repo.lastUserMessageId(em, chat.id);
      stream.start(
        { chatId: chat.id, turnStart, cursor: turnStart },
        this.streams.open(caller, open, { headers: UI_MESSAGE_STREAM_HEADERS }),
      );
      return true;
    } catch (error) {
      stream.dispose();
      throw error;
    }
  }

  /** The whole conversation as UI messages, for a page to restore and continue. */
  async messages(caller: Caller, agentName: string, id: string): Promise<UiChatMessagesResponse> {
    checkClientChatId(id);
    const em = this.em.fork();
    const chat = await this.find(em, caller, agentName, id);
    const rows = await this.repo.messages(em, chat.id, 0, null);
    const fingerprint = await this.access.fingerprint(caller);
    // Proposals waiting for a decision come as approval requests, which the restored page can answer; those
    // made under other access than the caller's stay calls without input (their step comes withheld).
    const visible =
      chat.status === 'requires_approval' ? proposalsVisibleTo(chat.pendingToolCalls ?? [], fingerprint).proposals : [];
    const proposals = new Map(visible.map((call) => [call.id, call.proposal] as const));
    return { messages: toUiMessages(visibleTo(rows, fingerprint), proposals) };
  }

  /** A receipt of the chat replayed (ChatReceiptsService.replay), the chat named by the client's id. */
  async replayReceipt(
    caller: Caller,
    agentName: string,
    id: string,
    toolCallId: string,
    signal: AbortSignal,
  ): Promise<ReceiptReplayResponse> {
    checkClientChatId(id);
    const em = this.em.fork();
    const chat = await this.find(em, caller, agentName, id);
    return this.receipts.replayIn(em, caller, chat, toolCallId, signal);
  }

  /** The caller's chat with this client id and agent; another owner's, or another agent's, is not found. */
  private async find(em: EntityManager, caller: Caller, agentName: string, id: string): Promise<ChatRow> {
    const chat = await this.repo.findByClientId(em, caller.owner, id);
    if (!chat || chat.agent !== agentName) throw notFound(id);
    return chat;
  }
}

function notFound(id: string): DomainError {
  return new DomainError('chat_not_found', `Chat "${id}" not found`);
}

/**
 * The request's last UI message: a user message (its text parts), or the assistant message whose
 * tool parts now carry outputs (`addToolOutput`), read by the parser of client conversations.
 */
function readSubmission(messages: unknown[]): Submission {
  const index = messages.length - 1;
  const last = messages[index];
  const decisions = approvalResponses(lastStepOf(last));
  if (decisions.length) return { kind: 'approvals', decisions };
  const conversation = fromClientMessage(lastStepOf(last), index);
  if (conversation[0].role === 'user') {
    const part = conversation[0].parts[0];
    const text = part?.type === 'text' ? part.text : '';
    if (!text) throw new DomainError('invalid_message', `messages[${index}] has no text`);
    const { id } = last as { id?: unknown };
    return { kind: 'message', text, clientId: typeof id === 'string' && CLIENT_CHAT_ID_PATTERN.test(id) ? id : null };
  }
  const results = conversation
    .flatMap((message) => message.parts)
    .filter((part): part is Extract<ConversationPart, { type: 'tool-result' }> => part.type === 'tool-result')
    .map((part) => ({ toolCallId: part.toolCallId, output: part.output, isError: part.isError }));
  if (!results.length) {
    throw new DomainError(
      'invalid_tool_results',
      `messages[${index}] is an assistant message without tool outputs: send a user message, or the outputs of the client's tool calls`,
    );
  }
  return { kind: 'tool-results', results };
}

/**
 * The approval responses of an assistant UI message: its tool parts in state `approval-responded`, each
 * with the token the approval request carried (`approval.signature`) and, for a rejection, its reason.
 */
function approvalResponses(message: unknown): ApprovalDecision[] {
  if (!isPlainObject(message) || message.role !== 'assistant' || !Array.isArray(message.parts)) return [];
  const decisions: ApprovalDecision[] = [];
  for (const part of message.parts as unknown[]) {
    if (!isPlainObject(part) || part.state !== 'approval-responded' || !isPlainObject(part.approval)) continue;
    const { approved, signature, reason } = part.approval;
    if (typeof part.toolCallId !== 'string' || typeof approved !== 'boolean') continue;
    decisions.push({
      toolCallId: part.toolCallId.slice(0, 200),
      decision: approved ? 'approve' : 'reject',
      token: typeof signature === 'string' ? signature.slice(0, 200) : '',
      ...(typeof reason === 'string' && reason ? { reason: reason.slice(0, 2000) } : {}),
    });
  }
  return decisions;
}

/**
 * Of an assistant UI message, only its last step: the calls the chat waits for are all in the step
 * that paused it, and the earlier steps' tool outputs (built-in results, up to 16 KB each) need not be
 * read again nor count against the message's length cap. Anything else is returned as it is.
 */
function lastStepOf(message: unknown): unknown {
  if (!isPlainObject(message) || message.role !== 'assistant' || !Array.isArray(message.parts)) return message;
  const parts: unknown[] = message.parts;
  const start = parts.findLastIndex((part) => isPlainObject(part) && part.type === 'step-start');
  return start <= 0 ? message : { ...message, parts: parts.slice(start) };
}
