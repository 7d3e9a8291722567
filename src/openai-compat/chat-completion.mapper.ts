import type { TurnResult, TurnStep } from '../runtime/agent-loop.service';
import { approvalCallsOf } from './approval-calls';
import type { ChatCompletionResponse, CompletionChoice, CompletionToolCall, CompletionUsage } from './openai-compat.dto';

/** What every chunk and the whole completion of one request share. */
export interface CompletionHead {
  id: string;
  created: number;
  /** The agent name the client asked for. */
  model: string;
}

/** Steps of one turn are separated by a blank line in the answer, streamed or not. */
export const STEP_SEPARATOR = '\n\n';

/** The text of a step, or '' (a step with tool calls only). */
export function stepText(step: TurnStep): string {
  return typeof step.assistant.content === 'string' ? step.assistant.content : '';
}

/** A paused turn asks the client to run its tools or answer write proposals; an agent's own limits end a turn like a stop. */
export function finishReasonOf(result: TurnResult): CompletionChoice['finish_reason'] {
  if (result.status === 'requires_action' || result.status === 'requires_approval') return 'tool_calls';
  return result.finishReason === 'length' ? 'length' : 'stop';
}

/** The client tool calls or the write proposals (approve_write calls) a paused turn waits for, as OpenAI returns tool calls. */
export function toolCallsOf(result: TurnResult): CompletionToolCall[] {
  const clientCalls = result.pendingToolCalls.map((call): CompletionToolCall => ({
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: call.arguments },
  }));
  return [...clientCalls, ...approvalCallsOf(result)];
}

/** Every model call of the turn: the built-in tool rounds show up here only. */
export function usageOf(result: TurnResult): CompletionUsage {
  return {
    prompt_tokens: result.usage.promptTokens,
    completion_tokens: result.usage.completionTokens,
    total_tokens: result.usage.totalTokens,
  };
}

export function toCompletion(head: CompletionHead, content: string, result: TurnResult): ChatCompletionResponse {
  const toolCalls = toolCallsOf(result);
  return {
    id: head.id,
    object: 'chat.completion',
    created: head.created,
    model: head.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: content || (toolCalls.length ? null : ''),
          refusal: null,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        logprobs: null,
        finish_reason: finishReasonOf(result),
      },
    ],
    usage: usageOf(result),
    ...(result.grounding ? { grounding: result.grounding } : {}),
  };
}
