import type { ApiKeyRole } from '../../auth/api-key.entity';
import type { LlmUsage } from '../../llm/llm.types';
import type { DynamicTool } from '../../runtime/client-tools';
import type { Grounding } from '../../runtime/grounding';
import type { WriteProposal } from '../../tools/tool.types';
import type { ConversationPart, ConversationRole } from '../../runtime/conversation';

export const CHAT_STATUSES = ['waiting', 'pending', 'running', 'requires_action', 'requires_approval', 'error'] as const;
export type ChatStatus = (typeof CHAT_STATUSES)[number];

/** Parts of a persisted message. */
export type ChatPart = ConversationPart;

export type ChatRole = ConversationRole;

export interface ChatMessageRow {
  id: number;
  chatId: string;
  role: ChatRole;
  parts: ChatPart[];
  usage: LlmUsage | null;
  /** The id an AI SDK client gave this (user) message; null when it came another way. */
  clientId: string | null;
  /** The key that posted the message, or whose turn produced it; null on messages from before keys were recorded. */
  keyId: string | null;
  /**
   * Of tool results the server produced: the fingerprint of the access they were produced under
   * (AccessService.fingerprint); a caller with another one gets them withheld. Null: no data access
   * produced them (a client's results, errors the server wrote), shown to every caller of the chat.
   */
  access: string | null;
  /** What the model step of an assistant message reported; null on other messages. */
  metadata: StepMetadata | null;
  createdAt: Date;
}

/** Kept with each assistant message: what answered and why the step ended. */
export interface StepMetadata {
  model: string;
  finishReason: 'stop' | 'length' | 'max_iterations' | 'tool_calls';
  /** Of an answer: which of its numbers the turn's tool results support (absent when the agent's grounding is off). */
  grounding?: Grounding;
  /** An answer the model was asked to correct (grounding `retry`); the next assistant message replaces it. */
  superseded?: boolean;
}

/**
 * A call waiting for the client (or a human, for ask_user), or a write tool's call waiting for a person's
 * approval (`proposal`). `arguments` is raw text for custom tools.
 */
export interface PendingToolCall {
  id: string;
  name: string;
  arguments: unknown;
  /** Of a write tool's call (status requires_approval): what it would change, and the token that approves it. */
  proposal?: WriteProposal;
  /**
   * Of a proposal: the fingerprint of the access the step that proposed it ran under. The proposal (the
   * records as they are, the values, the token) is shown only to a caller with the same access.
   */
  access?: string;
}

export interface ChatRow {
  id: string;
  /** The id an AI SDK client (`useChat`) gave the chat, unique per owner; null for chats created by id-less routes. */
  clientId: string | null;
  owner: string;
  ownerRole: ApiKeyRole;
  /** The key that started the chat. */
  ownerKeyId: string | null;
  /**
   * The key whose message (or client tool results) started the current turn: the turn runs as that key,
   * under its access as it is when the turn runs, and stops (`key_revoked`) once it is revoked.
   */
  turnKeyId: string | null;
  agent: string;
  title: string | null;
  status: ChatStatus;
  context: Record<string, string> | null;
  dynamicTools: DynamicTool[];
  pendingToolCalls: PendingToolCall[] | null;
  actionExpiresAt: Date | null;
  workerId: string | null;
  /** Set by each claim; a run may write only while the row still carries its token. */
  claimToken: string | null;
  heartbeatAt: Date | null;
  availableAt: Date;
  attempts: number;
  turnIterations: number;
  turnTokens: number;
  lastError: { code: string; message: string } | null;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * A chat as its claim returns it: with what the turn's key runs as at the claim (null when it is revoked or
 * unknown), and its messages in order.
 */
export interface ClaimedChat extends ChatRow {
  turnKey: { role: ApiKeyRole; subject: string; owner: string } | null;
  history: ChatMessageRow[];
}

/** What goes over NOTIFY: hints, and a new message when it is small; the rest is re-read from the tables. */
export type ChatEvent =
  | { type: 'created'; chatId: string; owner: string; status: ChatStatus }
  | { type: 'status'; chatId: string; owner: string; status: ChatStatus }
  /**
   * A persisted message; `message` carries it (as the API shows it, `createdAt` as Postgres wrote it)
   * when it fits a NOTIFY, so that streams need not read it back.
   */
  | {
      type: 'message';
      chatId: string;
      owner: string;
      messageId: number;
      message?: Pick<ChatMessageRow, 'id' | 'role' | 'parts' | 'usage' | 'metadata' | 'access'> & { createdAt: string };
    }
  /**
   * Model text of the step in flight, in pieces. `after` is the id of the chat's last message when the
   * step started and `offset` where the piece starts in the step's text, so a stream can tell whether it
   * holds everything before a piece (see UiTurnStream). `delta` is absent when it did not fit a NOTIFY.
   */
  | {
      type: 'message_part';
      chatId: string;
      owner: string;
      delta: string;
      after?: number;
      offset?: number;
      /** The access fingerprint of the turn writing it: a stream of a caller with another one does not send it. */
      access?: string;
    }
  | { type: 'action_required'; chatId: string; owner: string }
  | { type: 'retry'; chatId: string; owner: string; attempt: number; delayMs: number; error: string }
  | { type: 'error'; chatId: string; owner: string; code: string; message: string }
  | { type: 'deleted'; chatId: string; owner: string }
  | { type: 'interrupt'; chatId: string; owner: string };
