/**
 * A scripted, in-process imitation of an OpenAI-compatible Chat Completions server.
 *
 * Tests and benchmarks point the real `openai` SDK at {@link MockLlmServer.url} so the whole
 * client stack (HTTP, SSE parsing, retries, error mapping, stream helpers) runs for real,
 * while the "model" answers with steps queued by the test via {@link MockLlmServer.enqueue}.
 *
 * Only Node built-ins are used so the mock cannot drift with, or depend on, any SDK version.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// ---------------------------------------------------------------------------------------------
// Public types: recorded requests
// ---------------------------------------------------------------------------------------------

/** The subset of a Chat Completions request body the mock interprets; everything else is kept as-is. */
export interface ChatRequestBody {
  model?: string;
  messages?: unknown[];
  tools?: unknown[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  [key: string]: unknown;
}

/** One HTTP request as received by the mock, recorded in arrival order. */
export interface RecordedRequest {
  /** 0-based position in {@link MockLlmServer.requests}. */
  index: number;
  method: string;
  /** Request path without the query string, e.g. `/v1/chat/completions`. */
  path: string;
  /** Headers with lower-cased names; repeated headers are joined with `, `. */
  headers: Record<string, string>;
  /** Parsed JSON body, or `undefined` when the body was empty or not valid JSON. */
  body: ChatRequestBody | undefined;
  /** The body exactly as received, for asserting on serialisation details. */
  rawBody: string;
  /** `Date.now()` when the request body had been fully received. */
  receivedAt: number;
  /** Set to `true` if the client closed the connection before the mock finished answering. */
  aborted: boolean;
}

// ---------------------------------------------------------------------------------------------
// Public types: script steps
// ---------------------------------------------------------------------------------------------

/** `finish_reason` values the mock can report. */
export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

/** Token usage to report; `total_tokens` defaults to the sum of the other two. */
export interface MockUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

/** Options understood by every step kind. */
export interface StepOptions {
  /** Wait this long before sending anything (response headers included). */
  delayMs?: number;
  /** Streaming only: wait this long between consecutive SSE chunks. */
  chunkDelayMs?: number;
  /**
   * Never answer: the request stays open until the client aborts it or the server closes.
   * Use it to test client-side timeouts and AbortSignal handling.
   */
  hang?: boolean;
  /**
   * Send the response headers and this many SSE chunks, then go silent with the connection open
   * until the client aborts it or the server closes: `0` is "headers, then nothing". Use it to test
   * first-chunk and stall timeouts. A non-streaming request gets its headers and no body.
   */
  stallAfterChunks?: number;
  /** Extra response headers (e.g. `retry-after`, `x-should-retry`). */
  headers?: Record<string, string>;
}

/** The assistant answers with plain text. */
export interface TextStep extends StepOptions {
  kind: 'text';
  /**
   * The assistant text. When streaming, a string is split into word-sized deltas; pass an
   * array to choose the exact deltas yourself (they are joined for non-streaming requests).
   */
  content: string | string[];
  /** Defaults to `'stop'`. */
  finishReason?: FinishReason;
  /** Defaults to deterministic numbers derived from the request and reply sizes. */
  usage?: MockUsage;
}

/** One function tool call requested by the assistant. */
export interface MockToolCall {
  /** Defaults to a deterministic `call_mock_<request>_<position>`. */
  id?: string;
  name: string;
  /**
   * An object is JSON-encoded by the server; a string is sent verbatim, which lets tests
   * feed the application malformed JSON arguments.
   */
  arguments: Record<string, unknown> | unknown[] | string;
  /** `custom`: a freeform tool call; `arguments` (a string) is sent as `custom.input`. Default `function`. */
  type?: 'function' | 'custom';
}

/** The assistant calls one or more tools (optionally with some text alongside). */
export interface ToolCallsStep extends StepOptions {
  kind: 'toolCalls';
  toolCalls: MockToolCall[];
  /** Optional assistant text sent before the tool calls. */
  content?: string;
  /** Defaults to `'tool_calls'`. */
  finishReason?: FinishReason;
  usage?: MockUsage;
}

/** The server answers with a non-2xx status and an OpenAI-style error body. */
export interface HttpErrorStep extends StepOptions {
  kind: 'httpError';
  status: number;
  /** Defaults to a generic message mentioning the status. */
  message?: string;
  /** Defaults by status: `rate_limit_error` (429), `server_error` (5xx), else `invalid_request_error`. */
  type?: string;
  code?: string | null;
  param?: string | null;
  /** Replaces the whole JSON body, for testing non-OpenAI error shapes. */
  body?: unknown;
}

/**
 * The stream fails part-way. For streaming requests, `content` is streamed first and then:
 * - `'disconnect'` (default): the socket is destroyed without `[DONE]`, like a dropped connection;
 * - `'errorEvent'`: an SSE `data: {"error": ...}` payload is sent and the response ends.
 *
 * For non-streaming requests the connection is dropped before any response is sent.
 */
export interface StreamErrorStep extends StepOptions {
  kind: 'streamError';
  /** Text streamed (split into word deltas) before the failure. Defaults to none. */
  content?: string;
  mode?: 'disconnect' | 'errorEvent';
  /** Payload for `'errorEvent'` mode. */
  error?: { message?: string; type?: string; code?: string | null };
}

/** A fixed reply; `kind` discriminates the variants. */
export type MockStep = TextStep | ToolCallsStep | HttpErrorStep | StreamErrorStep;

/**
 * Computes the reply from the received request, e.g. to echo tool results or branch on the
 * prompt. Thrown errors are reported to the client as an HTTP 500.
 */
export type DynamicStep = (request: RecordedRequest) => MockStep | Promise<MockStep>;

/** Anything that can be queued with {@link MockLlmServer.enqueue}. */
export type ScriptStep = MockStep | DynamicStep;

/** Small constructors for the common steps, so scripts read as a conversation. */
export const MockReply = {
  text(content: string | string[], options: Omit<TextStep, 'kind' | 'content'> = {}): TextStep {
    return { kind: 'text', content, ...options };
  },
  toolCalls(toolCalls: MockToolCall[], options: Omit<ToolCallsStep, 'kind' | 'toolCalls'> = {}): ToolCallsStep {
    return { kind: 'toolCalls', toolCalls, ...options };
  },
  toolCall(
    name: string,
    args: MockToolCall['arguments'],
    options: Omit<ToolCallsStep, 'kind' | 'toolCalls'> = {},
  ): ToolCallsStep {
    return { kind: 'toolCalls', toolCalls: [{ name, arguments: args }], ...options };
  },
  httpError(status: number, options: Omit<HttpErrorStep, 'kind' | 'status'> = {}): HttpErrorStep {
    return { kind: 'httpError', status, ...options };
  },
  streamError(options: Omit<StreamErrorStep, 'kind'> = {}): StreamErrorStep {
    return { kind: 'streamError', ...options };
  },
  /** A request that is never answered. */
  hang(): TextStep {
    return { kind: 'text', content: '', hang: true };
  },
  /** Response headers, then silence with the connection open (a model stuck before its first token). */
  headersThenHang(): TextStep {
    return { kind: 'text', content: '', stallAfterChunks: 0 };
  },
  /** `chunks` SSE chunks of `content` (the role chunk counts as the first), then silence with the connection open (a shorter answer just completes). */
  stall(chunks: number, content = 'This answer stops midway'): TextStep {
    return { kind: 'text', content, stallAfterChunks: chunks };
  },
} as const;

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

const CHAT_COMPLETIONS_PATH = '/v1/chat/completions';
/** Tool-call arguments are streamed in fragments of this many characters, like a model emitting tokens. */
const ARGUMENT_FRAGMENT_CHARS = 8;

/** Per-request bookkeeping shared by the response writers. */
interface Exchange {
  record: RecordedRequest;
  res: ServerResponse;
  /** Aborted when the connection closes for any reason, so pending delays stop early. */
  signal: AbortSignal;
  completionId: string;
  model: string;
}

/** Scripted OpenAI-compatible Chat Completions server for tests. See the module comment. */
export class MockLlmServer {
  private readonly queue: ScriptStep[] = [];
  private readonly recorded: RecordedRequest[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly waiters: Array<{ count: number; resolve: () => void }> = [];
  private completionCounter = 0;
  private abortedCount = 0;
  private closed = false;
  /** Requests received, recorded or not. */
  private received = 0;
  /** What answers once the script is used up (benchmarks); none: such a request fails. */
  private fallback?: ScriptStep;

  private constructor(
    private readonly server: Server,
    private readonly port: number,
    /** Keep every request in `requests`; a benchmark of many calls turns it off and keeps only the count. */
    private readonly keepRequests: boolean,
  ) {}

  /** Starts a server on a random free port of 127.0.0.1. */
  /** Listens on 127.0.0.1, on `options.port` or a random free port (the default, for tests). */
  static async start(options: { port?: number; keepRequests?: boolean } = {}): Promise<MockLlmServer> {
    // The handler needs the instance and the instance needs the listening port, hence the holder.
    const holder: { instance?: MockLlmServer } = {};
    const server = createServer((req, res) => {
      holder.instance?.handle(req, res);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    const instance = new MockLlmServer(server, (server.address() as AddressInfo).port, options.keepRequests ?? true);
    holder.instance = instance;
    server.on('connection', (socket) => {
      instance.sockets.add(socket);
      // Without this, small SSE writes may be coalesced by Nagle and arrive as one read.
      socket.setNoDelay(true);
      socket.once('close', () => instance.sockets.delete(socket));
    });
    return instance;
  }

  /** Base URL for the SDK's `baseURL` option, e.g. `http://127.0.0.1:41234/v1`. */
  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Every request received so far, in arrival order (including 404s and unscripted calls). */
  get requests(): readonly RecordedRequest[] {
    return this.recorded;
  }

  /** Number of scripted steps not consumed yet; assert `0` to check the script was fully used. */
  get pendingSteps(): number {
    return this.queue.length;
  }

  /** Number of requests whose connection the client closed before the mock finished answering. */
  get abortedRequests(): number {
    return this.abortedCount;
  }

  /** Appends steps to the script; each chat completion request consumes the oldest one. */
  enqueue(...steps: ScriptStep[]): this {
    this.queue.push(...steps);
    return this;
  }

  /** Requests received so far, also when they are not kept. */
  get requestCount(): number {
    return this.received;
  }

  /** Answers every request that finds the script used up with `step` (a benchmark's endless model). */
  always(step: ScriptStep | undefined): this {
    this.fallback = step;
    return this;
  }

  /** The most recent request, or `undefined` if none was received. */
  lastRequest(): RecordedRequest | undefined {
    return this.recorded.at(-1);
  }

  /** Resolves once at least `count` requests have been received, e.g. to abort a hung call at the right time. */
  waitForRequests(count = 1, timeoutMs = 5_000): Promise<void> {
    if (this.received >= count) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`MockLlmServer: expected ${count} request(s) within ${timeoutMs} ms, got ${this.received}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Clears the script, the recorded requests and the counters (the server keeps listening). */
  reset(): void {
    this.queue.length = 0;
    this.recorded.length = 0;
    this.received = 0;
    this.fallback = undefined;
    this.completionCounter = 0;
    this.abortedCount = 0;
  }

  /** Stops listening and destroys every open connection, hung ones included, so Jest can exit. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.server.closeAllConnections();
    await closing;
  }

  // -------------------------------------------------------------------------------------------
  // Request handling
  // -------------------------------------------------------------------------------------------

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const record = this.record(req, rawBody);
      const controller = new AbortController();
      res.on('close', () => {
        // `close` before the response finished means the client went away, unless the mock
        // dropped the connection itself (stream error step, or close()).
        if (!res.writableFinished && !destroyedByMock.has(res) && !this.closed) {
          record.aborted = true;
          this.abortedCount += 1;
        }
        controller.abort();
      });
      this.respond(record, res, controller.signal).catch((error: unknown) => {
        // A bug in a dynamic step or in the mock itself must surface in the test, not hang it.
        const message = error instanceof Error ? error.message : String(error);
        if (!res.headersSent && !res.destroyed) {
          sendJson(res, 500, errorBody(`MockLlmServer internal error: ${message}`, 'mock_server_error', null));
        } else {
          res.destroy();
        }
      });
    });
  }

  private record(req: IncomingMessage, rawBody: string): RecordedRequest {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
    }
    let body: ChatRequestBody | undefined;
    try {
      const parsed: unknown = rawBody ? JSON.parse(rawBody) : undefined;
      body = isPlainObject(parsed) ? parsed : undefined;
    } catch {
      body = undefined;
    }
    const record: RecordedRequest = {
      index: this.received,
      method: req.method ?? 'GET',
      path: (req.url ?? '/').split('?')[0],
      headers,
      body,
      rawBody,
      receivedAt: Date.now(),
      aborted: false,
    };
    this.received += 1;
    if (this.keepRequests) this.recorded.push(record);
    for (const waiter of [...this.waiters]) {
      if (this.received >= waiter.count) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
    return record;
  }

  private async respond(record: RecordedRequest, res: ServerResponse, signal: AbortSignal): Promise<void> {
    if (record.method !== 'POST' || record.path !== CHAT_COMPLETIONS_PATH) {
      sendJson(
        res,
        404,
        errorBody(`MockLlmServer: no route for ${record.method} ${record.path}`, 'invalid_request_error', 'not_found'),
      );
      return;
    }
    if (!record.body) {
      // Not a script step: a malformed body is a client bug the test should see immediately.
      sendJson(res, 400, errorBody('MockLlmServer: request body is not a JSON object', 'invalid_request_error', null));
      return;
    }

    const next = this.queue.shift() ?? this.fallback;
    if (next === undefined) {
      sendJson(
        res,
        500,
        errorBody(
          `MockLlmServer script exhausted: request #${record.index + 1} to ${record.path} has no scripted step left ` +
            `(all enqueued steps were already consumed). Enqueue more steps or fix the extra model call.`,
          'mock_script_exhausted',
          'mock_script_exhausted',
        ),
        // The SDK retries 5xx by default; retrying cannot help here and would hide the call count.
        { 'x-should-retry': 'false' },
      );
      return;
    }
    const step = typeof next === 'function' ? await next(record) : next;

    this.completionCounter += 1;
    const exchange: Exchange = {
      record,
      res,
      signal,
      completionId: `chatcmpl-mock-${this.completionCounter}`,
      model: typeof record.body.model === 'string' ? record.body.model : 'mock-model',
    };

    if (step.hang) {
      await untilAborted(signal);
      return;
    }
    if (!(await sleep(step.delayMs, signal))) return;

    const streaming = record.body.stream === true;
    switch (step.kind) {
      case 'httpError':
        sendJson(
          res,
          step.status,
          step.body ??
            errorBody(
              step.message ?? `Mock HTTP ${step.status} error`,
              step.type ?? defaultErrorType(step.status),
              step.code ?? null,
              step.param ?? null,
            ),
          {
            ...requestIdHeader(exchange),
            ...step.headers,
          },
        );
        return;
      case 'streamError':
        if (!streaming) {
          markDestroyed(res);
          res.destroy();
          return;
        }
        await this.streamFailure(exchange, step);
        return;
      case 'text':
      case 'toolCalls':
        if (streaming) await this.streamReply(exchange, step);
        else if (step.stallAfterChunks !== undefined) await this.stallBeforeBody(exchange, step);
        else this.sendCompletion(exchange, step);
        return;
      default:
        assertNever(step);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Non-streaming replies
  // -------------------------------------------------------------------------------------------

  private sendCompletion(exchange: Exchange, step: TextStep | ToolCallsStep): void {
    const content = step.kind === 'text' ? joinContent(step.content) : (step.content ?? null);
    const toolCalls = step.kind === 'toolCalls' ? this.normaliseToolCalls(exchange, step.toolCalls) : undefined;
    const message: Record<string, unknown> = { role: 'assistant', content, refusal: null, annotations: [] };
    if (toolCalls) {
      message.tool_calls = toolCalls.map((call) =>
        call.type === 'custom'
          ? { id: call.id, type: 'custom', custom: { name: call.name, input: call.arguments } }
          : { id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } },
      );
    }
    sendJson(
      exchange.res,
      200,
      {
        id: exchange.completionId,
        object: 'chat.completion',
        created: nowSeconds(),
        model: exchange.model,
        system_fingerprint: 'fp_mock',
        choices: [{ index: 0, message, logprobs: null, finish_reason: finishReasonOf(step) }],
        usage: usageOf(exchange, step),
      },
      { ...requestIdHeader(exchange), ...step.headers },
    );
  }

  /** A non-streaming answer that never comes: the headers of a 200, then silence. */
  private async stallBeforeBody(exchange: Exchange, step: StepOptions): Promise<void> {
    exchange.res.writeHead(200, { 'content-type': 'application/json', ...requestIdHeader(exchange), ...step.headers });
    exchange.res.flushHeaders();
    await untilAborted(exchange.signal);
  }

  // -------------------------------------------------------------------------------------------
  // Streaming replies
  // -------------------------------------------------------------------------------------------

  private async streamReply(exchange: Exchange, step: TextStep | ToolCallsStep): Promise<void> {
    const writer = this.openStream(exchange, step);
    const textDeltas = step.kind === 'text' ? splitContent(step.content) : splitContent(step.content ?? '');

    // OpenAI opens every choice with the role; content is '' for text and null for pure tool calls.
    const opensWithText = step.kind === 'text' || textDeltas.length > 0;
    if (!(await writer.delta({ role: 'assistant', content: opensWithText ? '' : null, refusal: null }))) return;
    for (const text of textDeltas) {
      if (!(await writer.delta({ content: text }))) return;
    }

    if (step.kind === 'toolCalls') {
      const calls = this.normaliseToolCalls(exchange, step.toolCalls);
      for (const [index, call] of calls.entries()) {
        const fragments = splitFragments(call.arguments, ARGUMENT_FRAGMENT_CHARS);
        // First delta of a call carries its identity, later ones only argument fragments,
        // which is what the SDK's accumulator expects.
        const custom = call.type === 'custom';
        const opening = custom
          ? { index, id: call.id, type: 'custom', custom: { name: call.name, input: '' } }
          : { index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } };
        if (!(await writer.delta({ tool_calls: [opening] }))) return;
        for (const fragment of fragments) {
          const part = custom ? { index, custom: { input: fragment } } : { index, function: { arguments: fragment } };
          if (!(await writer.delta({ tool_calls: [part] }))) return;
        }
      }
    }

    if (!(await writer.delta({}, finishReasonOf(step)))) return;
    if (writer.includeUsage && !(await writer.usage(usageOf(exchange, step)))) return;
    writer.done();
  }

  private async streamFailure(exchange: Exchange, step: StreamErrorStep): Promise<void> {
    const writer = this.openStream(exchange, step);
    if (!(await writer.delta({ role: 'assistant', content: '', refusal: null }))) return;
    for (const text of splitContent(step.content ?? '')) {
      if (!(await writer.delta({ content: text }))) return;
    }
    if (step.mode === 'errorEvent') {
      const error = step.error ?? {};
      if (
        !(await writer.raw(errorBody(error.message ?? 'Mock mid-stream error', error.type ?? 'server_error', error.code ?? null)))
      )
        return;
      exchange.res.end();
      return;
    }
    // Give the already-written chunks a chance to leave the socket before it is torn down,
    // otherwise the client may see a bare connection reset with no data at all.
    await sleep(20, exchange.signal);
    markDestroyed(exchange.res);
    exchange.res.destroy();
  }

  /** Writes SSE headers and returns helpers that emit chunks, honouring per-chunk delays and aborts. */
  private openStream(exchange: Exchange, step: StepOptions) {
    const { res, signal, completionId, model } = exchange;
    const includeUsage = exchange.record.body?.stream_options?.include_usage === true;
    const created = nowSeconds();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...requestIdHeader(exchange),
      ...step.headers,
    });
    res.flushHeaders();

    let first = true;
    let written = 0;
    const base = () => ({ id: completionId, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_mock' });
    const write = async (payload: unknown): Promise<boolean> => {
      if (step.stallAfterChunks !== undefined && written >= step.stallAfterChunks) {
        // Stalled: nothing more, the connection stays open until the client gives up.
        await untilAborted(signal);
        return false;
      }
      if (!first && !(await sleep(step.chunkDelayMs, signal))) return false;
      first = false;
      written += 1;
      if (signal.aborted || res.destroyed || res.writableEnded) return false;
      res.write(`data: ${JSON.stringify(payload)}\n\n`);
      return true;
    };
    return {
      includeUsage,
      /** One `choices[0]` delta; OpenAI sends `usage: null` on content chunks when usage is requested. */
      delta: (delta: Record<string, unknown>, finishReason: FinishReason | null = null) =>
        write({
          ...base(),
          choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
          ...(includeUsage ? { usage: null } : {}),
        }),
      /** The trailing usage-only chunk with empty choices. */
      usage: (usage: ReturnType<typeof usageOf>) => write({ ...base(), choices: [], usage }),
      raw: (payload: unknown) => write(payload),
      done: () => {
        if (res.destroyed) return;
        res.write('data: [DONE]\n\n');
        res.end();
      },
    };
  }

  private normaliseToolCalls(
    exchange: Exchange,
    calls: MockToolCall[],
  ): Array<{ id: string; name: string; arguments: string; type: 'function' | 'custom' }> {
    return calls.map((call, position) => ({
      id: call.id ?? `call_mock_${exchange.record.index + 1}_${position + 1}`,
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
      type: call.type ?? 'function',
    }));
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/** Responses the mock tears down deliberately, so they are not counted as client aborts. */
const destroyedByMock = new WeakSet<ServerResponse>();

function markDestroyed(res: ServerResponse): void {
  destroyedByMock.add(res);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed) return;
  const payload = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers });
  res.end(payload);
}

function errorBody(message: string, type: string, code: string | null, param: string | null = null) {
  return { error: { message, type, param, code } };
}

function defaultErrorType(status: number): string {
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

function requestIdHeader(exchange: Exchange): Record<string, string> {
  return { 'x-request-id': `req_mock_${exchange.record.index + 1}` };
}

function finishReasonOf(step: TextStep | ToolCallsStep): FinishReason {
  return step.finishReason ?? (step.kind === 'toolCalls' ? 'tool_calls' : 'stop');
}

/** Uses the caller's numbers when given, else a rough 4-characters-per-token estimate so values are stable and non-zero. */
function usageOf(exchange: Exchange, step: TextStep | ToolCallsStep) {
  let prompt: number;
  let completion: number;
  let total: number | undefined;
  if (step.usage) {
    prompt = step.usage.prompt_tokens;
    completion = step.usage.completion_tokens;
    total = step.usage.total_tokens;
  } else {
    const promptChars = JSON.stringify(exchange.record.body?.messages ?? []).length;
    const replyText = step.kind === 'text' ? joinContent(step.content) : (step.content ?? '');
    const argumentChars =
      step.kind === 'toolCalls'
        ? step.toolCalls.reduce(
            (sum, call) =>
              sum +
              call.name.length +
              (typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments)).length,
            0,
          )
        : 0;
    prompt = Math.max(1, Math.ceil(promptChars / 4));
    completion = Math.max(1, Math.ceil((replyText.length + argumentChars) / 4));
  }
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: total ?? prompt + completion,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

function joinContent(content: string | string[]): string {
  return Array.isArray(content) ? content.join('') : content;
}

/** Word-sized deltas with the leading space attached, the way tokenised model output looks. */
function splitContent(content: string | string[]): string[] {
  if (Array.isArray(content)) return content.filter((piece) => piece.length > 0);
  return content.match(/\s*\S+|\s+$/g) ?? [];
}

/** Splits by code points so a fragment never ends inside a surrogate pair. */
function splitFragments(text: string, size: number): string[] {
  const chars = Array.from(text);
  const fragments: string[] = [];
  for (let start = 0; start < chars.length; start += size) fragments.push(chars.slice(start, start + size).join(''));
  return fragments;
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** Resolves `true` after `ms`, or `false` as soon as the connection closes. */
function sleep(ms: number | undefined, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  if (!ms || ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function assertNever(value: never): never {
  throw new Error(`MockLlmServer: unknown step ${JSON.stringify(value)}`);
}
