import { Inject, Injectable, Logger } from '@nestjs/common';
import OpenAI from 'openai';
import { DomainError } from '../common/domain-error';
import { Semaphore } from '../common/semaphore';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { PrometheusService } from '../observability/prometheus.service';
import { classifyLlmError, LlmError } from './llm-error';
import { LlmRequest, LlmResponse, LlmStreamHandlers, LlmToolCall, LlmUsage, ZERO_USAGE } from './llm.types';

type ChatParams = Omit<OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming, 'stream'>;

/** Backoff between attempts without a Retry-After: 0.5 s, 1 s, 2 s, ... up to 8 s, less up to a quarter (jitter). */
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 8_000;

/**
 * The one client of the OpenAI-compatible endpoint (OpenAI, Azure, Ollama, vLLM, ...). Calls are
 * non-streaming, or streaming when the caller wants live text; both return the same response.
 *
 * Retries are ours, not the SDK's (its own are off), so that every attempt is seen: a retryable
 * failure (rate limit, 5xx, connection error, timeout) is tried again up to LLM_MAX_RETRIES times,
 * after the provider's Retry-After (at most LLM_RETRY_AFTER_MAX_MS) or an exponential backoff, and
 * the caller is told before each wait (`onRetry`). A stream is watched chunk by chunk: nothing for
 * LLM_FIRST_CHUNK_TIMEOUT_MS after the request, or a silence of LLM_STALL_TIMEOUT_MS between chunks,
 * aborts the request (its connection is closed) and counts as a timeout. A non-streamed answer's
 * first byte is its last, so it keeps LLM_TIMEOUT_MS, the SDK's deadline for the whole response: the
 * first-chunk limit would cut long answers that a stream delivers fine.
 *
 * At most LLM_MAX_CONCURRENCY attempts are on the wire at once, whichever front door sends them
 * (durable chats, stateless chats, /v1, MCP): the others queue for a slot in arrival order, which a
 * cancelled caller leaves at once. A slot is held for one attempt, never across a backoff.
 */
@Injectable()
export class LlmService {
  private readonly logger = new Logger(LlmService.name);
  private readonly client?: OpenAI;
  private readonly slots: Semaphore;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly metrics: PrometheusService,
  ) {
    this.slots = new Semaphore(config.llmMaxConcurrency);
    if (config.openaiApiKey || config.openaiBaseUrl) {
      this.client = new OpenAI({
        // Local endpoints (Ollama, LM Studio) need no key, but the SDK insists on one.
        apiKey: config.openaiApiKey ?? 'not-needed',
        baseURL: config.openaiBaseUrl,
        maxRetries: 0,
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
    const done = this.metrics.modelCallStarted();
    try {
      for (let attempt = 1; ; attempt++) {
        const output = { sent: false };
        const release = await this.waitForSlot(request.signal);
        const started = performance.now();
        try {
          const response = await (
            handlers ? this.streamed(params, request.signal, watchOutput(handlers, output)) : this.single(params, request.signal)
          ).finally(release);
          this.observe(request, 'ok', started, response.usage);
          return wellFormedResponse(response);
        } catch (error) {
          const failure = classifyLlmError(error);
          this.observe(request, failure.code, started);
          const delayMs = this.retryDelay(failure, attempt, output.sent, request);
          if (failure.kind !== 'aborted') {
            // The provider's own words go to the operator's log only.
            this.logger.warn({
              msg: 'model call failed',
              code: failure.code,
              status: failure.status,
              upstream: failure.upstreamMessage,
              attempt,
              retryInMs: delayMs ?? null,
            });
          }
          if (delayMs === undefined) throw failure;
          await request.onRetry?.({ attempt, delayMs, error: failure });
          await waitBeforeRetry(delayMs, request.signal);
        }
      }
    } finally {
      done();
    }
  }

  /** A slot for one attempt; the wait shows in the queued-calls gauge and ends at once when the caller cancels. */
  private async waitForSlot(signal: AbortSignal | undefined): Promise<() => void> {
    const queued = this.metrics.modelCallQueued();
    try {
      return await this.slots.acquire(signal, () => new LlmError('aborted', 'The model call was cancelled', false));
    } finally {
      queued();
    }
  }

  /** How long to wait before trying again, or undefined when the call must not be retried. */
  private retryDelay(failure: LlmError, attempt: number, outputSent: boolean, request: LlmRequest): number | undefined {
    if (attempt > this.config.llmMaxRetries || request.signal?.aborted) return undefined;
    // Text already shown can only be replaced by a caller that knows how to take it back.
    if (outputSent && !request.onRetry) return undefined;
    if (!(failure.hints.shouldRetry ?? failure.retryable)) return undefined;
    return failure.retryAfterMs(this.config.llmRetryAfterMaxMs) ?? backoffMs(attempt);
  }

  private observe(request: LlmRequest, outcome: string, started: number, usage?: LlmUsage): void {
    this.metrics.observeModelCall({
      agent: request.agent,
      model: request.model,
      outcome,
      seconds: (performance.now() - started) / 1000,
      usage,
    });
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
    const watchdog = new StreamWatchdog(signal, this.config.llmFirstChunkTimeoutMs, this.config.llmStallTimeoutMs);
    try {
      return await this.readStream(params, watchdog, handlers);
    } catch (error) {
      throw watchdog.timeout() ?? error;
    } finally {
      watchdog.stop();
    }
  }

  private async readStream(params: ChatParams, watchdog: StreamWatchdog, handlers: LlmStreamHandlers): Promise<LlmResponse> {
    const stream = await this.client!.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      { signal: watchdog.signal },
    );
    let model = params.model;
    let content = '';
    let finishReason = 'stop';
    let usage: LlmUsage = ZERO_USAGE;
    const calls = new Map<number, LlmToolCall>();
    // A surrogate pair split across two chunks must not turn into U+FFFD in the live text.
    let heldSurrogate = '';
    for await (const chunk of stream) {
      watchdog.chunk();
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
    // An aborted stream (the watchdog's or the caller's) ends its iteration quietly.
    const timedOut = watchdog.timeout();
    if (timedOut) throw timedOut;
    if (watchdog.signal.aborted) throw new LlmError('aborted', 'The model call was cancelled', false);
    if (heldSurrogate) handlers.onTextDelta?.(wellFormed(heldSurrogate));
    return { model, content, toolCalls: [...calls.values()], finishReason, usage };
  }
}

/**
 * Aborts a streamed call that goes silent: no chunk within `firstChunkMs` of the request (response
 * headers do not count), or none within `stallMs` of the previous one. Its signal also follows the
 * caller's, so one signal cancels the request either way; `timeout()` tells the two apart.
 */
class StreamWatchdog {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout;
  private fired?: LlmError;
  private receiving = false;
  private readonly onCallerAbort = () => this.controller.abort();

  constructor(
    private readonly caller: AbortSignal | undefined,
    private readonly firstChunkMs: number,
    private readonly stallMs: number,
  ) {
    this.timer = setTimeout(
      () => this.fire(`The model endpoint sent nothing within ${seconds(firstChunkMs)} of the request`),
      firstChunkMs,
    );
    if (caller?.aborted) this.controller.abort();
    else caller?.addEventListener('abort', this.onCallerAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** A chunk arrived: the stall limit starts again. */
  chunk(): void {
    if (this.receiving) {
      // Re-arms the same timer: no allocation per chunk.
      this.timer.refresh();
      return;
    }
    this.receiving = true;
    clearTimeout(this.timer);
    this.timer = setTimeout(
      () => this.fire(`The model endpoint stopped sending for ${seconds(this.stallMs)} in the middle of its answer`),
      this.stallMs,
    );
  }

  /** The timeout error when the watchdog aborted the call. */
  timeout(): LlmError | undefined {
    return this.fired;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.caller?.removeEventListener('abort', this.onCallerAbort);
  }

  private fire(message: string): void {
    if (this.controller.signal.aborted) return;
    this.fired = new LlmError('timeout', message, true);
    this.controller.abort();
  }
}

/** Handlers that note whether any output reached the caller (then only a caller with onRetry may see a retry). */
function watchOutput(handlers: LlmStreamHandlers, output: { sent: boolean }): LlmStreamHandlers {
  return {
    onTextDelta: (delta) => {
      output.sent = true;
      handlers.onTextDelta?.(delta);
    },
    onToolCallStart: (call) => {
      output.sent = true;
      handlers.onToolCallStart?.(call);
    },
  };
}

/** The SDK's schedule: 0.5 s doubling per attempt up to 8 s, less a random quarter so that clients spread out. */
function backoffMs(attempt: number): number {
  const base = Math.min(BACKOFF_BASE_MS * 2 ** (attempt - 1), BACKOFF_MAX_MS);
  return Math.round(base * (1 - Math.random() * 0.25));
}

/** Sleeps `ms`; a cancelled call stops waiting at once. */
function waitBeforeRetry(ms: number, signal: AbortSignal | undefined): Promise<void> {
  const cancelled = () => new LlmError('aborted', 'The model call was cancelled', false);
  if (signal?.aborted) return Promise.reject(cancelled());
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelled());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
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
