import { Injectable, Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import type { ErrorCode } from '../common/error-codes';
import { AccessService } from '../governance/access.service';
import { UsageService } from '../governance/usage.service';
import { LlmService } from '../llm/llm.service';
import {
  addUsage,
  LlmMessage,
  LlmResponse,
  LlmRetry,
  LlmTool,
  LlmToolCall,
  LlmToolChoice,
  LlmUsage,
  ZERO_USAGE,
} from '../llm/llm.types';
import { readableArguments } from '../tools/tool.arguments';
import { isReferenced, withRefs } from '../tools/result-refs';
import { errorOutcome } from '../tools/tool.define';
import { ToolRegistry } from '../tools/tool.registry';
import type { ToolContext, ToolResult, ToolResultKind } from '../tools/tool.types';
import { fitToContext } from './context-window';
import type { GroundingMode } from '../agents/agent.types';
import { correctionRequest, Grounding, GroundingSource, operandEvidence } from './grounding';
import { groundBounded } from './grounding-bounds';
import { GroundingCatalog } from './grounding-catalog.service';
import { FigureReferences, nextResultNumber, numberedResults, type RenderedText } from './figure-references';

/** Everything one turn needs, resolved from the agent spec, the caller's options and the chat. */
export interface AgentTurn {
  model: string;
  temperature?: number;
  /** Completion tokens per model call. */
  maxTokens?: number;
  stop?: string | string[];
  /** Tool definitions offered to the model while iterations remain. */
  tools: LlmTool[];
  /** Sent with every call that offers tools (absent: the endpoint's default, auto). */
  toolChoice?: LlmToolChoice;
  /** The end user, passed on to the model endpoint. */
  user?: string;
  /** Names the client executes; a call to one pauses the turn in requires_action. */
  clientTools: ReadonlySet<string>;
  maxIterations: number;
  /**
   * Tool calls run per model step; calls past it are dropped unrun, from the conversation too, with
   * one note in the step's assistant message saying how many.
   */
  maxToolCallsPerStep: number;
  /** Tool rounds already spent in this turn (a durable chat resuming after client tool results). */
  iterationsUsed?: number;
  /** Token budget of the whole turn. */
  tokenBudget: number;
  /** Most prompt tokens one model call may send (system message, tool schemas, conversation). */
  contextTokens: number;
  /** Leading messages always sent (system messages and the context message); older turns may be left out. */
  pinnedMessages: number;
  /** Tokens already spent in this turn. */
  tokensUsed?: number;
  /** Epoch ms by which the turn must end. */
  deadline: number;
  /** What happens to the numbers of the final answer that no tool result of the turn supports. */
  grounding: GroundingMode;
  /** How the agent writes numbers (BCP 47, default en): how grounding reads them. */
  locale?: string;
  toolContext: Omit<ToolContext, 'signal'>;
}

export interface ExecutedToolCall {
  id: string;
  name: string;
  arguments: unknown;
  result: unknown;
  isError: boolean;
}

/** One model step as it was appended to the conversation. */
export interface TurnStep {
  assistant: LlmMessage;
  /** The tool calls of `assistant`, as the model made them up to the step's cap (empty on a final step). */
  toolCalls: LlmToolCall[];
  /** Tool messages of the built-in calls, in call order. */
  toolMessages: LlmMessage[];
  toolResults: ToolResult[];
  /** Client tool calls of this step; when present the turn pauses in requires_action after this step. */
  pendingClientCalls: LlmToolCall[];
  /**
   * Write proposals of this step (results of write tools, which wrote nothing): when present the turn pauses
   * in requires_approval after this step, and each call's result is what a person decides.
   */
  pendingApprovals: ToolResult[];
  usage: LlmUsage;
  /** Tool rounds used so far in the turn, this step included. */
  iterationsUsed: number;
  final: boolean;
  /** The model that answered, as the endpoint names it. */
  model: string;
  /** Why the step ended: the turn's reason on a final step, `tool_calls` otherwise. */
  finishReason: TurnFinishReason | 'tool_calls';
  /**
   * Of an answer (a step without tool calls), unless the agent's grounding is off: which of its
   * numbers the turn's tool results support.
   */
  grounding?: Grounding;
  /** An answer sent back to the model to correct its unsupported numbers (grounding `retry`); the next step replaces it. */
  superseded?: boolean;
}

export interface TurnHooks {
  /** Present = stream the model's text as it arrives. */
  onTextDelta?(delta: string): void;
  onStepStart?(): void;
  onToolCall?(call: { id: string; name: string; arguments: unknown; client: boolean }): void;
  onToolResult?(result: ToolResult): void;
  /** Runs after each step is appended, before the next starts: durable chats persist it here. */
  onStep?(step: TurnStep): Promise<void>;
  /**
   * Present = a model call may be retried even after some of its text went out through
   * onTextDelta; called before each retry's wait, so the front door can take that text back.
   */
  onRetry?(retry: LlmRetry): Promise<void>;
}

/** A write proposal a turn paused for: the write tool's result (the proposal) and the call's arguments as the model made them. */
export interface PendingApproval extends ToolResult {
  arguments: unknown;
}

export type TurnFinishReason = 'stop' | 'length' | 'max_iterations';

export interface TurnResult {
  status: 'completed' | 'requires_action' | 'requires_approval';
  content: string;
  model: string;
  finishReason: TurnFinishReason;
  toolCalls: ExecutedToolCall[];
  /** Client tool calls waiting for results (status requires_action). */
  pendingToolCalls: LlmToolCall[];
  /** Write proposals waiting for a person's decision (status requires_approval). */
  pendingApprovals?: PendingApproval[];
  usage: LlmUsage;
  iterationsUsed: number;
  /** Of the final answer, unless the agent's grounding is off. */
  grounding?: Grounding;
}

/**
 * THE tool-call loop. Call the model; no tool calls → done. Otherwise append the assistant
 * message, run the built-in calls (bounded concurrency, results in call order), append one tool
 * message per call, repeat. After `maxIterations` tool rounds, one last call without tools.
 * Client tool calls end the turn in `requires_action`. The deadline and token budget are enforced, and
 * the caller's key is checked before every model call and every step's tool calls (`key_revoked`).
 * The final answer's numbers are checked against the turn's tool results (grounding); with `retry`,
 * an answer with unsupported numbers goes back to the model once, without tools, to be corrected.
 * The stateless chat endpoint and the durable chat worker both drive this; they differ only in
 * where `messages` live.
 */
@Injectable()
export class AgentLoop {
  private readonly logger = new Logger(AgentLoop.name);

  constructor(
    private readonly llm: LlmService,
    private readonly registry: ToolRegistry,
    private readonly usage: UsageService,
    private readonly access: AccessService,
    private readonly catalog: GroundingCatalog,
  ) {}

  async runTurn(turn: AgentTurn, messages: LlmMessage[], hooks: TurnHooks = {}, signal?: AbortSignal): Promise<TurnResult> {
    const remainingMs = turn.deadline - Date.now();
    if (remainingMs <= 0) throw deadlineError();
    // A timer we clear at the end, not AbortSignal.timeout/any: those keep the turn (and its
    // conversation) reachable until the deadline passes, long after a fast turn has finished.
    const controller = new AbortController();
    const deadline = new AbortController();
    const timer = setTimeout(() => {
      deadline.abort();
      controller.abort();
    }, remainingMs);
    const onAbort = () => controller.abort();
    if (signal?.aborted) controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await this.iterate(turn, messages, hooks, controller.signal, deadline.signal);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private async iterate(
    turn: AgentTurn,
    messages: LlmMessage[],
    hooks: TurnHooks,
    turnSignal: AbortSignal,
    deadline: AbortSignal,
  ): Promise<TurnResult> {
    const state: TurnState = {
      turn,
      messages,
      hooks,
      turnSignal,
      deadline,
      // The turn's question: the last user message (a resumed turn continues after it).
      turnStart: lastUserIndex(messages),
      toolCalls: [],
      correcting: false,
      iterations: turn.iterationsUsed ?? 0,
      usage: ZERO_USAGE,
    };
    for (;;) {
      const budgetLeft = turn.tokenBudget - spent(state);
      if (budgetLeft <= 0) return outOfBudget(state);
      // The correcting step is one model call: offered no tools, it can only rewrite the answer.
      const withTools = !state.correcting && state.iterations < turn.maxIterations && turn.tools.length > 0;
      hooks.onStepStart?.();
      const response = await this.callModel(
        turn,
        messages,
        withTools,
        Math.min(turn.maxTokens ?? budgetLeft, budgetLeft),
        hooks,
        turnSignal,
        deadline,
      );
      state.usage = addUsage(state.usage, response.usage);
      const result =
        !withTools || response.toolCalls.length === 0
          ? await this.answerStep(state, response, withTools)
          : await this.toolStep(state, response);
      if (result) return result;
    }
  }

  /**
   * A step without tool calls: the answer, grounded. It ends the turn, unless the agent's grounding is
   * `retry` and the answer has unsupported numbers: then it goes back to the model once (undefined: go on).
   */
  private async answerStep(state: TurnState, response: LlmResponse, withTools: boolean): Promise<TurnResult | undefined> {
    const { turn, messages, hooks } = state;
    // The answer as shown: its figure references filled in from the conversation's results.
    const shown = await this.references(turn, messages).render(response.content);
    const assistant: LlmMessage = { role: 'assistant', content: shown.text };
    messages.push(assistant);
    const finishReason: TurnFinishReason =
      !withTools && !state.correcting && state.iterations >= turn.maxIterations && turn.tools.length > 0
        ? 'max_iterations'
        : response.finishReason === 'length'
          ? 'length'
          : 'stop';
    const grounding = turn.grounding === 'off' ? undefined : await this.groundTurn(turn, shown, messages, state.turnStart);
    // An answer step: final, or superseded by the one correcting step a "retry" agent gets.
    const answerStep = (final: boolean): TurnStep => ({
      assistant,
      toolCalls: [],
      toolMessages: [],
      toolResults: [],
      pendingClientCalls: [],
      pendingApprovals: [],
      usage: response.usage,
      iterationsUsed: state.iterations,
      final,
      model: response.model,
      finishReason,
      grounding,
      ...(final ? {} : { superseded: true }),
    });
    if (
      turn.grounding === 'retry' &&
      !state.correcting &&
      grounding?.unsupported.length &&
      turn.tokenBudget - spent(state) > 0 &&
      Date.now() < turn.deadline
    ) {
      // Once per turn: the answer stays in the conversation, followed by what to fix in it.
      state.correcting = true;
      await hooks.onStep?.(answerStep(false));
      messages.push({ role: 'user', content: correctionRequest(grounding) });
      return undefined;
    }
    await hooks.onStep?.(answerStep(true));
    return {
      status: 'completed',
      content: shown.text,
      model: response.model,
      finishReason,
      toolCalls: state.toolCalls,
      pendingToolCalls: [],
      usage: state.usage,
      iterationsUsed: state.iterations,
      grounding,
    };
  }

  /**
   * A step with tool calls: the built-in ones run, their results are appended and the step is handed to
   * onStep. The turn pauses after it for write proposals or client calls (undefined: go on).
   */
  private async toolStep(state: TurnState, response: LlmResponse): Promise<TurnResult | undefined> {
    const { turn, messages, hooks } = state;
    state.iterations++;
    const { unique, duplicates } = this.refuseDuplicateIds(turn, response.toolCalls);
    const { kept, dropped } = this.capToolCalls(turn, unique);
    const text = response.content && (await this.references(turn, messages).render(response.content)).text;
    const assistant = assistantWithToolCalls(text, kept, dropped, duplicates);
    messages.push(assistant);
    // Parsed once per call, for hooks and the response; the registry parses (strictly) for execution.
    const calls = kept.map((call) => ({
      call,
      shown: readableArguments(call.arguments),
      client: turn.clientTools.has(call.name),
    }));
    const client = calls.filter((c) => c.client).map((c) => c.call);
    for (const { call, shown, client: isClient } of calls) {
      hooks.onToolCall?.({ id: call.id, name: call.name, arguments: shown, client: isClient });
    }
    const executed = await this.runBuiltInCalls(
      state,
      calls.filter((c) => !c.client).map((c) => c.call),
    );
    const { proposals, results } = this.separateProposals(this.withResultRefs(executed, messages), client);
    const shownArguments = new Map(calls.map(({ call, shown }) => [call.id, shown]));
    const toolMessages = appendResults(state, results, shownArguments);
    await hooks.onStep?.({
      assistant,
      toolCalls: kept,
      toolMessages,
      toolResults: results,
      pendingClientCalls: client,
      pendingApprovals: proposals,
      usage: response.usage,
      iterationsUsed: state.iterations,
      final: false,
      model: response.model,
      finishReason: 'tool_calls',
    });
    const pending = proposals.map((result) => ({ ...result, arguments: shownArguments.get(result.toolCallId) }));
    return pause(state, response, pending, client);
  }

  /**
   * A call whose id an earlier call of the step already has is refused: it runs nothing (built-in, write or
   * client tool alike), since its result, a proposal, a hook or a person's decision would be taken for the
   * other call's. It leaves the conversation too (one tool message per call id, as the model endpoint requires)
   * and the model reads the refusal (duplicate_tool_call_id) in a note of the step's assistant message.
   * Returns the calls in order, each id's first, and the 1-based positions of the refused ones.
   */
  private refuseDuplicateIds(turn: AgentTurn, toolCalls: LlmToolCall[]): { unique: LlmToolCall[]; duplicates: number[] } {
    const seen = new Set<string>();
    const unique: LlmToolCall[] = [];
    const duplicates: number[] = [];
    toolCalls.forEach((call, i) => {
      if (seen.has(call.id)) duplicates.push(i + 1);
      else {
        seen.add(call.id);
        unique.push(call);
      }
    });
    if (duplicates.length) {
      this.logger.warn({
        msg: 'tool calls reusing an id of the same step refused',
        code: DUPLICATE_TOOL_CALL_ID,
        agent: turn.toolContext.agent?.name,
        positions: duplicates,
      });
    }
    return { unique, duplicates };
  }

  /**
   * A model can ask for thousands of calls in one step. Past the cap they neither run nor stay in the
   * conversation (a result for each would overflow the next call's context, blaming the caller for
   * the model's output): one note in the assistant message tells the model how many were dropped.
   */
  private capToolCalls(turn: AgentTurn, toolCalls: LlmToolCall[]): { kept: LlmToolCall[]; dropped: number } {
    const kept = toolCalls.slice(0, turn.maxToolCallsPerStep);
    const dropped = toolCalls.length - kept.length;
    if (dropped) {
      this.logger.warn({
        msg: 'tool calls past the step cap dropped',
        agent: turn.toolContext.agent?.name,
        cap: turn.maxToolCallsPerStep,
        dropped,
      });
    }
    return { kept, dropped };
  }

  /** Runs a step's built-in tool calls; results in call order. */
  private async runBuiltInCalls(state: TurnState, builtIn: readonly LlmToolCall[]): Promise<ToolResult[]> {
    const { turn, messages, turnSignal, deadline } = state;
    // A key revoked (or changed) meanwhile runs no tool: its notification has cleared this replica's cache of
    // keys, which is read through while the notifications may not arrive (see AccessService.keyCaller).
    const caller = turn.toolContext.caller;
    if (builtIn.length && caller) await this.access.assertCurrent(caller);
    // calculate computes only with the values of the turn's earlier data results; visualize charts only their rows.
    const evidence = builtIn.some((call) => this.registry.get(call.name)?.readsTurnResults)
      ? operandEvidence(turnSources(messages, state.turnStart, this.kindOf), (sources) => this.catalog.describe(sources))
      : undefined;
    const executed = await this.registry.executeAll(
      builtIn.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments })),
      { ...turn.toolContext, signal: turnSignal, ...(evidence ? { evidence } : {}) },
    );
    if (deadline.aborted) throw deadlineError();
    // Cancelled (interrupt, client gone, shutdown): tool results of an abandoned turn are not kept.
    if (turnSignal.aborted) throw new DomainError('turn_aborted', 'The turn was cancelled');
    return executed;
  }

  /**
   * A write tool's successful result is a proposal: nothing was written, and its result is what a person
   * decides. Refused proposals (no grant, bad arguments) are ordinary error results the model reads.
   * Empties `client` into not-run results when the step proposes a write.
   */
  private separateProposals(executed: ToolResult[], client: LlmToolCall[]): { proposals: ToolResult[]; results: ToolResult[] } {
    const proposals = executed.filter((result) => !result.isError && this.registry.get(result.name)?.needsApproval);
    const results = executed.filter((result) => !proposals.includes(result));
    if (proposals.length && client.length) {
      // One pause at a time: client calls of a step that proposes a write are answered as not run.
      for (const call of client.splice(0)) results.push(notRunResult(call));
    }
    return { proposals, results };
  }

  /**
   * Grounds an answer against the turn's data results (their columns' meanings read from the
   * definitions), not counting the numbers the question itself holds.
   */
  private async groundTurn(
    turn: AgentTurn,
    answer: RenderedText,
    messages: readonly LlmMessage[],
    turnStart: number,
  ): Promise<Grounding> {
    const question = messages[turnStart]?.role === 'user' ? messages[turnStart].content : '';
    const sources = await this.catalog.describe(turnSources(messages, turnStart, this.kindOf));
    const grounding = groundBounded(answer.text, sources, {
      question: typeof question === 'string' ? question : '',
      locale: turn.locale,
      references: answer.references,
    });
    const caveats = await this.catalog.caveats(turn.toolContext.caller, usedSources(grounding, sources, answer), question);
    return caveats.length ? { ...grounding, caveats } : grounding;
  }

  /** What a tool declares its results hold. */
  private readonly kindOf = (toolName: string): ToolResultKind | undefined => this.registry.get(toolName)?.holds;

  /** The figure references of this conversation's answers, resolved against its data results. */
  private references(turn: AgentTurn, messages: readonly LlmMessage[]): FigureReferences {
    return new FigureReferences(
      () => numberedResults(messages, this.kindOf),
      (sources) => this.catalog.describe(sources),
      turn.locale,
    );
  }

  /**
   * Data results get their references: `resultRef` numbers them in the conversation (after every earlier one, across
   * turns) and each row gets its `ref`, which the answer cites. Errors and descriptions get none.
   */
  private withResultRefs(results: ToolResult[], messages: readonly LlmMessage[]): ToolResult[] {
    let next: number | undefined;
    return results.map((result) => {
      const kind = this.kindOf(result.name);
      if (result.isError || !isReferenced(kind)) return result;
      next ??= nextResultNumber(messages);
      return { ...result, content: withRefs(result.content, kind, next++) };
    });
  }

  private async callModel(
    turn: AgentTurn,
    messages: LlmMessage[],
    withTools: boolean,
    maxTokens: number,
    hooks: TurnHooks,
    signal: AbortSignal,
    deadline: AbortSignal,
  ): Promise<LlmResponse> {
    const tools = withTools ? turn.tools : [];
    // The conversation (what a durable chat stores) stays whole; only what this call sends is trimmed.
    const fitted = await fitToContext({ messages, tools, budget: turn.contextTokens, pinned: turn.pinnedMessages });
    if (fitted.elidedResults || fitted.droppedTurns) {
      this.logger.log({
        msg: 'conversation trimmed to the context window',
        agent: turn.toolContext.agent?.name,
        contextTokens: turn.contextTokens,
        conversationTokens: fitted.conversationTokens,
        sentTokens: fitted.estimatedTokens,
        elidedResults: fitted.elidedResults,
        elidedCharacters: fitted.elidedCharacters,
        droppedTurns: fitted.droppedTurns,
        droppedMessages: fitted.droppedMessages,
      });
    }
    // Every front door's model calls pass here: the quota is checked before the provider is asked, and
    // each call, answered or failed, becomes one usage row.
    const scope = {
      keyId: turn.toolContext.caller?.keyId,
      agent: turn.toolContext.agent?.name,
      chatId: turn.toolContext.chatId,
    };
    // The key the turn runs as must still be active (a revocation clears this cache on every replica).
    if (turn.toolContext.caller) await this.access.assertCurrent(turn.toolContext.caller);
    await this.usage.assertWithinQuota(scope);
    const started = performance.now();
    // Text goes out with its figure references filled in, never half a reference.
    const stream = hooks.onTextDelta && this.references(turn, messages).stream((text) => hooks.onTextDelta?.(text));
    let response: LlmResponse;
    try {
      response = await this.llm.complete(
        {
          model: turn.model,
          messages: fitted.messages,
          tools: withTools ? turn.tools : undefined,
          toolChoice: withTools ? turn.toolChoice : undefined,
          temperature: turn.temperature,
          maxTokens,
          stop: turn.stop,
          user: turn.user,
          signal,
          agent: turn.toolContext.agent?.name,
          onRetry:
            hooks.onRetry &&
            (async (retry) => {
              await stream?.reset();
              await hooks.onRetry?.(retry);
            }),
        },
        stream ? { onTextDelta: (delta) => stream.push(delta) } : undefined,
      );
      await stream?.end();
    } catch (error) {
      const failure = deadline.aborted ? deadlineError() : error;
      this.usage.record({
        ...scope,
        model: turn.model,
        ...ZERO_USAGE,
        durationMs: performance.now() - started,
        outcome: codeOf(failure),
      });
      throw failure;
    }
    this.usage.record({
      ...scope,
      model: response.model || turn.model,
      ...response.usage,
      durationMs: performance.now() - started,
      outcome: 'ok',
    });
    return response;
  }
}

/** What a turn carries from step to step. */
interface TurnState {
  readonly turn: AgentTurn;
  readonly messages: LlmMessage[];
  readonly hooks: TurnHooks;
  readonly turnSignal: AbortSignal;
  readonly deadline: AbortSignal;
  /** Index of the turn's question in `messages`. */
  readonly turnStart: number;
  readonly toolCalls: ExecutedToolCall[];
  /** The answer went back to the model to be corrected (grounding `retry`, once per turn). */
  correcting: boolean;
  iterations: number;
  usage: LlmUsage;
}

/** Tokens the turn has spent, earlier requests of it included. */
function spent(state: TurnState): number {
  return (state.turn.tokensUsed ?? 0) + state.usage.totalTokens;
}

/** The turn's end when its token budget is spent: the last answer text it has. */
function outOfBudget(state: TurnState): TurnResult {
  return {
    status: 'completed',
    content: lastAssistantText(state.messages),
    model: state.turn.model,
    finishReason: 'length',
    toolCalls: state.toolCalls,
    pendingToolCalls: [],
    usage: state.usage,
    iterationsUsed: state.iterations,
  };
}

/** Appends one tool message per result to the conversation and records each call; the tool messages. */
function appendResults(state: TurnState, results: readonly ToolResult[], shownArguments: Map<string, unknown>): LlmMessage[] {
  const toolMessages: LlmMessage[] = results.map((result) => ({
    role: 'tool',
    tool_call_id: result.toolCallId,
    content: toolMessageContent(result),
  }));
  state.messages.push(...toolMessages);
  for (const result of results) {
    state.hooks.onToolResult?.(result);
    state.toolCalls.push({
      id: result.toolCallId,
      name: result.name,
      arguments: shownArguments.get(result.toolCallId),
      result: result.content,
      isError: result.isError,
    });
  }
  return toolMessages;
}

/** The turn's pause after a tool step: for write proposals first, else for client calls; undefined when neither. */
function pause(
  state: TurnState,
  response: LlmResponse,
  proposals: PendingApproval[],
  client: LlmToolCall[],
): TurnResult | undefined {
  if (proposals.length) {
    return {
      status: 'requires_approval',
      content: response.content,
      model: response.model,
      finishReason: 'stop',
      toolCalls: state.toolCalls,
      pendingToolCalls: [],
      pendingApprovals: proposals,
      usage: state.usage,
      iterationsUsed: state.iterations,
    };
  }
  if (client.length) {
    return {
      status: 'requires_action',
      content: response.content,
      model: response.model,
      finishReason: 'stop',
      toolCalls: state.toolCalls,
      pendingToolCalls: client,
      usage: state.usage,
      iterationsUsed: state.iterations,
    };
  }
  return undefined;
}

/** The result of a client tool call that was not handed to the client: its step proposed a write. */
function notRunResult(call: LlmToolCall): ToolResult {
  return {
    toolCallId: call.id,
    name: call.name,
    ...errorOutcome(
      'tool_not_run',
      `Tool "${call.name}" was not run: the same step proposed a write, which waits for a person's approval. Call it again after the decision if you still need it.`,
    ),
    durationMs: 0,
  };
}

function codeOf(error: unknown): string {
  if (error instanceof DomainError) return error.code;
  return 'internal_error';
}

function deadlineError(): DomainError {
  return new DomainError('agent_timeout', 'The agent did not finish within its time limit (guardrails.maxExecutionTimeSec)');
}

const DUPLICATE_TOOL_CALL_ID: ErrorCode = 'duplicate_tool_call_id';

/** The notes of assistantWithToolCalls, which end its text: not the model's words, so never its answer. */
const STEP_NOTES = [
  /^\[\d+ more tool calls of this step were dropped without running: [^\]]*\]$/,
  /^\[Tool call failed \(duplicate_tool_call_id\): [^\]]*\]$/,
];

/** An assistant text without the notes about dropped or refused calls. */
function withoutDroppedNote(text: string): string {
  for (;;) {
    const at = text.lastIndexOf('[');
    if (at < 0 || !STEP_NOTES.some((note) => note.test(text.slice(at)))) return text;
    text = text.slice(0, at).trimEnd();
  }
}

/**
 * The assistant message of a step with tool calls: its text, then the notes the model reads about the calls
 * refused for reusing an id of the step (their 1-based positions in it) and the calls dropped past the cap,
 * and the calls kept. The notes hold nothing the model wrote (no id, no name), so none can forge or end one.
 */
function assistantWithToolCalls(
  text: string,
  calls: readonly LlmToolCall[],
  dropped: number,
  duplicates: readonly number[] = [],
): LlmMessage {
  const refused = duplicates.length
    ? `[Tool call failed (${DUPLICATE_TOOL_CALL_ID}): the tool call${duplicates.length > 1 ? 's' : ''} at position ` +
      `${duplicates.join(', ')} of this step reused the id of an earlier call of the step, so ` +
      `${duplicates.length > 1 ? 'they were' : 'it was'} refused without running. Give every call of a step its own id, ` +
      'and make the calls you still need in your next step.]'
    : '';
  const note = dropped
    ? `[${dropped} more tool calls of this step were dropped without running: at most ${calls.length} run per step. ` +
      'Make the calls you still need in your next step.]'
    : '';
  return {
    role: 'assistant',
    content: [text, refused, note].filter(Boolean).join('\n\n') || null,
    tool_calls: calls.map((call) =>
      call.kind === 'custom'
        ? { id: call.id, type: 'custom' as const, custom: { name: call.name, input: call.arguments } }
        : { id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } },
    ),
  };
}

const FAILED_PREFIX = 'Tool call failed: ';

/** The tool message the model reads; failures say so first, so the model knows to recover. */
export function toolMessageContent(result: { content: unknown; isError: boolean }): string {
  const body = typeof result.content === 'string' ? result.content : JSON.stringify(result.content ?? null);
  return result.isError ? `${FAILED_PREFIX}${body}` : body;
}

/** Index of the last user message: where the current turn starts. */
function lastUserIndex(messages: readonly LlmMessage[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === 'user') return i;
  return 0;
}

/**
 * The results of the turn's tool calls after its question (successful ones: an error message states
 * no data), with the name and arguments of each call.
 */
function turnSources(
  messages: readonly LlmMessage[],
  turnStart: number,
  kindOf: (toolName: string) => ToolResultKind | undefined,
): GroundingSource[] {
  const calls = new Map<string, { name: string; arguments: unknown }>();
  const sources: GroundingSource[] = [];
  for (const message of messages.slice(turnStart + 1)) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) {
        if (call.type === 'function')
          calls.set(call.id, { name: call.function.name, arguments: parsedResult(call.function.arguments) });
        else calls.set(call.id, { name: call.custom.name, arguments: call.custom.input });
      }
      continue;
    }
    if (message.role !== 'tool' || typeof message.content !== 'string') continue;
    if (message.content.startsWith(FAILED_PREFIX)) continue;
    const call = calls.get(message.tool_call_id);
    // A call the turn does not show (a client tool answered in another request) is read as a description, never as data.
    const name = call?.name ?? 'unknown';
    const holds = kindOf(name);
    sources.push({
      toolCallId: message.tool_call_id,
      name,
      ...(holds ? { holds } : {}),
      arguments: call?.arguments,
      content: parsedResult(message.content),
    });
  }
  return sources;
}

/** The results an answer's figures came from: those its references cite and those its typed figures matched. */
function usedSources(grounding: Grounding, sources: readonly GroundingSource[], answer: RenderedText): GroundingSource[] {
  const used = new Map<string, GroundingSource>();
  for (const reference of answer.references)
    if (reference.cell) used.set(reference.cell.source.toolCallId, reference.cell.source);
  const supporting = new Set(grounding.supported.map((figure) => figure.toolCallId));
  for (const source of sources) if (supporting.has(source.toolCallId)) used.set(source.toolCallId, source);
  return [...used.values()];
}

function parsedResult(content: string): unknown {
  try {
    return JSON.parse(content);
  } catch {
    return content;
  }
}

function lastAssistantText(messages: LlmMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message.role !== 'assistant' || typeof message.content !== 'string') continue;
    const text = withoutDroppedNote(message.content);
    if (text) return text;
  }
  return '';
}
