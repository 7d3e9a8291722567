import OpenAI, {
  APIConnectionError,
  APIError,
  APIUserAbortError,
  InternalServerError,
  NotFoundError,
  RateLimitError,
} from 'openai';
import type { ChatCompletionChunk, ChatCompletionTool } from 'openai/resources/chat/completions';
import { MockLlmServer, MockReply, type RecordedRequest } from './mock-llm.server';

const API_KEY = 'sk-test-mock-key';
const MODEL = 'gpt-mock-1';
const USER = [{ role: 'user' as const, content: 'How many orders were placed yesterday?' }];
const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'run_query',
      description: 'Runs a read-only query',
      parameters: { type: 'object', properties: { sql: { type: 'string' }, limit: { type: 'number' } }, required: ['sql'] },
    },
  },
];

describe('MockLlmServer (driven by the real openai SDK)', () => {
  let server: MockLlmServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await MockLlmServer.start();
  });

  afterAll(async () => {
    await server.close();
  });

  beforeEach(() => {
    server.reset();
    client = new OpenAI({ apiKey: API_KEY, baseURL: server.url, maxRetries: 0 });
  });

  it('exposes a loopback /v1 base URL', () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  it('answers a scripted text reply with usage and echoes the requested model', async () => {
    server.enqueue(MockReply.text('There were 42 orders.'));

    const completion = await client.chat.completions.create({ model: MODEL, messages: USER });

    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe(MODEL);
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0].message.role).toBe('assistant');
    expect(completion.choices[0].message.content).toBe('There were 42 orders.');
    expect(completion.choices[0].finish_reason).toBe('stop');
    expect(completion.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);
    expect(completion.usage?.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
    expect(server.pendingSteps).toBe(0);
  });

  it('honours explicit finish_reason and usage', async () => {
    server.enqueue(MockReply.text('Truncated', { finishReason: 'length', usage: { prompt_tokens: 7, completion_tokens: 3 } }));

    const completion = await client.chat.completions.create({ model: MODEL, messages: USER });

    expect(completion.choices[0].finish_reason).toBe('length');
    expect(completion.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
  });

  it('replies to several requests in FIFO order', async () => {
    server.enqueue(MockReply.text('first'), MockReply.text('second'));

    const a = await client.chat.completions.create({ model: MODEL, messages: USER });
    const b = await client.chat.completions.create({ model: MODEL, messages: USER });

    expect([a.choices[0].message.content, b.choices[0].message.content]).toEqual(['first', 'second']);
    expect(a.id).not.toBe(b.id);
  });

  it('returns non-streaming tool calls whose arguments parse back to the scripted object', async () => {
    server.enqueue(
      MockReply.toolCalls([
        { id: 'call_abc', name: 'run_query', arguments: { sql: 'select count(*) from orders', limit: 10 } },
        { name: 'run_query', arguments: '{"sql": "select 1"' },
      ]),
    );

    const completion = await client.chat.completions.create({ model: MODEL, messages: USER, tools: TOOLS });

    const choice = completion.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const calls = choice.message.tool_calls ?? [];
    expect(calls).toHaveLength(2);
    const [first, second] = calls;
    if (first.type !== 'function' || second.type !== 'function') throw new Error('expected function tool calls');
    expect(first.id).toBe('call_abc');
    expect(first.function.name).toBe('run_query');
    expect(JSON.parse(first.function.arguments)).toEqual({ sql: 'select count(*) from orders', limit: 10 });
    // A generated id is present, and a raw-string argument is passed through untouched (even if invalid JSON).
    expect(second.id).toMatch(/^call_/);
    expect(second.id).not.toBe(first.id);
    expect(second.function.arguments).toBe('{"sql": "select 1"');
    expect(() => {
      JSON.parse(second.function.arguments);
    }).toThrow(SyntaxError);
  });

  it('streams text in several delta chunks that concatenate to the scripted content', async () => {
    const text = 'Yesterday there were 42 orders, up from 37.';
    server.enqueue(MockReply.text(text));

    const stream = await client.chat.completions.create({ model: MODEL, messages: USER, stream: true });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    const deltas = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').filter((piece) => piece.length > 0);
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join('')).toBe(text);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    expect(chunks.at(-1)?.choices[0].finish_reason).toBe('stop');
    // Usage was not requested, so no usage-only chunk is sent.
    expect(chunks.some((chunk) => chunk.choices.length === 0)).toBe(false);
  });

  it('uses caller-chosen stream deltas and appends a usage chunk when include_usage is set', async () => {
    server.enqueue(MockReply.text(['Hel', 'lo', ' wor', 'ld'], { usage: { prompt_tokens: 5, completion_tokens: 4 } }));

    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: USER,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    const deltas = chunks.flatMap((chunk) => (chunk.choices[0]?.delta.content ? [chunk.choices[0].delta.content] : []));
    expect(deltas).toEqual(['Hel', 'lo', ' wor', 'ld']);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 });
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true);
  });

  it('streams text through the SDK stream helper, emitting one content event per delta', async () => {
    server.enqueue(MockReply.text('one two three four'));

    const stream = client.chat.completions.stream({ model: MODEL, messages: USER });
    const events: string[] = [];
    stream.on('content', (delta) => events.push(delta));
    const completion = await stream.finalChatCompletion();

    expect(events).toEqual(['one', ' two', ' three', ' four']);
    expect(completion.choices[0].message.content).toBe('one two three four');
    expect(completion.choices[0].finish_reason).toBe('stop');
  });

  it('streams tool calls in OpenAI-style fragments that the SDK stream helper reassembles', async () => {
    const firstArgs = { sql: 'select status, count(*) from orders group by status', limit: 50 };
    server.enqueue(
      MockReply.toolCalls(
        [
          { id: 'call_1', name: 'run_query', arguments: firstArgs },
          { id: 'call_2', name: 'run_query', arguments: { sql: 'select 1' } },
        ],
        { content: 'Let me check.' },
      ),
    );

    const stream = client.chat.completions.stream({ model: MODEL, messages: USER, tools: TOOLS });
    const argumentDeltas: Array<{ index: number; delta: string }> = [];
    stream.on('tool_calls.function.arguments.delta', (event) =>
      argumentDeltas.push({ index: event.index, delta: event.arguments_delta }),
    );
    const rawChunks: ChatCompletionChunk[] = [];
    stream.on('chunk', (chunk) => rawChunks.push(chunk));
    const completion = await stream.finalChatCompletion();

    // Wire format: the first delta of each call carries id/type/name, the rest only argument fragments.
    const toolDeltas = rawChunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    const openings = toolDeltas.filter((delta) => delta.id !== undefined);
    expect(openings.map((delta) => [delta.index, delta.id, delta.type, delta.function?.name])).toEqual([
      [0, 'call_1', 'function', 'run_query'],
      [1, 'call_2', 'function', 'run_query'],
    ]);
    expect(toolDeltas.filter((delta) => delta.id === undefined).every((delta) => delta.function?.name === undefined)).toBe(true);
    expect(argumentDeltas.filter((event) => event.index === 0).length).toBeGreaterThan(1);

    const choice = completion.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('Let me check.');
    const calls = choice.message.tool_calls ?? [];
    expect(calls).toHaveLength(2);
    const [first, second] = calls;
    if (first.type !== 'function' || second.type !== 'function') throw new Error('expected function tool calls');
    expect(first.id).toBe('call_1');
    expect(JSON.parse(first.function.arguments)).toEqual(firstArgs);
    expect(second.id).toBe('call_2');
    expect(JSON.parse(second.function.arguments)).toEqual({ sql: 'select 1' });
  });

  it('surfaces a scripted 429 as RateLimitError with the OpenAI error body and headers', async () => {
    server.enqueue(
      MockReply.httpError(429, {
        message: 'Rate limit reached for requests',
        code: 'rate_limit_exceeded',
        headers: { 'retry-after': '7' },
      }),
    );

    const error: unknown = await client.chat.completions.create({ model: MODEL, messages: USER }).then(
      () => undefined,
      (caught: unknown) => caught,
    );

    expect(error).toBeInstanceOf(RateLimitError);
    const rateLimit = error as RateLimitError;
    expect(rateLimit.status).toBe(429);
    expect(rateLimit.code).toBe('rate_limit_exceeded');
    expect(rateLimit.type).toBe('rate_limit_error');
    expect(rateLimit.message).toContain('Rate limit reached for requests');
    expect(rateLimit.headers.get('retry-after')).toBe('7');
  });

  it('lets the SDK retry a scripted error when retries are enabled', async () => {
    server.enqueue(MockReply.httpError(503, { headers: { 'retry-after-ms': '1' } }), MockReply.text('recovered'));
    const retrying = new OpenAI({ apiKey: API_KEY, baseURL: server.url, maxRetries: 1 });

    const completion = await retrying.chat.completions.create({ model: MODEL, messages: USER });

    expect(completion.choices[0].message.content).toBe('recovered');
    expect(server.requests).toHaveLength(2);
  });

  it('makes SDK stream iteration throw when the connection drops mid-stream, after the partial chunks', async () => {
    server.enqueue(MockReply.streamError({ content: 'Partial answer before' }));

    const stream = await client.chat.completions.create({ model: MODEL, messages: USER, stream: true });
    let received = '';
    const iterate = async () => {
      for await (const chunk of stream) received += chunk.choices[0]?.delta.content ?? '';
    };

    await expect(iterate()).rejects.toThrow();
    expect(received).toBe('Partial answer before');
    expect(server.abortedRequests).toBe(0);
  });

  it('makes SDK stream iteration throw an APIError for an in-stream error event', async () => {
    server.enqueue(
      MockReply.streamError({ content: 'Hmm', mode: 'errorEvent', error: { message: 'model overloaded', code: 'overloaded' } }),
    );

    const stream = await client.chat.completions.create({ model: MODEL, messages: USER, stream: true });
    const iterate = async () => {
      for await (const chunk of stream) void chunk;
    };

    const error: unknown = await iterate().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).message).toContain('model overloaded');
  });

  it('drops the connection for a stream error step on a non-streaming request', async () => {
    server.enqueue(MockReply.streamError());

    await expect(client.chat.completions.create({ model: MODEL, messages: USER })).rejects.toBeInstanceOf(APIConnectionError);
  });

  it('keeps a hang step open until the client aborts, and close() still returns promptly', async () => {
    const local = await MockLlmServer.start();
    try {
      const localClient = new OpenAI({ apiKey: API_KEY, baseURL: local.url, maxRetries: 0 });
      local.enqueue(MockReply.hang(), MockReply.hang());

      const controller = new AbortController();
      const pending = localClient.chat.completions.create({ model: MODEL, messages: USER }, { signal: controller.signal });
      const settled = jest.fn();
      pending.then(settled, settled);
      await local.waitForRequests(1);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(settled).not.toHaveBeenCalled();

      controller.abort();
      await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
      await waitFor(() => local.abortedRequests === 1);
      expect(local.requests[0].aborted).toBe(true);

      // A second hung request that nobody aborts must not stop close() from finishing.
      const orphan = localClient.chat.completions.create({ model: MODEL, messages: USER });
      const orphanOutcome = orphan.then(
        () => 'resolved',
        (error: unknown) => error,
      );
      await local.waitForRequests(2);
      const started = Date.now();
      await local.close();
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(await orphanOutcome).toBeInstanceOf(APIConnectionError);
    } finally {
      await local.close();
    }
  });

  it('sends the headers of a headers-then-hang step and nothing else until the client aborts', async () => {
    server.enqueue(MockReply.headersThenHang());
    const controller = new AbortController();

    // The SDK resolves a stream once the headers are in: the silence is in the body.
    const stream = await client.chat.completions.create(
      { model: MODEL, messages: USER, stream: true },
      { signal: controller.signal },
    );
    const chunks: ChatCompletionChunk[] = [];
    const iterating = (async () => {
      for await (const chunk of stream) chunks.push(chunk);
    })();
    await new Promise((resolve) => setTimeout(resolve, 100));
    controller.abort();
    await iterating.catch(() => undefined);

    expect(chunks).toHaveLength(0);
    await waitFor(() => server.abortedRequests === 1);
    expect(server.requests[0].aborted).toBe(true);
  });

  it('stalls a stream after the given number of chunks, keeping the connection open', async () => {
    server.enqueue(MockReply.stall(3, 'one two three four five'));
    const controller = new AbortController();

    const stream = await client.chat.completions.create(
      { model: MODEL, messages: USER, stream: true },
      { signal: controller.signal },
    );
    let text = '';
    let received = 0;
    const iterating = (async () => {
      for await (const chunk of stream) {
        received += 1;
        text += chunk.choices[0]?.delta.content ?? '';
      }
    })();
    await waitFor(() => received === 3);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(received).toBe(3);
    controller.abort();
    await iterating.catch(() => undefined);

    // The role chunk, then two words.
    expect(text).toBe('one two');
    await waitFor(() => server.abortedRequests === 1);
  });

  it('sends the headers of a stalling step to a non-streaming request and no body', async () => {
    server.enqueue(MockReply.stall(0));
    const controller = new AbortController();

    const pending = client.chat.completions.create({ model: MODEL, messages: USER }, { signal: controller.signal });
    await server.waitForRequests(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    controller.abort();

    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
    await waitFor(() => server.abortedRequests === 1);
  });

  it('delays the reply by delayMs', async () => {
    server.enqueue(MockReply.text('slow', { delayMs: 150 }));

    const started = Date.now();
    await client.chat.completions.create({ model: MODEL, messages: USER });

    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('spaces stream chunks by chunkDelayMs, and counts a client abort mid-stream', async () => {
    server.enqueue(MockReply.text('a b c d e f g h', { chunkDelayMs: 40 }));
    const controller = new AbortController();

    const stream = await client.chat.completions.create(
      { model: MODEL, messages: USER, stream: true },
      { signal: controller.signal },
    );
    const arrivals: number[] = [];
    const iterate = async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) arrivals.push(Date.now());
        if (arrivals.length === 3) controller.abort();
      }
    };

    // This SDK ends iteration quietly when its own signal aborts a stream; either way no more chunks arrive.
    await iterate().catch((error: unknown) => expect(error).toBeInstanceOf(APIUserAbortError));
    expect(arrivals).toHaveLength(3);
    expect(arrivals[2] - arrivals[0]).toBeGreaterThanOrEqual(70);
    await waitFor(() => server.abortedRequests === 1);
    expect(server.lastRequest()?.aborted).toBe(true);
  });

  it('answers 500 with a script-exhausted message when the queue is empty', async () => {
    server.enqueue(MockReply.text('only one'));
    await client.chat.completions.create({ model: MODEL, messages: USER });

    // Even with retries allowed, the exhausted answer must not be retried.
    const retrying = new OpenAI({ apiKey: API_KEY, baseURL: server.url, maxRetries: 2 });
    const error: unknown = await retrying.chat.completions.create({ model: MODEL, messages: USER }).then(
      () => undefined,
      (caught: unknown) => caught,
    );

    expect(error).toBeInstanceOf(InternalServerError);
    expect((error as InternalServerError).status).toBe(500);
    expect((error as InternalServerError).message).toMatch(/script exhausted/);
    expect(server.requests).toHaveLength(2);
  });

  it('builds replies from the received request with a dynamic step', async () => {
    server.enqueue((request: RecordedRequest) => {
      const messages = (request.body?.messages ?? []) as Array<{ content: string }>;
      return MockReply.text(`echo: ${messages.at(-1)?.content}`);
    });

    const completion = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'ping' }] });

    expect(completion.choices[0].message.content).toBe('echo: ping');
  });

  it('reports a throwing dynamic step as a 500', async () => {
    server.enqueue(() => {
      throw new Error('assertion in script failed');
    });

    await expect(client.chat.completions.create({ model: MODEL, messages: USER })).rejects.toThrow(/assertion in script failed/);
  });

  it('records every request with body, lower-cased headers including authorization, path and time', async () => {
    server.enqueue(MockReply.text('a'), MockReply.text('b'));
    const before = Date.now();

    await client.chat.completions.create({ model: MODEL, messages: USER, temperature: 0 });
    await client.chat.completions.create({ model: 'other-model', messages: [{ role: 'user', content: 'second' }] });

    expect(server.requests).toHaveLength(2);
    const [first, second] = server.requests;
    expect(first.method).toBe('POST');
    expect(first.path).toBe('/v1/chat/completions');
    expect(first.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(first.headers['content-type']).toContain('application/json');
    expect(first.body).toMatchObject({ model: MODEL, messages: USER, temperature: 0 });
    expect(JSON.parse(first.rawBody)).toEqual(first.body);
    expect(first.receivedAt).toBeGreaterThanOrEqual(before);
    expect(second.receivedAt).toBeGreaterThanOrEqual(first.receivedAt);
    expect(server.lastRequest()).toBe(second);
    expect(second.body?.model).toBe('other-model');
    expect(first.aborted).toBe(false);
  });

  it('answers 404 JSON for other routes', async () => {
    const error: unknown = await client.embeddings.create({ model: 'emb', input: 'x' }).then(
      () => undefined,
      (caught: unknown) => caught,
    );

    expect(error).toBeInstanceOf(NotFoundError);
    expect(server.lastRequest()?.path).toBe('/v1/embeddings');
  });

  it('reset() clears the queue and the records', async () => {
    server.enqueue(MockReply.text('unused'));
    await client.chat.completions.create({ model: MODEL, messages: USER }).catch(() => undefined);
    server.enqueue(MockReply.text('left over'));

    server.reset();

    expect(server.requests).toHaveLength(0);
    expect(server.pendingSteps).toBe(0);
    expect(server.lastRequest()).toBeUndefined();
  });
});

/** Polls a condition; the server updates its counters asynchronously after the socket closes. */
async function waitFor(condition: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
