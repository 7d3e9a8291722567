import { Inject, Injectable } from '@nestjs/common';
import OpenAI from 'openai';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { classifyLlmError, LlmError } from './llm-error';
import { LlmRequest, LlmResponse, LlmStreamHandlers, LlmToolCall, LlmUsage, ZERO_USAGE } from './llm.types';

type ChatParams = Omit<OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming, 'stream'>;

/**
 * The one client of the OpenAI-compatible endpoint (OpenAI, Azure, Ollama, vLLM, ...). Calls are
 * non-streaming, or streaming when the caller wants live text; both return the same response.
 * Retries with backoff (rate limits, 5xx, connection errors) are the SDK's, bounded by config.
 */
@Injectable()
export class LlmService {
  private readonly client?: OpenAI;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {
    if (config.openaiApiKey || config.openaiBaseUrl) {
      this.client = new OpenAI({
        // Local endpoints (Ollama, LM Studio) need no key, but the SDK insists on one.
        apiKey: config.openaiApiKey ?? 'not-needed',
        baseURL: config.openaiBaseUrl,
        maxRetries: config.llmMaxRetries,
        timeout: config.llmTimeoutMs,
      });
    }
  }

  get isConfigured(): boolean {
    return this.client !== undefined;
  }

  get defaultModel(): string {
    return this.config.llmModel;
  }

  /** Throws 503 llm_not_configured when no endpoint is set. */
  assertConfigured(): void {
    if (!this.client) {
      throw new DomainError('llm_not_configured', 'No LLM endpoint is configured: set OPENAI_API_KEY and/or OPENAI_BASE_URL');
    }
  }

  async complete(request: LlmRequest, handlers?: LlmStreamHandlers): Promise<LlmResponse> {
    this.assertConfigured();
    const params: ChatParams = {
      model: request.model,
      messages: request.messages,
      ...(request.tools?.length ? { tools: request.tools } : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...(request.maxTokens !== undefined ? { [this.config.llmMaxTokensParam]: request.maxTokens } : {}),
      ...(request.stop !== undefined ? { stop: request.stop } : {}),
    };
    try {
      return handlers ? await this.streamed(params, request.signal, handlers) : await this.single(params, request.signal);
    } catch (error) {
      throw classifyLlmError(error);
    }
  }

  private async single(params: ChatParams, signal?: AbortSignal): Promise<LlmResponse> {
    const completion = await this.client!.chat.completions.create({ ...params, stream: false }, { signal });
    const choice = completion.choices?.[0];
    if (!choice) throw new LlmError('invalid_response', 'The model endpoint returned no choices', true);
    const toolCalls: LlmToolCall[] = (choice.message.tool_calls ?? []).map((call) =>
      call.type === 'custom'
        ? { id: call.id, name: call.custom.name, arguments: call.custom.input, kind: 'custom' }
        : { id: call.id, name: call.function.name, arguments: call.function.arguments ?? '', kind: 'function' },
    );
    return {
      model: completion.model ?? params.model,
      content: choice.message.content ?? '',
      toolCalls,
      finishReason: choice.finish_reason ?? 'stop',
      usage: mapUsage(completion.usage),
    };
  }

  private async streamed(params: ChatParams, signal: AbortSignal | undefined, handlers: LlmStreamHandlers): Promise<LlmResponse> {
    const stream = await this.client!.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    let model = params.model;
    let content = '';
    let finishReason = 'stop';
    let usage: LlmUsage = ZERO_USAGE;
    const calls = new Map<number, LlmToolCall>();
    for await (const chunk of stream) {
      if (chunk.model) model = chunk.model;
      if (chunk.usage) usage = mapUsage(chunk.usage);
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const delta = choice.delta ?? {};
      if (delta.content) {
        content += delta.content;
        handlers.onTextDelta?.(delta.content);
      }
      for (const part of delta.tool_calls ?? []) {
        // Function calls stream `function.{name,arguments}`; freeform (custom) calls stream `custom.{name,input}`.
        const custom = part.type === 'custom' || part.custom !== undefined;
        const name = custom ? part.custom?.name : part.function?.name;
        const fragment = custom ? part.custom?.input : part.function?.arguments;
        let call = calls.get(part.index);
        if (!call) {
          call = { id: part.id ?? `call_${part.index}`, name: name ?? '', arguments: '', kind: custom ? 'custom' : 'function' };
          calls.set(part.index, call);
          if (call.name) handlers.onToolCallStart?.({ id: call.id, name: call.name });
        } else if (name && !call.name) {
          call.name = name;
        }
        if (custom) call.kind = 'custom';
        if (part.id && call.id.startsWith('call_') && part.id !== call.id) call.id = part.id;
        if (fragment) call.arguments += fragment;
      }
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
    if (signal?.aborted) throw new LlmError('aborted', 'The model call was cancelled', false);
    return { model, content, toolCalls: [...calls.values()], finishReason, usage };
  }
}

function mapUsage(usage: OpenAI.CompletionUsage | null | undefined): LlmUsage {
  if (!usage) return ZERO_USAGE;
  return {
    promptTokens: usage.prompt_tokens ?? 0,
    completionTokens: usage.completion_tokens ?? 0,
    totalTokens: usage.total_tokens ?? (usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0),
  };
}
