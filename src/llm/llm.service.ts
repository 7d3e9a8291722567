import { Inject, Injectable, Logger } from '@nestjs/common';
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
  private readonly logger = new Logger(LlmService.name);
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
      ...(request.tools?.length && request.toolChoice ? { tool_choice: request.toolChoice } : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...(request.maxTokens !== undefined ? { [this.config.llmMaxTokensParam]: request.maxTokens } : {}),
      ...(request.stop !== undefined ? { stop: request.stop } : {}),
      ...(request.user !== undefined ? { user: request.user } : {}),
    };
    try {
      const response = handlers
        ? await this.streamed(params, request.signal, handlers)
        : await this.single(params, request.signal);
      return wellFormedResponse(response);
    } catch (error) {
      const classified = classifyLlmError(error);
      if (classified.kind !== 'aborted') {
        // The provider's own words go to the operator's log only.
        this.logger.warn({
          msg: 'model call failed',
          code: classified.code,
          status: classified.status,
          upstream: classified.upstreamMessage,
        });
      }
      throw classified;
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
    // A surrogate pair split across two chunks must not turn into U+FFFD in the live text.
    let heldSurrogate = '';
    for await (const chunk of stream) {
      if (chunk.model) model = chunk.model;
      if (chunk.usage) usage = mapUsage(chunk.usage);
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const delta = choice.delta ?? {};
      if (delta.content) {
        content += delta.content;
        let text = heldSurrogate + delta.content;
        heldSurrogate = endsWithHighSurrogate(text) ? text.slice(-1) : '';
        if (heldSurrogate) text = text.slice(0, -1);
        if (text) handlers.onTextDelta?.(wellFormed(text));
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
    if (heldSurrogate) handlers.onTextDelta?.(wellFormed(heldSurrogate));
    return { model, content, toolCalls: [...calls.values()], finishReason, usage };
  }
}

/**
 * Model text as Postgres and JSON can carry it: NUL characters and unpaired UTF-16 surrogates
 * (which models do emit) become U+FFFD, so storing an answer can never fail on its characters.
 */
export function wellFormed(text: string): string {
  return text.toWellFormed().replaceAll('\u0000', '\uFFFD');
}

/**
 * JSON arguments can spell a NUL or a lone surrogate as an escape (`\\u0000`), which only appears
 * once parsed: such a text is parsed, cleaned key by key and written again. Text that is not JSON
 * (freeform input, a model's broken JSON) is cleaned as text.
 */
function wellFormedArguments(text: string): string {
  const cleaned = wellFormed(text);
  if (!/\\u/i.test(cleaned)) return cleaned;
  try {
    return JSON.stringify(wellFormedValue(JSON.parse(cleaned)));
  } catch {
    return cleaned;
  }
}

function wellFormedValue(value: unknown): unknown {
  if (typeof value === 'string') return wellFormed(value);
  if (Array.isArray(value)) return value.map(wellFormedValue);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [wellFormed(key), wellFormedValue(item)]));
  }
  return value;
}

function endsWithHighSurrogate(text: string): boolean {
  const last = text.charCodeAt(text.length - 1);
  return last >= 0xd800 && last <= 0xdbff;
}

function wellFormedResponse(response: LlmResponse): LlmResponse {
  return {
    ...response,
    content: wellFormed(response.content),
    toolCalls: response.toolCalls.map((call) => ({
      ...call,
      id: wellFormed(call.id),
      name: wellFormed(call.name),
      arguments: wellFormedArguments(call.arguments),
    })),
  };
}

function mapUsage(usage: OpenAI.CompletionUsage | null | undefined): LlmUsage {
  if (!usage) return ZERO_USAGE;
  return {
    promptTokens: usage.prompt_tokens ?? 0,
    completionTokens: usage.completion_tokens ?? 0,
    totalTokens: usage.total_tokens ?? (usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0),
  };
}
