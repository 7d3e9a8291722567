import type { ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { SseWriter } from '../common/sse.writer';
import type { ToolResult } from '../tools/tool.types';
import { chartSpecOf } from '../tools/chart-tools/visualize.tool';
import type { TurnHooks, TurnResult } from '../runtime/agent-loop.service';
import type { Grounding } from '../runtime/grounding';
import { chartPart, uiFinishReason } from './ui-messages';

/** The answer's grounding as a UI message stream data part (`data-grounding`), sent before `finish`. */
export function groundingPart(grounding: Grounding): Record<string, unknown> {
  return { type: 'data-grounding', data: grounding };
}

/** The response header by which AI SDK clients recognise a UI message stream. */
export const UI_MESSAGE_STREAM_HEADERS = { 'x-vercel-ai-ui-message-stream': 'v1' };

/**
 * Writes one agent turn as a Vercel AI SDK UI message stream (protocol v1, SSE), so `useChat`
 * clients render it unchanged: start, steps with text deltas and tool input/output parts, then
 * `finish` and `[DONE]`, or an `error` part and `[DONE]`. Never ends silently.
 */
export class UiMessageStreamWriter {
  private textId?: string;
  private stepOpen = false;
  private readonly sse: SseWriter;

  constructor(raw: ServerResponse, keepAliveMs: number) {
    this.sse = new SseWriter(raw, { keepAliveMs, headers: UI_MESSAGE_STREAM_HEADERS });
    this.write({ type: 'start', messageId: randomUUID() });
  }

  /** Loop hooks that translate its events into stream parts. */
  hooks(): TurnHooks {
    return {
      onStepStart: () => {
        this.write({ type: 'start-step' });
        this.stepOpen = true;
      },
      onTextDelta: (delta) => {
        if (!this.textId) {
          this.textId = randomUUID();
          this.write({ type: 'text-start', id: this.textId });
        }
        this.write({ type: 'text-delta', id: this.textId, delta });
      },
      onToolCall: (call) => {
        this.closeText();
        this.write({ type: 'tool-input-start', toolCallId: call.id, toolName: call.name });
        this.write({ type: 'tool-input-available', toolCallId: call.id, toolName: call.name, input: call.arguments });
      },
      onToolResult: (result: ToolResult) => {
        if (result.isError) {
          this.write({ type: 'tool-output-error', toolCallId: result.toolCallId, errorText: JSON.stringify(result.content) });
        } else {
          this.write({ type: 'tool-output-available', toolCallId: result.toolCallId, output: result.content });
          const spec = chartSpecOf(result.name, result.content);
          if (spec) this.write(chartPart(result.toolCallId, spec));
        }
      },
      onStep: () => {
        this.closeStep();
        return Promise.resolve();
      },
    };
  }

  finish(result: TurnResult): void {
    this.closeStep();
    if (result.grounding) this.write(groundingPart(result.grounding));
    this.write({
      type: 'finish',
      finishReason: uiFinishReason(result.finishReason),
      messageMetadata: {
        finishReason: result.finishReason,
        model: result.model,
        usage: result.usage,
        ...(result.grounding ? { grounding: result.grounding } : {}),
      },
    });
    this.end();
  }

  fail(errorText: string): void {
    this.closeStep();
    this.write({ type: 'error', errorText });
    this.end();
  }

  private closeText(): void {
    if (this.textId) this.write({ type: 'text-end', id: this.textId });
    this.textId = undefined;
  }

  private closeStep(): void {
    this.closeText();
    if (this.stepOpen) this.write({ type: 'finish-step' });
    this.stepOpen = false;
  }

  private write(part: Record<string, unknown>): void {
    this.sse.send(part);
  }

  private end(): void {
    this.sse.send('[DONE]');
    this.sse.close();
  }
}
