import type { ServerResponse } from 'node:http';
import { SseWriter } from '../common/sse.writer';
import type { TurnHooks, TurnResult } from '../runtime/agent-loop.service';
import { CompletionHead, finishReasonOf, STEP_SEPARATOR, toolCallsOf, usageOf } from './chat-completion.mapper';
import type { OpenAiErrorBody } from './openai-errors';

/**
 * Writes one agent turn as OpenAI's `chat.completion.chunk` stream: the role, content deltas as the
 * model writes them (steps separated by a blank line), the client tool calls of a paused turn, a last
 * chunk with `finish_reason`, the usage when asked, then `[DONE]`; or an `error` event. Built-in tool
 * rounds are not shown: they run on the server.
 */
export class ChatCompletionStreamWriter {
  private readonly sse: SseWriter;
  private wroteText = false;
  private separate = false;

  constructor(
    raw: ServerResponse,
    keepAliveMs: number,
    private readonly head: CompletionHead,
    private readonly includeUsage: boolean,
  ) {
    this.sse = new SseWriter(raw, { keepAliveMs });
    this.chunk({ role: 'assistant', content: '', refusal: null });
  }

  hooks(): TurnHooks {
    return {
      onStepStart: () => {
        if (this.wroteText) this.separate = true;
      },
      onTextDelta: (delta) => {
        this.chunk({ content: this.separate ? STEP_SEPARATOR + delta : delta });
        this.separate = false;
        this.wroteText = true;
      },
    };
  }

  finish(result: TurnResult): void {
    const toolCalls = toolCallsOf(result);
    if (toolCalls.length) this.chunk({ tool_calls: toolCalls.map((call, index) => ({ index, ...call })) });
    this.chunk({}, finishReasonOf(result), result.grounding ? { grounding: result.grounding } : {});
    if (this.includeUsage) this.sse.send({ ...this.base(), choices: [], usage: usageOf(result) });
    this.sse.send('[DONE]');
    this.sse.close();
  }

  /** After the first byte a failure can only be told in the stream: OpenAI's error event, which SDKs raise. */
  fail(error: OpenAiErrorBody): void {
    this.sse.send(error);
    this.sse.close();
  }

  private base() {
    return { id: this.head.id, object: 'chat.completion.chunk', created: this.head.created, model: this.head.model };
  }

  private chunk(delta: Record<string, unknown>, finishReason: string | null = null, extra: Record<string, unknown> = {}): void {
    this.sse.send({
      ...this.base(),
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      // As OpenAI does: with include_usage every chunk carries `usage: null`, and the last one the totals.
      ...(this.includeUsage ? { usage: null } : {}),
      ...extra,
    });
  }
}
