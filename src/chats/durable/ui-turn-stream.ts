import { EntityManager } from '@mikro-orm/postgresql';
import { Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { SseWriter } from '../../common/sse.writer';
import { groundingPart } from '../ui-message-stream.writer';
import {
  replyMessageId,
  resultsOf,
  toolErrorText,
  turnMetadata,
  uiFinishReason,
  uiOutput,
  uiChartPart,
  uiStep,
  uiApproval,
  type UiCallPart,
} from '../ui-messages';
import type { ChatEvents } from './chat-events.service';
import { ChatFollower } from './chat-follower';
import { proposalsVisibleTo, visibleTo } from './chat-message.mapper';
import type { ChatRepository } from './chat.repository';
import type { ChatEvent, ChatMessageRow, ChatStatus } from './chat.types';
import type { WriteProposal } from '../../tools/tool.types';

/** Statuses in which no turn runs: a stream of the turn ends there. */
const SETTLED: readonly ChatStatus[] = ['waiting', 'requires_action', 'requires_approval', 'error'];

/** Where a stream starts: the chat, the user message that opened the turn, and what the client already has. */
export interface TurnStreamOrigin {
  chatId: string;
  /** Id of the user message that opened the turn: the reply's UI id comes from it. */
  turnStart: number;
  /** The client holds the turn up to this message id; the stream sends what follows. */
  cursor: number;
  /** Calls the client holds as waiting (decided approvals): their results go out as outputs when read. */
  awaiting?: readonly string[];
}

/** Text of the step in flight that this stream has sent, live, as the model wrote it. */
interface LiveText {
  id: string;
  text: string;
  /** A piece went missing (or never fit a NOTIFY): the rest waits for the step's commit. */
  gap: boolean;
}

/**
 * One durable chat turn as an AI SDK UI message stream (protocol v1), built on whichever replica the
 * client is connected to from what the worker (on any replica) commits and announces. Committed
 * steps are read from the tables: a step, its text, its tool calls and their results; the calls the
 * client must answer go out as `tool-input-available` (so `onToolCall` fires) and those already
 * answered without it. The stream ends with `finish` when the chat waits (for the user or for
 * client tool results) and with `error` when the turn failed.
 *
 * The step in flight: its text reaches the tables only when the step commits, and meanwhile comes
 * in pieces over NOTIFY, each saying after which message its step started and where in the step's
 * text it belongs. A stream sends the pieces live only when it holds everything before them (it saw
 * the step's first piece and none went missing); a stream that joined midway (a resumed one) sends
 * nothing of that step until it commits and then its whole text at once. At the commit the stored
 * text decides: what the client already has is a prefix of it, and only the rest goes out. So the
 * text arrives exactly once whatever was missed; and text of an attempt that never commits (a model
 * call retried, a replica lost) is taken back with `reset-step` before the step's real text comes.
 */
export class UiTurnStream {
  private readonly logger = new Logger(UiTurnStream.name);
  private readonly follower: ChatFollower;
  private origin?: TurnStreamOrigin;
  private sse?: SseWriter;
  private ended = false;
  /** The last message whose content the client has (starts at the origin's cursor). */
  private cursor = 0;
  private stepOpen = false;
  private live?: LiveText;
  /** Calls sent as waiting for the client: their results, when stored, go out as outputs. */
  private readonly awaiting = new Set<string>();
  /** Of the chat's `error` event, for the `error` part. */
  private errorText?: string;

  /**
   * Subscribes at once and holds back what arrives until `start`: a route creates the stream before
   * it commits the message that starts the turn, so not even the first piece of text can be missed.
   */
  constructor(
    private readonly em: EntityManager,
    private readonly repo: ChatRepository,
    events: ChatEvents,
    /** The access of the stream's caller: tool results produced under another are withheld (visibleTo). */
    private readonly fingerprint: string,
  ) {
    this.follower = new ChatFollower(events);
  }

  /** Starts writing to `sse`: `start`, what the client lacks of the turn, then the turn as it goes on. */
  start(origin: TurnStreamOrigin, sse: SseWriter): void {
    this.origin = origin;
    this.cursor = origin.cursor;
    for (const id of origin.awaiting ?? []) this.awaiting.add(id);
    this.sse = sse;
    sse.onClose(() => this.dispose());
    this.send({ type: 'start', messageId: replyMessageId(origin.turnStart) });
    // Caught up first, then what arrived meanwhile: all of it re-read or checked against the tables.
    // Everything a client receives goes through the follower's queue, in the order events arrived.
    this.follower.follow(origin.chatId, {
      catchUp: () => this.catchUp(),
      handle: (event) => this.handle(event),
      failed: (error) => {
        this.logger.error({ msg: 'UI message stream of a chat failed', chatId: this.origin?.chatId, err: error });
        this.fail('The stream of this chat failed; reload the chat');
      },
    });
  }

  /** Stops listening; the stream (if started) is closed by its writer. */
  dispose(): void {
    this.ended = true;
    this.follower.stop();
  }

  private async handle(event: ChatEvent): Promise<void> {
    switch (event.type) {
      case 'message':
        // A user message after the turn's own: the turn is over even if its status event went astray.
        if (await this.sendMessages()) await this.catchUp();
        return;
      case 'message_part':
        return this.piece(event);
      case 'error':
        this.errorText = event.message;
        return;
      case 'status':
        if (SETTLED.includes(event.status)) return this.settle(event.status);
        // Back to pending: the attempt in flight was given up (retry, lost replica); its text goes.
        if (event.status === 'pending' && this.live) this.resetStep();
        return;
      case 'deleted':
        return this.fail('The chat was deleted');
      default:
        return;
    }
  }

  /** Sends what the tables hold beyond the cursor, and ends the stream when the chat is no longer running. */
  private async catchUp(): Promise<void> {
    const turnOver = await this.sendMessages();
    const chat = await this.repo.find(this.em.fork(), this.origin!.chatId);
    if (!chat) return this.fail('The chat was deleted');
    if (SETTLED.includes(chat.status) || turnOver) {
      this.errorText ??= chat.lastError?.message;
      await this.end(chat.status);
    }
  }

  /**
   * A status event that says the turn is over. NOTIFY may deliver it late (a lagging LISTEN
   * connection, an earlier turn's event), so the tables decide: the chat must still be settled, or a
   * newer user message shows the turn ended (and another began).
   */
  private async settle(status: ChatStatus): Promise<void> {
    const turnOver = await this.sendMessages();
    const chat = await this.repo.find(this.em.fork(), this.origin!.chatId);
    if (!chat) return this.fail('The chat was deleted');
    if (!turnOver && !SETTLED.includes(chat.status)) return;
    if (chat.status === 'error') this.errorText ??= chat.lastError?.message;
    await this.end(SETTLED.includes(chat.status) ? chat.status : status);
  }

  /** Sends the turn's messages after the cursor; true when a later user message shows the turn is over. */
  private async sendMessages(): Promise<boolean> {
    const rows = visibleTo(await this.repo.messages(this.em.fork(), this.origin!.chatId, this.cursor, null), this.fingerprint);
    const next = rows.findIndex((row) => row.role === 'user');
    const turn = next < 0 ? rows : rows.slice(0, next);
    const results = resultsOf(turn);
    // Write proposals waiting for a person: a step and its pause commit in one statement, so a step read here
    // that proposed writes finds the chat waiting for them.
    const proposals = turn.some((row) => row.role === 'assistant') ? await this.pendingProposals() : new Map();
    for (const row of turn) {
      if (row.role === 'assistant') this.sendStep(row, results, proposals);
      else this.sendResults(row);
      this.cursor = row.id;
    }
    return next >= 0;
  }

  /** A committed model step: the rest of its text (see the class comment), its tool calls, their results. */
  private sendStep(
    row: ChatMessageRow,
    results: ReturnType<typeof resultsOf>,
    proposals: ReadonlyMap<string, WriteProposal>,
  ): void {
    const step = uiStep(row, results);
    let text = step.text;
    if (this.live) {
      if (text.startsWith(this.live.text)) {
        text = text.slice(this.live.text.length);
        if (text) this.send({ type: 'text-delta', id: this.live.id, delta: text });
        this.send({ type: 'text-end', id: this.live.id });
        text = '';
      } else {
        this.resetStep();
      }
      this.live = undefined;
    }
    this.openStep();
    if (text) {
      const id = randomUUID();
      this.send({ type: 'text-start', id });
      this.send({ type: 'text-delta', id, delta: text });
      this.send({ type: 'text-end', id });
    }
    for (const tool of step.tools) {
      const proposal = tool.state === 'input-available' ? proposals.get(tool.toolCallId) : undefined;
      if (proposal) this.sendApprovalRequest(tool, proposal);
      else this.sendTool(tool);
    }
    this.send({ type: 'finish-step' });
    this.stepOpen = false;
  }

  private sendTool(tool: UiCallPart): void {
    const toolName = tool.type.slice('tool-'.length);
    const { toolCallId, input } = tool;
    if (tool.state === 'input-available') {
      this.send({ type: 'tool-input-start', toolCallId, toolName });
      this.send({ type: 'tool-input-available', toolCallId, toolName, input });
      this.awaiting.add(toolCallId);
      return;
    }
    // Answered already (a built-in tool, or a client tool in a replay): the input travels as an input
    // delta, since `tool-input-available` would make the client run its onToolCall once more.
    const text = typeof input === 'string';
    this.send({ type: 'tool-input-start', toolCallId, toolName, ...(text ? { inputEncoding: 'text' } : {}) });
    if (input !== undefined) {
      this.send({ type: 'tool-input-delta', toolCallId, inputTextDelta: text ? input : JSON.stringify(input) });
    }
    this.sendOutput(tool);
  }

  /**
   * A write proposal as the AI SDK's approval request: the call's input, then `tool-approval-request` with the
   * changes as its descriptor and the token as its signature, which the client's `addToolApprovalResponse`
   * keeps and sends back. The approval id is the call's id.
   */
  private sendApprovalRequest(tool: UiCallPart, proposal: WriteProposal): void {
    const { toolCallId, input } = tool;
    const toolName = tool.type.slice('tool-'.length);
    this.send({ type: 'tool-input-start', toolCallId, toolName });
    this.send({ type: 'tool-input-delta', toolCallId, inputTextDelta: JSON.stringify(input ?? {}) });
    const approval = uiApproval(toolCallId, proposal);
    this.send({
      type: 'tool-approval-request',
      approvalId: approval.id,
      toolCallId,
      approvalDescriptor: approval.descriptor,
      signature: approval.signature,
    });
    this.awaiting.add(toolCallId);
  }

  /** The chat's write proposals waiting for a decision, by call id. */
  private async pendingProposals(): Promise<Map<string, WriteProposal>> {
    const chat = await this.repo.find(this.em.fork(), this.origin!.chatId);
    const proposals = new Map<string, WriteProposal>();
    if (chat?.status !== 'requires_approval') return proposals;
    // Only those proposed under this stream's access: another's hold what it may not see, and their tokens.
    for (const call of proposalsVisibleTo(chat.pendingToolCalls ?? [], this.fingerprint).proposals) {
      proposals.set(call.id, call.proposal);
    }
    return proposals;
  }

  private sendOutput(tool: Extract<UiCallPart, { state: 'output-available' | 'output-error' }>): void {
    if (tool.state === 'output-error') {
      this.send({ type: 'tool-output-error', toolCallId: tool.toolCallId, errorText: tool.errorText });
    } else {
      this.send({ type: 'tool-output-available', toolCallId: tool.toolCallId, output: tool.output });
      const chart = uiChartPart(tool);
      if (chart) this.send(chart);
    }
  }

  /** Results stored after their calls went out as waiting (client tools, or calls an interrupt answered). */
  private sendResults(row: ChatMessageRow): void {
    for (const part of row.parts) {
      if (part.type !== 'tool-result' || !this.awaiting.delete(part.toolCallId)) continue;
      if (part.isError) {
        this.send({ type: 'tool-output-error', toolCallId: part.toolCallId, errorText: toolErrorText(part.output) });
      } else {
        this.send({ type: 'tool-output-available', toolCallId: part.toolCallId, output: uiOutput(part) });
      }
    }
  }

  /** A piece of the text in flight: sent only when this stream holds everything before it. */
  private piece(event: Extract<ChatEvent, { type: 'message_part' }>): void {
    // Another step than the one after the client's last message: an earlier one, or a late piece. Text of a
    // turn running under other access than the caller's is not sent (its step comes withheld when it commits).
    if (event.after !== this.cursor || (event.access && event.access !== this.fingerprint)) return;
    if (event.offset === 0 && this.live?.text) this.resetStep();
    if (!this.live) {
      // Joined midway: this step's text goes out whole when it commits.
      if (event.offset !== 0 || !event.delta) return;
      this.openStep();
      this.live = { id: randomUUID(), text: '', gap: false };
      this.send({ type: 'text-start', id: this.live.id });
    }
    if (this.live.gap) return;
    if (event.delta === undefined || event.offset !== this.live.text.length) {
      this.live.gap = true;
      return;
    }
    this.live.text += event.delta;
    this.send({ type: 'text-delta', id: this.live.id, delta: event.delta });
  }

  private openStep(): void {
    if (this.stepOpen) return;
    this.send({ type: 'start-step' });
    this.stepOpen = true;
  }

  /** Takes back the text of the step in flight; the step itself stays open for the text that replaces it. */
  private resetStep(): void {
    this.send({ type: 'reset-step' });
    this.live = undefined;
  }

  /** The turn is over: `finish` with what the answer reports (or `error`), then `[DONE]`. */
  private async end(status: ChatStatus): Promise<void> {
    if (this.live) this.resetStep();
    if (this.stepOpen) this.send({ type: 'finish-step' });
    this.stepOpen = false;
    if (status === 'error') return this.fail(this.errorText ?? 'The chat failed');
    const turn = await this.turnMessages();
    const metadata = turnMetadata(turn);
    if (metadata?.grounding) this.send(groundingPart(metadata.grounding));
    this.send({
      type: 'finish',
      finishReason: uiFinishReason(metadata?.finishReason),
      ...(metadata ? { messageMetadata: metadata } : {}),
    });
    this.close();
  }

  /** The messages of the turn up to the cursor, for the metadata of the whole answer. */
  private async turnMessages(): Promise<ChatMessageRow[]> {
    const rows = await this.repo.messages(this.em.fork(), this.origin!.chatId, this.origin!.turnStart, null);
    return rows.filter((row) => row.id <= this.cursor);
  }

  private fail(errorText: string): void {
    if (this.ended) return;
    this.send({ type: 'error', errorText });
    this.close();
  }

  private close(): void {
    this.send('[DONE]');
    this.ended = true;
    this.sse?.close();
  }

  private send(chunk: Record<string, unknown> | '[DONE]'): void {
    this.sse?.send(chunk);
  }
}
