import { EntityManager } from '@mikro-orm/postgresql';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AgentLoop, TurnStep } from '../../runtime/agent-loop.service';
import { AgentRuntime } from '../../runtime/agent-runtime.service';
import { DomainError } from '../../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../../config/app-config';
import { AccessService } from '../../governance/access.service';
import { LlmError } from '../../llm/llm-error';
import { ChatEvents } from './chat-events.service';
import { toLlmMessages } from '../../runtime/conversation';
import { assistantParts, toolResultParts, toPendingCall, visibleTo } from './chat-message.mapper';
import { ChatRepository, ChatWrite, NewMessage } from './chat.repository';
import type { StatusChange } from './chat.rows';
import { ChatEvent, ChatRow, ClaimedChat } from './chat.types';
import type { WriteProposal } from '../../tools/tool.types';

/** This worker no longer owns the chat (interrupted, deleted, or taken over after a stale heartbeat). */
class LostClaim extends Error {}

/** Where a run left the chat; `abandoned`: another party (interrupt, deletion, takeover) moved it on. */
type RunOutcome = 'waiting' | 'requires_action' | 'requires_approval' | 'pending' | 'error' | 'abandoned';

const DELTA_FLUSH_MS = 50;
/** Text per NOTIFY, well below Postgres' 8000-byte payload limit once wrapped in JSON. */
const MAX_DELTA_BYTES = 3000;

/**
 * Runs one claimed chat until it waits for the user, for client tools, or fails, driving the one
 * tool-call loop with persistence hooks: each step commits (with an ownership check under the row
 * lock) before the next starts, so a crash loses at most the step in flight and never doubles one.
 */
@Injectable()
export class ChatRunner {
  private readonly logger = new Logger(ChatRunner.name);

  constructor(
    private readonly em: EntityManager,
    private readonly repo: ChatRepository,
    private readonly events: ChatEvents,
    private readonly runtime: AgentRuntime,
    private readonly loop: AgentLoop,
    private readonly access: AccessService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** One line per run, with where it left the chat (the chat id comes from the worker's log context). */
  async run(chat: ClaimedChat, workerId: string, signal: AbortSignal): Promise<void> {
    const started = performance.now();
    const status = await this.runTurn(chat, workerId, signal);
    this.logger.log({ msg: 'chat run finished', status, durationMs: Math.round(performance.now() - started) });
  }

  private async runTurn(chat: ClaimedChat, workerId: string, signal: AbortSignal): Promise<RunOutcome> {
    // Each piece of text says where its step starts (after which message) and where in the step's
    // text it belongs, so that streams can tell a whole step from one they joined midway.
    const step = { after: 0, offset: 0 };
    // The access the turn runs under: streams of callers with another see none of its text as it comes.
    let access: string | undefined;
    const deltas = new DeltaBatcher(
      (delta) => {
        const event = { type: 'message_part' as const, chatId: chat.id, owner: chat.owner, delta, access, ...step };
        step.offset += delta.length;
        return event;
      },
      (event) => this.events.publish(event),
    );
    try {
      // The claim itself published the `running` status. The turn runs as the key that posted it, as that key
      // was at the claim (read by the claim from the table: a revocation that has not reached this replica yet
      // still counts), and sees of the stored tool results only those produced under the access it has.
      const caller = this.access.callerOf(chat.turnKeyId, chat.turnKey, { owner: chat.owner });
      const fingerprint = await this.access.fingerprint(caller);
      access = fingerprint;
      const history = visibleTo(chat.history, fingerprint);
      let lastMessageId = history.at(-1)?.id ?? 0;
      const {
        turn: prepared,
        messages,
        clientTools,
      } = await this.runtime.prepareTurn({
        caller,
        agentName: chat.agent,
        chatId: chat.id,
        history: toLlmMessages(history),
        context: chat.context,
        dynamicTools: chat.dynamicTools,
        progress: { iterationsUsed: chat.turnIterations, tokensUsed: chat.turnTokens },
        approvalScope: chat.id,
      });
      // Its data tools take the pool's background share: thousands of chats never crowd out REST calls.
      const turn = { ...prepared, toolContext: { ...prepared.toolContext, background: true } };
      let tokens = chat.turnTokens;
      let settled = false;
      const result = await this.loop.runTurn(
        turn,
        messages,
        {
          onStepStart: () => {
            step.after = lastMessageId;
            step.offset = 0;
          },
          onTextDelta: (delta) => deltas.push(delta),
          // The model endpoint failed and is tried again: streams learn of it after the text they already
          // have, and how long the wait is. The retried call's text starts the step's text anew (offset 0),
          // so a stream built from the pieces replaces what it showed.
          onRetry: async (retry) => {
            deltas.flush();
            await deltas.sent();
            const { attempt, delayMs, error } = retry;
            await this.events
              .publish({ type: 'retry', chatId: chat.id, owner: chat.owner, attempt, delayMs, error: error.message })
              .catch((e: unknown) => this.logger.warn({ msg: 'could not publish a retry', error: (e as Error).message }));
            step.offset = 0;
          },
          onStep: async (done) => {
            // Text pieces already cut go out first; the rest goes out with the step, before its messages:
            // a stream never sees text after its step.
            const text = deltas.drain();
            await deltas.sent();
            tokens += done.usage.totalTokens;
            // The access the step's tools ran under, as it is now: a policy changed meanwhile has reached this
            // replica's cache by now, and a key revoked meanwhile finds the chat no longer claimed.
            const stepAccess = { keyId: caller.keyId, fingerprint: await this.access.fingerprint(caller) };
            const persisted = await this.persistStep(
              chat,
              workerId,
              done,
              tokens,
              clientTools.freeformAsFunction,
              text,
              stepAccess,
            );
            settled = persisted.settled;
            lastMessageId = persisted.lastMessageId;
          },
        },
        signal,
      );
      // The token budget can end a turn without a final model step: settle it here.
      if (!settled && result.status === 'completed') await this.settle(chat, workerId, 'waiting');
      return result.status === 'completed' ? 'waiting' : result.status;
    } catch (error) {
      if (error instanceof LostClaim || signal.aborted) {
        // The chat moved on (interrupt, takeover): text of the abandoned step must not reach streams.
        deltas.discard();
        return 'abandoned';
      }
      deltas.flush();
      await deltas.sent();
      return this.fail(chat, workerId, error).catch((e: unknown) => {
        if (e instanceof LostClaim) return 'abandoned' as const;
        this.logger.error({ msg: 'could not record the failure of the chat', err: e });
        return 'error' as const;
      });
    } finally {
      // A run ends when its last delta is out: nothing of it may still want a connection afterwards.
      await deltas.sent();
    }
  }

  /**
   * Commits one step in one statement (its messages, progress, status and events); `settled` when the
   * chat left `running` with it (final answer or client tools), and the id of the step's last message.
   */
  private async persistStep(
    chat: ChatRow,
    workerId: string,
    step: TurnStep,
    tokens: number,
    freeform: ReadonlySet<string>,
    text: ChatEvent[],
    access: { keyId: string; fingerprint: string },
  ): Promise<{ settled: boolean; lastMessageId: number }> {
    const messages: NewMessage[] = [
      {
        role: 'assistant',
        parts: assistantParts(step),
        keyId: access.keyId,
        // Its text and tool arguments come from what the turn could read: shown to callers with the same access.
        access: access.fingerprint,
        usage: step.usage,
        metadata: {
          model: step.model,
          finishReason: step.finishReason,
          ...(step.grounding ? { grounding: step.grounding } : {}),
          ...(step.superseded ? { superseded: true } : {}),
        },
      },
    ];
    if (step.toolResults.length) {
      messages.push({ role: 'tool', parts: toolResultParts(step), keyId: access.keyId, access: access.fingerprint });
    }
    const event = { chatId: chat.id, owner: chat.owner };
    const progress = { iterations: step.iterationsUsed, tokens };
    let status: StatusChange | undefined;
    let after: ChatEvent[] = [];
    if (step.final) {
      status = { status: 'waiting', lastError: null, attempts: 0 };
      after = [{ type: 'status', ...event, status: 'waiting' }];
    } else if (step.pendingApprovals.length) {
      // Write proposals wait for a person; the chat waits until the earliest of them expires (then the sweep
      // answers the expired ones for the model).
      const pending = step.pendingApprovals.map((result) => {
        const call = step.toolCalls.find((c) => c.id === result.toolCallId)!;
        return { ...toPendingCall(call, freeform), proposal: result.content as WriteProposal, access: access.fingerprint };
      });
      const earliest = Math.min(...pending.map((call) => Date.parse(call.proposal.expiresAt)));
      status = {
        status: 'requires_approval',
        pendingToolCalls: pending,
        actionExpiresInMs: Math.max(0, earliest - Date.now()),
        attempts: 0,
      };
      after = [
        { type: 'status', ...event, status: 'requires_approval' },
        { type: 'action_required', ...event },
      ];
    } else if (step.pendingClientCalls.length) {
      const pending = step.pendingClientCalls.map((call) => toPendingCall(call, freeform));
      status = {
        status: 'requires_action',
        pendingToolCalls: pending,
        actionExpiresInMs: this.config.chatActionTimeoutMs,
        attempts: 0,
      };
      after = [
        { type: 'status', ...event, status: 'requires_action' },
        { type: 'action_required', ...event },
      ];
    }
    const ids = await this.owned(chat, workerId, { messages, progress, status, before: text, after });
    return { settled: status !== undefined, lastMessageId: ids.at(-1)! };
  }

  private async settle(chat: ChatRow, workerId: string, status: 'waiting'): Promise<void> {
    await this.owned(chat, workerId, {
      status: { status, attempts: 0 },
      after: [{ type: 'status', chatId: chat.id, owner: chat.owner, status }],
    });
  }

  /** Retryable model failures go back to pending with backoff; the rest (or the last attempt) end in error. */
  private async fail(chat: ChatRow, workerId: string, error: unknown): Promise<'pending' | 'error'> {
    const attempt = chat.attempts + 1;
    const retryable = error instanceof LlmError && error.retryable && attempt < this.config.chatMaxAttempts;
    const code = error instanceof DomainError ? error.code : 'internal_error';
    const message = error instanceof DomainError ? error.message : 'The chat failed unexpectedly';
    if (!(error instanceof DomainError)) this.logger.error({ msg: 'chat run failed', err: error });
    const event = { chatId: chat.id, owner: chat.owner };
    if (retryable) {
      // The provider's Retry-After when it sent one (capped), else a backoff of 1 s, 2 s, ... up to 30 s.
      const delayMs = error.retryAfterMs(this.config.llmRetryAfterMaxMs) ?? Math.min(30_000, 1_000 * 2 ** (attempt - 1));
      await this.owned(chat, workerId, {
        status: { status: 'pending', attempts: attempt, availableInMs: delayMs, lastError: { code, message } },
        after: [
          { type: 'retry', ...event, attempt, delayMs, error: message },
          { type: 'status', ...event, status: 'pending' },
        ],
      });
      return 'pending';
    }
    await this.owned(chat, workerId, {
      status: { status: 'error', attempts: attempt, lastError: { code, message } },
      after: [
        { type: 'error', ...event, code, message },
        { type: 'status', ...event, status: 'error' },
      ],
    });
    return 'error';
  }

  /** Writes only while this worker still owns the running chat (checked under the row lock, in the same statement). */
  private async owned(chat: ChatRow, workerId: string, change: Omit<ChatWrite, 'chatId' | 'owner' | 'claim'>): Promise<number[]> {
    const ids = await this.repo.write(this.em.fork(), {
      chatId: chat.id,
      owner: chat.owner,
      claim: { workerId, claimToken: chat.claimToken },
      ...change,
    });
    if (!ids) throw new LostClaim();
    return ids;
  }
}

/**
 * Groups text deltas for NOTIFY: one event per ~50 ms instead of one per token, sent in order.
 * `cut` makes the event of a piece (so it can note where the piece belongs); `send` publishes it.
 */
class DeltaBatcher {
  private buffer = '';
  private timer?: NodeJS.Timeout;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly cut: (delta: string) => ChatEvent,
    private readonly send: (event: ChatEvent) => Promise<void>,
  ) {}

  push(delta: string): void {
    this.buffer += delta;
    if (Buffer.byteLength(this.buffer) > MAX_DELTA_BYTES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), DELTA_FLUSH_MS);
  }

  flush(): void {
    for (const event of this.drain()) {
      // Chained, so deltas commit (and reach streams) in the order they were produced.
      this.chain = this.chain.then(() => this.send(event)).catch(() => undefined);
    }
  }

  /** The events of the text not sent yet, for the caller to send (with the step that ends the text). */
  drain(): ChatEvent[] {
    this.clearTimer();
    if (!this.buffer) return [];
    const events = splitByBytes(this.buffer, MAX_DELTA_BYTES).map((piece) => this.cut(piece));
    this.buffer = '';
    return events;
  }

  discard(): void {
    this.clearTimer();
    this.buffer = '';
  }

  /** Resolves once every flushed delta has been published (or failed to). */
  sent(): Promise<void> {
    return this.chain;
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** Splits text into pieces of at most `maxBytes` UTF-8 bytes (NOTIFY payloads are capped in bytes). */
function splitByBytes(text: string, maxBytes: number): string[] {
  const pieces: string[] = [];
  let piece = '';
  for (const char of text) {
    if (Buffer.byteLength(piece + char) > maxBytes) {
      pieces.push(piece);
      piece = '';
    }
    piece += char;
  }
  if (piece) pieces.push(piece);
  return pieces;
}
