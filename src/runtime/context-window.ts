import { DomainError } from '../common/domain-error';
import type { LlmMessage, LlmTool } from '../llm/llm.types';

/** Counts the tokens of a text. */
export type CountTokens = (text: string) => number;

/**
 * Tokens the chat format adds around each message (role and separators) and before the answer, as
 * OpenAI documents them for its chat models; tool calls and schemas get the same allowance.
 */
const PER_MESSAGE = 4;
const PER_TOOL_CALL = 4;
const PER_TOOL = 4;
const REPLY_PRIMING = 3;

/**
 * A run of one character class longer than this is cut into pieces of LONG_RUN_PIECE before it is
 * tokenized: byte-pair merging costs the square of a word's length, so 100,000 letters without a space
 * would take seconds. Cutting can only add a token per piece, so the count stays an upper estimate.
 */
const LONG_RUN = /[\p{L}\p{M}]{64,}|[^\s\p{L}\p{N}]{64,}|\s{64,}/gu;
const LONG_RUN_PIECE = 32;

let tokenizer: Promise<CountTokens> | undefined;

/**
 * o200k_base, the encoding of OpenAI's current models (GPT-4o, GPT-4.1, GPT-5, o-series), from
 * gpt-tokenizer (pure JS, its ranks bundled). Other models' tokenizers differ by some percent either way.
 * Loaded on first need: the ranks take ~100 MB and ~0.3 s, and a replica whose conversations all fit
 * below the byte bound never pays for them.
 */
export function loadTokenizer(): Promise<CountTokens> {
  tokenizer ??= import('gpt-tokenizer/encoding/o200k_base').then(({ countTokens }) => {
    // Special tokens in a user's text (`<|endoftext|>`) are plain text to the endpoint, and to us.
    const options = { disallowedSpecial: new Set<string>() };
    return (text: string) => countInPieces(text, (piece) => countTokens(piece, options));
  });
  // A failed load is tried again by the next request, not remembered.
  tokenizer.catch(() => (tokenizer = undefined));
  return tokenizer;
}

function countInPieces(text: string, count: CountTokens): number {
  let total = 0;
  let last = 0;
  for (const match of text.matchAll(LONG_RUN)) {
    if (match.index > last) total += count(text.slice(last, match.index));
    const run = match[0];
    for (let start = 0; start < run.length;) {
      let end = Math.min(start + LONG_RUN_PIECE, run.length);
      // Never between the two halves of a surrogate pair.
      if (end < run.length && isLowSurrogate(run.charCodeAt(end))) end++;
      total += count(run.slice(start, end));
      start = end;
    }
    last = match.index + run.length;
  }
  return last < text.length ? total + count(text.slice(last)) : total;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** The texts of a message the model reads: its content, and the name, id and arguments of each tool call. */
function textsOf(message: LlmMessage): string[] {
  const texts: string[] = [];
  const content = message.content;
  if (typeof content === 'string') texts.push(content);
  else if (Array.isArray(content)) {
    for (const part of content) texts.push('text' in part && typeof part.text === 'string' ? part.text : JSON.stringify(part));
  }
  if (message.role === 'tool') texts.push(message.tool_call_id);
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) {
      texts.push(call.id);
      if (call.type === 'function') texts.push(call.function.name, call.function.arguments);
      else texts.push(call.custom.name, call.custom.input);
    }
  }
  return texts;
}

function overheadOf(message: LlmMessage): number {
  return PER_MESSAGE + (message.role === 'assistant' ? (message.tool_calls?.length ?? 0) * PER_TOOL_CALL : 0);
}

/**
 * What one message costs, cached on the message object for as long as it lives: the loop reuses the
 * same objects on every call of a turn, so each message is counted once per turn. `bytes` is an exact
 * upper bound (a byte-level BPE token covers at least one UTF-8 byte) that needs no tokenizer.
 */
interface MessageCost {
  bytes: number;
  tokens?: number;
}

const costs = new WeakMap<object, MessageCost>();

function costOf(message: object, texts: () => string[], overhead: number): MessageCost {
  let cost = costs.get(message);
  if (!cost) {
    cost = { bytes: texts().reduce((sum, text) => sum + Buffer.byteLength(text), overhead) };
    costs.set(message, cost);
  }
  return cost;
}

function messageCost(message: LlmMessage): MessageCost {
  return costOf(message, () => textsOf(message), overheadOf(message));
}

function toolsCost(tools: readonly LlmTool[]): MessageCost {
  return costOf(tools, () => tools.map((tool) => JSON.stringify(tool)), tools.length * PER_TOOL);
}

function tokensOf(message: LlmMessage, count: CountTokens): number {
  const cost = messageCost(message);
  cost.tokens ??= textsOf(message).reduce((sum, text) => sum + count(text), overheadOf(message));
  return cost.tokens;
}

function toolTokens(tools: readonly LlmTool[], count: CountTokens): number {
  if (!tools.length) return 0;
  const cost = toolsCost(tools);
  cost.tokens ??= tools.reduce((sum, tool) => sum + count(JSON.stringify(tool)), tools.length * PER_TOOL);
  return cost.tokens;
}

/**
 * Estimated prompt tokens of a request: every message's texts and tool calls, the tool schemas (as JSON,
 * which is longer than the form endpoints render them in, so this errs high) and the chat format's overhead.
 */
export function estimateTokens(messages: readonly LlmMessage[], tools: readonly LlmTool[], count: CountTokens): number {
  return messages.reduce((sum, message) => sum + tokensOf(message, count), REPLY_PRIMING + toolTokens(tools, count));
}

/** The text a tool message carries instead of a result that did not fit. */
export function elisionMarker(characters: number): string {
  return `[result elided to fit the context window: ${characters} characters]`;
}

export interface ContextRequest {
  /** The whole conversation: the preamble, the history, the current turn's steps. */
  messages: readonly LlmMessage[];
  /** The tool schemas sent with the request (they count). */
  tools: readonly LlmTool[];
  /** Most prompt tokens the request may take. */
  budget: number;
  /** Leading messages that are always sent: system messages (agent, caller) and the context message. */
  pinned: number;
}

export interface FittedContext {
  /** The messages to send: the conversation's own array when it fits as it is, a trimmed copy otherwise. */
  messages: LlmMessage[];
  /** The estimate of the request sent; absent when the byte bound alone showed it fits (nothing counted). */
  estimatedTokens?: number;
  /** Estimated tokens of the whole conversation, before trimming (when it was counted). */
  conversationTokens?: number;
  elidedResults: number;
  /** Characters of the tool results elided. */
  elidedCharacters: number;
  droppedTurns: number;
  droppedMessages: number;
}

/**
 * What is sent to the model, within `budget` tokens. The conversation itself is never changed. When it
 * does not fit, in this order and only as far as needed:
 * 1. tool results of earlier turns are replaced by a marker the model can read, oldest first;
 * 2. earlier turns are left out, oldest first (a turn: a user message and all that follows it up to the
 *    next user message, so a tool call and its result always go together);
 * 3. tool results of the current turn's earlier steps are replaced by the marker, oldest first.
 * The pinned messages, the latest user message, every step of the current turn and the results of its
 * latest step are always sent; when they alone exceed the budget, 400 context_too_large.
 */
export async function fitToContext(
  request: ContextRequest,
  load: () => Promise<CountTokens> = loadTokenizer,
): Promise<FittedContext> {
  const { messages, tools, budget } = request;
  const untouched: FittedContext = {
    messages: messages as LlmMessage[],
    elidedResults: 0,
    elidedCharacters: 0,
    droppedTurns: 0,
    droppedMessages: 0,
  };
  // Most requests fit by bytes alone: no tokenizer is loaded or run for them.
  const bound = messages.reduce(
    (sum, message) => sum + messageCost(message).bytes,
    REPLY_PRIMING + (tools.length ? toolsCost(tools).bytes : 0),
  );
  if (bound <= budget) return untouched;

  const count = await load();
  const costs = messages.map((message) => tokensOf(message, count));
  const conversationTokens = costs.reduce((sum, cost) => sum + cost, REPLY_PRIMING + toolTokens(tools, count));
  if (conversationTokens <= budget) return { ...untouched, estimatedTokens: conversationTokens, conversationTokens };

  const pinned = Math.min(request.pinned, messages.length);
  const current = currentTurnStart(messages, pinned);
  const latestStep = latestStepStart(messages, current);
  const sent: Array<LlmMessage | undefined> = [...messages];
  const fitted: FittedContext = { ...untouched, conversationTokens };
  let total = conversationTokens;

  const elide = (index: number): void => {
    const message = messages[index];
    if (message.role !== 'tool' || typeof message.content !== 'string') return;
    const marker: LlmMessage = {
      role: 'tool',
      tool_call_id: message.tool_call_id,
      content: elisionMarker(message.content.length),
    };
    const saved = costs[index] - tokensOf(marker, count);
    if (saved <= 0) return;
    sent[index] = marker;
    costs[index] -= saved;
    total -= saved;
    fitted.elidedResults++;
    fitted.elidedCharacters += message.content.length;
  };

  for (let i = pinned; i < current && total > budget; i++) elide(i);
  for (let start = pinned; start < current && total > budget;) {
    let end = start + 1;
    while (end < current && messages[end].role !== 'user') end++;
    for (let i = start; i < end; i++) {
      // A result elided first and then left out with its turn counts as left out only.
      if (sent[i] !== messages[i]) {
        fitted.elidedResults--;
        fitted.elidedCharacters -= (messages[i].content as string).length;
      }
      total -= costs[i];
      sent[i] = undefined;
    }
    fitted.droppedTurns++;
    fitted.droppedMessages += end - start;
    start = end;
  }
  for (let i = current; i < latestStep && total > budget; i++) elide(i);

  if (total > budget) {
    throw new DomainError(
      'context_too_large',
      `The conversation does not fit the agent's context window: the system message, the tools, the latest user message and the current turn's steps alone take about ${total} tokens, more than its budget of ${budget} (model.contextTokens, or LLM_CONTEXT_TOKENS)`,
      { contextTokens: budget, estimatedTokens: total },
    );
  }
  fitted.messages = sent.filter((message): message is LlmMessage => message !== undefined);
  fitted.estimatedTokens = total;
  return fitted;
}

/**
 * Where the current turn starts: at the latest user message after the pinned ones (a conversation
 * without one is all current turn).
 */
function currentTurnStart(messages: readonly LlmMessage[], pinned: number): number {
  for (let i = messages.length - 1; i >= pinned; i--) if (messages[i].role === 'user') return i;
  return pinned;
}

/** Where the current turn's latest step starts: its last assistant message with tool calls (none: the end). */
function latestStepStart(messages: readonly LlmMessage[], current: number): number {
  for (let i = messages.length - 1; i > current; i--) {
    const message = messages[i];
    if (message.role === 'assistant' && message.tool_calls?.length) return i;
  }
  return messages.length;
}
