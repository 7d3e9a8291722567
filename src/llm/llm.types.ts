import type OpenAI from 'openai';
import type { LlmError } from './llm-error';

export type LlmMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;
export type LlmTool = OpenAI.Chat.Completions.ChatCompletionTool;
/** `none`, `auto`, or one named tool the model must call. */
export type LlmToolChoice =
  | 'none'
  | 'auto'
  | OpenAI.Chat.Completions.ChatCompletionNamedToolChoice
  | OpenAI.Chat.Completions.ChatCompletionNamedToolChoiceCustom;

export interface LlmUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** One tool call the model made. `kind: 'custom'` calls carry raw text input in `arguments`. */
export interface LlmToolCall {
  id: string;
  name: string;
  arguments: string;
  kind: 'function' | 'custom';
}

export interface LlmRequest {
  model: string;
  messages: LlmMessage[];
  tools?: LlmTool[];
  /** Sent only with tools. */
  toolChoice?: LlmToolChoice;
  temperature?: number;
  maxTokens?: number;
  stop?: string | string[];
  /** The end user, for the provider's abuse monitoring (OpenAI's `user`). */
  user?: string;
  signal?: AbortSignal;
  /** The agent the call is made for: a label of the model-call metrics (agent names are bounded by admins). */
  agent?: string;
  /**
   * Told before each retry of this call, once the wait is known and before it starts. A stream that
   * already handed out text is retried only when this is set: the listener takes that text back
   * (a durable chat's `retry` event); without it such a failure ends the call.
   */
  onRetry?(retry: LlmRetry): Promise<void> | void;
}

/** A failed attempt of a model call that is about to be tried again. */
export interface LlmRetry {
  /** The attempt that failed: 1 for the first. */
  attempt: number;
  /** The wait before the next attempt: the provider's Retry-After (capped) or the backoff. */
  delayMs: number;
  error: LlmError;
}

export interface LlmResponse {
  model: string;
  content: string;
  toolCalls: LlmToolCall[];
  /** The endpoint's finish reason: stop, length, tool_calls, content_filter, ... */
  finishReason: string;
  usage: LlmUsage;
}

/** Live events while a response streams in. */
export interface LlmStreamHandlers {
  onTextDelta?(delta: string): void;
  onToolCallStart?(call: { id: string; name: string }): void;
}

export const ZERO_USAGE: LlmUsage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };

export function addUsage(a: LlmUsage, b: LlmUsage): LlmUsage {
  return {
    promptTokens: a.promptTokens + b.promptTokens,
    completionTokens: a.completionTokens + b.completionTokens,
    totalTokens: a.totalTokens + b.totalTokens,
  };
}
