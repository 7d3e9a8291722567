import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { addUsage, type LlmUsage, ZERO_USAGE } from '../llm/llm.types';
import {
  isToolCallId,
  MAX_MESSAGE_LENGTH,
  MAX_TOOL_CALL_ID_LENGTH,
  messageLength,
  type ConversationMessage,
  type ConversationPart,
  WITHHELD_REASON,
} from '../runtime/conversation';
import type { Grounding } from '../runtime/grounding';
import { TOOL_NAME_PATTERN } from '../tools/tool.define';
import type { WriteProposal } from '../tools/tool.types';
import { chartSpecOf } from '../tools/chart-tools/visualize.tool';

/**
 * A conversation sent by a client: `{ role, content }` messages, or AI SDK UI messages (`parts`).
 * Only user and assistant turns (a client may not inject system or tool messages). Of UI parts,
 * text and finished tool parts count (`tool-<name>` and `dynamic-tool` in state `output-available`
 * or `output-error`): they become the assistant's tool calls and the tool results the model sees,
 * so a follow-up question can build on an earlier result. Other parts (reasoning, files, sources,
 * data, tool calls still without an output) are ignored.
 */
export function fromClientMessages(input: readonly unknown[]): ConversationMessage[] {
  return input.flatMap((message, index) => fromClientMessage(message, index));
}

/** One message of fromClientMessages; `index` is its place in the request, for error messages. */
export function fromClientMessage(message: unknown, index: number): ConversationMessage[] {
  const fail = (problem: string) => new DomainError('invalid_message', `messages[${index}]${problem}`);
  if (!isPlainObject(message)) throw fail(' must be an object { role, content } or a UI message { role, parts }');
  const { role, content, parts } = message;
  if (role !== 'user' && role !== 'assistant') throw fail('.role must be "user" or "assistant"');
  let messages: ConversationMessage[];
  if (content !== undefined) {
    if (typeof content !== 'string') throw fail('.content must be a string');
    messages = [{ role, parts: [{ type: 'text', text: content }] }];
  } else if (Array.isArray(parts)) {
    messages = role === 'user' ? [{ role, parts: [{ type: 'text', text: textOf(parts) }] }] : assistantSteps(parts, fail);
  } else {
    throw fail('.content must be a string');
  }
  if (messages.reduce((sum, m) => sum + messageLength(m), 0) > MAX_MESSAGE_LENGTH)
    throw fail(` is longer than ${MAX_MESSAGE_LENGTH} characters`);
  return messages;
}

function textOf(parts: unknown[]): string {
  return parts
    .filter((p): p is { type: 'text'; text: string } => isPlainObject(p) && p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('');
}

/**
 * An assistant UI message holds a whole turn: steps of text and tool calls, each step's results
 * inline. The model saw each step as an assistant message followed by one tool message per call,
 * so that is what it gets back. A step ends at `step-start`, or where text follows tool calls.
 */
function assistantSteps(parts: unknown[], fail: (problem: string) => DomainError): ConversationMessage[] {
  const messages: ConversationMessage[] = [];
  let text = '';
  let calls: ConversationPart[] = [];
  let results: ConversationPart[] = [];
  const endStep = () => {
    if (text || calls.length)
      messages.push({ role: 'assistant', parts: [...(text ? [{ type: 'text' as const, text }] : []), ...calls] });
    if (results.length) messages.push({ role: 'tool', parts: results });
    text = '';
    calls = [];
    results = [];
  };
  parts.forEach((part, i) => {
    if (!isPlainObject(part) || typeof part.type !== 'string') throw fail(`.parts[${i}] must be an object with a type`);
    if (part.type === 'step-start') return endStep();
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw fail(`.parts[${i}].text must be a string`);
      if (calls.length) endStep();
      text += part.text;
      return;
    }
    if (part.type !== 'dynamic-tool' && !part.type.startsWith('tool-')) return;
    const toolName = part.type === 'dynamic-tool' ? part.toolName : part.type.slice(5);
    if (part.state !== 'output-available' && part.state !== 'output-error') return;
    if (typeof toolName !== 'string' || !TOOL_NAME_PATTERN.test(toolName)) {
      throw fail(`.parts[${i}] names a tool that cannot exist (1-64 of A-Z, a-z, 0-9, _ and -)`);
    }
    const { toolCallId } = part;
    if (!isToolCallId(toolCallId)) {
      throw fail(`.parts[${i}].toolCallId must be a string of 1 to ${MAX_TOOL_CALL_ID_LENGTH} characters`);
    }
    const isError = part.state === 'output-error';
    calls.push({ type: 'tool-call', toolCallId, toolName, input: part.input ?? {} });
    // An error's text is what the model read after "Tool call failed:" when the call ran.
    const output = isError ? (typeof part.errorText === 'string' ? part.errorText : 'The tool call failed') : part.output;
    results.push({ type: 'tool-result', toolCallId, toolName, output, isError });
  });
  endStep();
  // An assistant message without anything the model can read still marks a turn of the conversation.
  return messages.length ? messages : [{ role: 'assistant', parts: [{ type: 'text', text: '' }] }];
}

// ---------------------------------------------------------------------------------------------
// The other way: a stored conversation as UI messages (durable chats for useChat)
// ---------------------------------------------------------------------------------------------

type ToolCallPart = Extract<ConversationPart, { type: 'tool-call' }>;
type ToolResultPart = Extract<ConversationPart, { type: 'tool-result' }>;

/** Why a model step ended: the turn's reason on its last step, `tool_calls` on the others. */
export type StepFinishReason = 'stop' | 'length' | 'max_iterations' | 'tool_calls';

/** A message as durable chats store it: one per user message, model step, or batch of tool results. */
export interface StoredMessage extends ConversationMessage {
  id: number;
  /** The id a client gave a user message. */
  clientId?: string | null;
  usage?: LlmUsage | null;
  /** Of an assistant message: what answered and why the step ended. */
  metadata?: { model: string; finishReason: StepFinishReason; grounding?: Grounding; superseded?: boolean } | null;
}

/** A tool part of a UI message: `tool-<name>`, in the state its result gives it. */
export type UiToolPart = { type: `tool-${string}`; toolCallId: string; input: unknown } & (
  | { state: 'input-available' }
  | { state: 'output-available'; output: unknown }
  | { state: 'output-error'; errorText: string }
  | { state: 'approval-requested'; approval: UiApproval }
);

/**
 * A write proposal as the AI SDK's approval request: the approval id is the call's id, the descriptor what would
 * change, the signature the proposal's token (the client sends it back with its approval response).
 */
export interface UiApproval {
  id: string;
  descriptor: { objectName: string; operation: string; changes: unknown[]; expiresAt: string };
  signature: string;
}

/** The approval request of a write proposal waiting for a decision. */
export function uiApproval(toolCallId: string, proposal: WriteProposal): UiApproval {
  const { objectName, operation, changes, expiresAt, token } = proposal;
  return { id: toolCallId, descriptor: { objectName, operation, changes, expiresAt }, signature: token };
}

/** The parts of UI messages this server writes, a subset of the AI SDK's. */
export type UiPart =
  | { type: 'step-start' }
  | { type: 'text'; text: string; state?: 'done' }
  | UiToolPart
  | { type: 'data-grounding'; data: Grounding }
  | { type: 'data-chart'; id: string; data: { toolCallId: string; spec: Record<string, unknown> } };

/** What an answer reports about itself (`messageMetadata` of the stream's `finish`). */
export interface UiTurnMetadata {
  model?: string;
  finishReason?: StepFinishReason;
  usage: LlmUsage;
  /** Of the answer's last step: which of its numbers the tool results support. */
  grounding?: Grounding;
}

/** An AI SDK UI message. */
export interface UiMessage {
  id: string;
  role: 'user' | 'assistant';
  parts: UiPart[];
  metadata?: UiTurnMetadata;
}

/** One step of an answer as a UI shows it: the model's text, then its tool calls in the state their results give them. */
export interface UiStep {
  text: string;
  tools: UiCallPart[];
}

/** A tool part as a stored call and its result give it (approval requests come from the chat's pending proposals). */
export type UiCallPart = Exclude<UiToolPart, { state: 'approval-requested' }>;

/** The UI id of a user message: the client's own, or one made from the stored id. */
export function userMessageId(message: Pick<StoredMessage, 'id' | 'clientId'>): string {
  return message.clientId ?? `msg-${message.id}`;
}

/**
 * The UI id of the answer to a user message. One assistant UI message holds the whole turn (every
 * step, across a pause for client tools), so its id comes from the user message that opened the turn:
 * known before the first step exists, and the same for a stream, its replay and the history.
 */
export function replyMessageId(userMessageStoredId: number): string {
  return `msg-${userMessageStoredId}-reply`;
}

/**
 * A stored conversation as UI messages: each user message, and one assistant message per turn with
 * a `step-start` for each model step, its text (`state: 'done'`) and its tool calls as `tool-<name>`
 * parts: `output-available` or `output-error` once the result is stored, `input-available` while a
 * client tool call waits for its result. Text parts of one message are joined into one.
 */
export function toUiMessages(
  messages: readonly StoredMessage[],
  proposals: ReadonlyMap<string, WriteProposal> = new Map(),
): UiMessage[] {
  const ui: UiMessage[] = [];
  for (const turn of splitTurns(messages)) {
    if (turn.user)
      ui.push({ id: userMessageId(turn.user), role: 'user', parts: [{ type: 'text', text: joinedText(turn.user) }] });
    if (!turn.rest.length) continue;
    const results = resultsOf(turn.rest);
    const parts: UiPart[] = [];
    for (const message of turn.rest) {
      if (message.role !== 'assistant') continue;
      const step = uiStep(message, results);
      parts.push({ type: 'step-start' });
      if (step.text) parts.push({ type: 'text', text: step.text, state: 'done' });
      for (const tool of step.tools) {
        const proposal = tool.state === 'input-available' ? proposals.get(tool.toolCallId) : undefined;
        if (proposal) {
          parts.push({ ...tool, state: 'approval-requested', approval: uiApproval(tool.toolCallId, proposal) });
          continue;
        }
        parts.push(tool);
        // Where the stream sent it: right after the call's output.
        const chart = uiChartPart(tool);
        if (chart) parts.push(chart);
      }
    }
    const reply: UiMessage = { id: replyMessageId(turn.user?.id ?? 0), role: 'assistant', parts };
    const metadata = turnMetadata(turn.rest);
    // Where the stream sent it: after the last step (the AI SDK keeps a data part in the message).
    if (metadata?.grounding) parts.push({ type: 'data-grounding', data: metadata.grounding });
    if (metadata) reply.metadata = metadata;
    ui.push(reply);
  }
  return ui;
}

/** A model step (an assistant message) as a UI step, given the tool results known so far. */
export function uiStep(message: StoredMessage, results: ReadonlyMap<string, ToolResultPart>): UiStep {
  const calls = message.parts.filter((p): p is ToolCallPart => p.type === 'tool-call');
  return { text: joinedText(message), tools: calls.map((call) => uiToolPart(call, results.get(call.toolCallId))) };
}

/** The tool results among `messages`, by tool call id. */
export function resultsOf(messages: readonly StoredMessage[]): Map<string, ToolResultPart> {
  const results = new Map<string, ToolResultPart>();
  for (const message of messages) {
    for (const part of message.parts) if (part.type === 'tool-result') results.set(part.toolCallId, part);
  }
  return results;
}

/** A tool call as a UI tool part, with its result when there is one. */
export function uiToolPart(call: ToolCallPart, result: ToolResultPart | undefined): UiCallPart {
  const base = { type: `tool-${call.toolName}` as const, toolCallId: call.toolCallId, input: call.input };
  if (!result) return { ...base, state: 'input-available' };
  if (result.isError) return { ...base, state: 'output-error', errorText: toolErrorText(result.output) };
  return { ...base, state: 'output-available', output: uiOutput(result) };
}

type UiChartPart = Extract<UiPart, { type: 'data-chart' }>;

/**
 * A chart as a UI message data part (`data-chart`), sent right after its visualize call's output;
 * its id is the call's, so the AI SDK keeps one part per chart.
 */
export function chartPart(toolCallId: string, spec: Record<string, unknown>): UiChartPart {
  return { type: 'data-chart', id: toolCallId, data: { toolCallId, spec } };
}

/** The `data-chart` part of a visualize call's output (none for a withheld or failed one). */
export function uiChartPart(tool: UiToolPart): UiChartPart | undefined {
  if (tool.state !== 'output-available') return undefined;
  const spec = chartSpecOf(tool.type.slice('tool-'.length), tool.output);
  return spec ? chartPart(tool.toolCallId, spec) : undefined;
}

/** A result's output as a UI shows it; a withheld result (it has none) as `{ withheld: true, reason }`. */
export function uiOutput(result: ToolResultPart): unknown {
  return result.withheld ? { withheld: true, reason: WITHHELD_REASON } : result.output;
}

/** The text of a failed call: what a client posted as `errorText`, or the error result as JSON. */
export function toolErrorText(output: unknown): string {
  return typeof output === 'string' ? output : JSON.stringify(output ?? null);
}

/**
 * What an answer reports: the model and finish reason of its last step, where stored, and the usage
 * of all its steps. Undefined before its first step.
 */
export function turnMetadata(messages: readonly StoredMessage[]): UiTurnMetadata | undefined {
  const steps = messages.filter((m) => m.role === 'assistant');
  if (!steps.length) return undefined;
  const usage = steps.reduce((sum, step) => (step.usage ? addUsage(sum, step.usage) : sum), ZERO_USAGE);
  const last = steps.at(-1)!.metadata;
  if (!last) return { usage };
  // A superseded answer's grounding is not the turn's: the correcting step that follows will have its own.
  const grounding = last.superseded ? undefined : last.grounding;
  return { model: last.model, finishReason: last.finishReason, usage, ...(grounding ? { grounding } : {}) };
}

/** A finish reason in the AI SDK's words (the `finishReason` of its `finish` chunk). */
export function uiFinishReason(reason: StepFinishReason | undefined): 'stop' | 'length' | 'tool-calls' | 'other' {
  if (reason === 'stop' || reason === 'length') return reason;
  return reason === 'tool_calls' ? 'tool-calls' : 'other';
}

/** Turns of a conversation: the user message that opens each one (none before the first) and what follows it. */
function splitTurns(messages: readonly StoredMessage[]): Array<{ user?: StoredMessage; rest: StoredMessage[] }> {
  const turns: Array<{ user?: StoredMessage; rest: StoredMessage[] }> = [];
  for (const message of messages) {
    if (message.role === 'user') turns.push({ user: message, rest: [] });
    else if (turns.length) turns.at(-1)!.rest.push(message);
    else turns.push({ rest: [message] });
  }
  return turns;
}

function joinedText(message: ConversationMessage): string {
  return message.parts
    .filter((p): p is Extract<ConversationPart, { type: 'text' }> => p.type === 'text')
    .map((p) => p.text)
    .join('');
}
