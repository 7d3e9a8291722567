import OpenAI, { APIError } from 'openai';
import { listen } from '../support/chat-helpers';
import { parsedContent, sentMessages, sentToolNames, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { MockLlmServer, MockReply, type RecordedRequest } from '../support/mock-llm.server';
import { startTestApp, TestApp } from '../support/test-app';
import { createAgent, createApiKey, DATA_CHAT_TOOLS } from '../support/fixtures';

const WON = {
  objectName: 'deal',
  where: { stage: 'won' },
  aggregations: [
    { function: 'count', alias: 'n' },
    { function: 'sum', field: 'amount', alias: 'total' },
  ],
};
const PICK_REGION: OpenAI.Chat.Completions.ChatCompletionFunctionTool = {
  type: 'function',
  function: {
    name: 'pick_region',
    description: 'Ask the user which sales region they mean.',
    parameters: { type: 'object', properties: { options: { type: 'array', items: { type: 'string' } } }, required: ['options'] },
  },
};

/** The model answers from the last tool result it received, so a figure in the answer can only come from the tool. */
const answerFromToolResult = (req: RecordedRequest) => {
  const tool = (req.body!.messages as SentMessage[]).filter((m) => m.role === 'tool').at(-1)!;
  const { rows } = parsedContent<{ rows: Array<{ n: number; total: number }> }>(tool);
  return MockReply.text(['Won: ', `${rows[0].n} deals `, `worth ${rows[0].total}`], {
    usage: { prompt_tokens: 20, completion_tokens: 5 },
  });
};

/** Errors the SDK raises, read the way an application would. */
async function sdkError(promise: Promise<unknown>): Promise<APIError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof APIError) return error;
    throw error;
  }
  throw new Error('expected the SDK to raise an APIError');
}

describe('OpenAI-compatible API (/v1) through the openai SDK', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseURL: string;
  let member: OpenAI;
  let won: { n: number; total: number };

  const agent = (spec: Record<string, unknown>) =>
    createAgent(t, { label: spec.name, instructions: `You are ${String(spec.name)}.`, tools: ['describe_object'], ...spec });
  const ask = (question: string): OpenAI.Chat.Completions.ChatCompletionMessageParam[] => [{ role: 'user', content: question }];

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true' } }));
    baseURL = `${await listen(t)}/v1`;
    const key = await createApiKey(t, { name: 'sdk', role: 'member' });
    // No retries: each scripted step is one model call, and a refused request is answered once.
    member = new OpenAI({ baseURL, apiKey: key.secret, maxRetries: 0 });
    await agent({ name: 'pipeline', access: { roles: ['member'] } });
    await agent({ name: 'admins_only', access: { roles: ['admin'] } });
    await agent({ name: 'retired', active: false });
    await agent({ name: 'terse', model: { maxTokens: 50 } });
    const [row] = await t.sql<{ n: string; total: string }>(
      `select count(*) as n, sum(amount) as total from data.deal where stage = 'won'`,
    );
    won = { n: Number(row.n), total: Number(row.total) };
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  describe('models', () => {
    it('lists exactly the agents the key may run', async () => {
      const ids: string[] = [];
      for await (const model of member.models.list()) ids.push(model.id);
      expect(ids).toEqual(['data_chat', 'pipeline', 'terse']);
      const one = await member.models.retrieve('data_chat');
      expect(one).toMatchObject({ id: 'data_chat', object: 'model', owned_by: 'data-copilot' });
      expect(one.created).toBeGreaterThan(1_700_000_000);
    });

    it('answers NotFoundError model_not_found for an agent the key may not run, or none', async () => {
      for (const id of ['admins_only', 'retired', 'no_such_agent']) {
        const error = await sdkError(member.models.retrieve(id));
        expect(error).toBeInstanceOf(OpenAI.NotFoundError);
        expect(error.code).toBe('model_not_found');
        expect(error.type).toBe('invalid_request_error');
      }
    });

    it('answers AuthenticationError invalid_api_key for a bad key', async () => {
      const stranger = new OpenAI({ baseURL, apiKey: 'dck_not-a-key', maxRetries: 0 });
      const error = await sdkError(stranger.models.list());
      expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
      expect(error.status).toBe(401);
      expect(error.code).toBe('invalid_api_key');
    });

    it("answers an OpenAI route this server does not offer with NotFoundError in OpenAI's shape", async () => {
      const error = await sdkError(member.embeddings.create({ model: 'data_chat', input: 'won deals' }));
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error.error).toMatchObject({ type: 'invalid_request_error', code: 'route_not_found' });
    });
  });

  describe('chat completions', () => {
    it("answers after a server-side tool round: the agent's instructions first, the caller's after, the agent's tools only", async () => {
      llm.enqueue(
        MockReply.toolCall('aggregate_data', WON, { usage: { prompt_tokens: 10, completion_tokens: 2 } }),
        answerFromToolResult,
      );
      const completion = await member.chat.completions.create({
        model: 'data_chat',
        messages: [{ role: 'system', content: 'Answer in one sentence.' }, ...ask('How much did we win?')],
      });

      expect(completion.object).toBe('chat.completion');
      expect(completion.model).toBe('data_chat');
      expect(completion.choices).toHaveLength(1);
      expect(completion.choices[0].finish_reason).toBe('stop');
      expect(completion.choices[0].message).toMatchObject({
        role: 'assistant',
        content: `Won: ${won.n} deals worth ${won.total}`,
      });
      // The built-in round ran here: it shows only in the usage totals.
      expect(completion.choices[0].message.tool_calls).toBeUndefined();
      expect(completion.usage).toEqual({ prompt_tokens: 30, completion_tokens: 7, total_tokens: 37 });

      expect(llm.requests).toHaveLength(2);
      const [agentInstructions, callerInstructions, question] = sentMessages(llm, 0);
      expect(agentInstructions.role).toBe('system');
      expect(agentInstructions.content).toContain('careful data analyst');
      expect(callerInstructions).toEqual({ role: 'system', content: 'Answer in one sentence.' });
      expect(question).toEqual({ role: 'user', content: 'How much did we win?' });
      expect(sentToolNames(llm, 0)).toEqual(DATA_CHAT_TOOLS);
      expect(llm.requests[0].body?.model).toBe('mock-model');
      expect(sentMessages(llm, 1).map((m) => m.role)).toEqual(['system', 'system', 'user', 'assistant', 'tool']);
    });

    it('streams content deltas, the finish reason and the usage through the SDK stream iterator', async () => {
      llm.enqueue(
        MockReply.toolCall('aggregate_data', WON, { usage: { prompt_tokens: 10, completion_tokens: 2 } }),
        answerFromToolResult,
      );
      const stream = await member.chat.completions.create({
        model: 'data_chat',
        messages: ask('How much did we win?'),
        stream: true,
        stream_options: { include_usage: true },
      });
      const deltas: string[] = [];
      const finishReasons: string[] = [];
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        expect(chunk.object).toBe('chat.completion.chunk');
        expect(chunk.model).toBe('data_chat');
        const choice = chunk.choices[0];
        if (choice?.delta.content) deltas.push(choice.delta.content);
        if (choice?.finish_reason) finishReasons.push(choice.finish_reason);
        if (chunk.usage) usage = chunk.usage;
      }
      expect(deltas).toEqual(['Won: ', `${won.n} deals `, `worth ${won.total}`]);
      expect(finishReasons).toEqual(['stop']);
      expect(usage).toEqual({ prompt_tokens: 30, completion_tokens: 7, total_tokens: 37 });
    });

    it("assembles the stream with the SDK's stream helper", async () => {
      llm.enqueue(MockReply.toolCall('aggregate_data', WON), answerFromToolResult);
      const stream = member.chat.completions.stream({
        model: 'data_chat',
        messages: ask('How much did we win?'),
        stream_options: { include_usage: true },
      });
      const final = await stream.finalChatCompletion();
      expect(final.choices[0].message.content).toBe(`Won: ${won.n} deals worth ${won.total}`);
      expect(final.choices[0].finish_reason).toBe('stop');
      expect(final.usage?.total_tokens).toBeGreaterThan(0);
    });

    it('separates the text of steps with a blank line, streamed or not', async () => {
      const script = () =>
        llm.enqueue(MockReply.toolCall('aggregate_data', WON, { content: 'Let me look.' }), MockReply.text('Found it.'));
      script();
      const completion = await member.chat.completions.create({ model: 'data_chat', messages: ask('?') });
      expect(completion.choices[0].message.content).toBe('Let me look.\n\nFound it.');
      script();
      const final = await member.chat.completions.stream({ model: 'data_chat', messages: ask('?') }).finalChatCompletion();
      expect(final.choices[0].message.content).toBe('Let me look.\n\nFound it.');
    });

    it('returns a client tool call with finish_reason tool_calls, and goes on with the result the client sends', async () => {
      llm.enqueue(MockReply.toolCall('pick_region', { options: ['EMEA', 'APAC'] }));
      const messages = ask('How are we doing in my region?');
      const first = await member.chat.completions.create({ model: 'data_chat', messages, tools: [PICK_REGION] });

      expect(first.choices[0].finish_reason).toBe('tool_calls');
      // Client tools are function tools: the calls come back as function calls.
      const calls = (first.choices[0].message.tool_calls ??
        []) as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[];
      expect(calls).toEqual([
        {
          id: expect.any(String) as string,
          type: 'function',
          function: { name: 'pick_region', arguments: JSON.stringify({ options: ['EMEA', 'APAC'] }) },
        },
      ]);
      expect(sentToolNames(llm, 0)).toEqual([...DATA_CHAT_TOOLS, 'pick_region']);

      llm.reset();
      llm.enqueue((req) => {
        const last = (req.body!.messages as SentMessage[]).at(-1)!;
        return MockReply.text(last.role === 'tool' ? `Region ${last.content}: fine.` : 'no result');
      });
      const second = await member.chat.completions.create({
        model: 'data_chat',
        tools: [PICK_REGION],
        messages: [...messages, first.choices[0].message, { role: 'tool', tool_call_id: calls[0].id, content: 'EMEA' }],
      });
      expect(second.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'Region EMEA: fine.' } });
      const sent = sentMessages(llm, 0).filter((m) => m.role !== 'system');
      expect(sent).toEqual([
        { role: 'user', content: 'How are we doing in my region?' },
        { role: 'assistant', content: null, tool_calls: [{ id: calls[0].id, type: 'function', function: calls[0].function }] },
        { role: 'tool', tool_call_id: calls[0].id, content: 'EMEA' },
      ]);
    });

    it('streams a client tool call as tool-call deltas', async () => {
      llm.enqueue(MockReply.toolCall('pick_region', { options: ['EMEA'] }));
      const final = await member.chat.completions
        .stream({ model: 'data_chat', messages: ask('My region?'), tools: [PICK_REGION] })
        .finalChatCompletion();
      expect(final.choices[0].finish_reason).toBe('tool_calls');
      expect(final.choices[0].message.tool_calls).toMatchObject([
        { type: 'function', function: { name: 'pick_region', arguments: '{"options":["EMEA"]}' } },
      ]);
    });

    it('passes tool_choice to the model: none, auto, or a named client tool', async () => {
      for (const choice of ['none', 'auto'] as const) {
        llm.reset();
        llm.enqueue(MockReply.text('ok'));
        await member.chat.completions.create({
          model: 'data_chat',
          messages: ask('?'),
          tools: [PICK_REGION],
          tool_choice: choice,
        });
        expect(llm.requests[0].body?.tool_choice).toBe(choice);
      }
      llm.reset();
      llm.enqueue(MockReply.toolCall('pick_region', { options: [] }));
      const forced = await member.chat.completions.create({
        model: 'data_chat',
        messages: ask('?'),
        tools: [PICK_REGION],
        tool_choice: { type: 'function', function: { name: 'pick_region' } },
      });
      expect(forced.choices[0].finish_reason).toBe('tool_calls');
      expect(llm.requests[0].body?.tool_choice).toEqual({ type: 'function', function: { name: 'pick_region' } });

      const builtIn = await sdkError(
        member.chat.completions.create({
          model: 'data_chat',
          messages: ask('?'),
          tool_choice: { type: 'function', function: { name: 'query_records' } },
        }),
      );
      expect(builtIn).toBeInstanceOf(OpenAI.BadRequestError);
      expect(builtIn.param).toBe('tool_choice');
    });

    it('honours temperature, max_tokens, stop and user, and forwards no other field', async () => {
      llm.enqueue(MockReply.text('ok'));
      await member.chat.completions.create({
        model: 'data_chat',
        messages: ask('?'),
        temperature: 0.3,
        max_completion_tokens: 120,
        stop: ['END'],
        user: 'analyst-7',
        n: 1,
        top_p: 0.5,
        seed: 42,
        presence_penalty: 1,
        parallel_tool_calls: false,
        metadata: { team: 'sales' },
        response_format: { type: 'text' },
      });
      const body = llm.requests[0].body!;
      expect(body).toMatchObject({ model: 'mock-model', temperature: 0.3, max_tokens: 120, stop: ['END'], user: 'analyst-7' });
      for (const field of ['n', 'top_p', 'seed', 'presence_penalty', 'parallel_tool_calls', 'metadata', 'response_format']) {
        expect(body[field]).toBeUndefined();
      }
    });

    it("refuses max_tokens above the agent's own limit and an out-of-range temperature, naming the parameter", async () => {
      const tooMany = await sdkError(member.chat.completions.create({ model: 'terse', messages: ask('?'), max_tokens: 51 }));
      expect(tooMany).toBeInstanceOf(OpenAI.BadRequestError);
      expect(tooMany.param).toBe('max_tokens');
      expect(tooMany.message).toContain("max_tokens may not exceed the agent's maxTokens (50)");
      const hot = await sdkError(member.chat.completions.create({ model: 'data_chat', messages: ask('?'), temperature: 3 }));
      expect(hot).toBeInstanceOf(OpenAI.BadRequestError);
      expect(hot.param).toBe('temperature');
      expect(hot.code).toBe('invalid_option');
      expect(llm.requests).toHaveLength(0);
    });

    it.each([
      ['n: 2', { n: 2 }, 'n'],
      ['logprobs', { logprobs: true }, 'logprobs'],
      ['a JSON response format', { response_format: { type: 'json_object' } }, 'response_format'],
      ['audio output', { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'mp3' } }, 'modalities'],
      ['tool_choice required', { tools: [PICK_REGION], tool_choice: 'required' }, 'tool_choice'],
    ] as const)('refuses %s with BadRequestError unsupported_parameter', async (_, extra, param) => {
      const error = await sdkError(
        member.chat.completions.create({
          model: 'data_chat',
          messages: ask('?'),
          ...(extra as Partial<OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming>),
        }),
      );
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.code).toBe('unsupported_parameter');
      expect(error.param).toBe(param);
      expect(error.type).toBe('invalid_request_error');
      expect(llm.requests).toHaveLength(0);
    });

    it('refuses images and audio in messages, and a tool result that answers no call', async () => {
      const image = await sdkError(
        member.chat.completions.create({
          model: 'data_chat',
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }],
        }),
      );
      expect(image).toBeInstanceOf(OpenAI.BadRequestError);
      expect(image.param).toBe('messages[0].content[0]');
      const orphan = await sdkError(
        member.chat.completions.create({
          model: 'data_chat',
          messages: [...ask('?'), { role: 'tool', tool_call_id: 'call_nowhere', content: 'x' }],
        }),
      );
      expect(orphan).toBeInstanceOf(OpenAI.BadRequestError);
      expect(orphan.code).toBe('invalid_message');
      expect(orphan.param).toBe('messages[1].tool_call_id');
      expect(llm.requests).toHaveLength(0);
    });

    it('refuses a client tool that shadows a tool of the agent with BadRequestError', async () => {
      const error = await sdkError(
        member.chat.completions.create({
          model: 'data_chat',
          messages: ask('?'),
          tools: [{ type: 'function', function: { name: 'query_records', parameters: { type: 'object' } } }],
        }),
      );
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.code).toBe('invalid_dynamic_tools');
      expect(error.message).toContain('"query_records" would shadow a tool of the agent');
      expect(llm.requests).toHaveLength(0);
    });

    it('answers NotFoundError for an unknown model and PermissionDeniedError for an agent the key may not run', async () => {
      const unknown = await sdkError(member.chat.completions.create({ model: 'gpt-4o', messages: ask('?') }));
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
      expect(unknown.code).toBe('model_not_found');
      const forbidden = await sdkError(member.chat.completions.create({ model: 'admins_only', messages: ask('?') }));
      expect(forbidden).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect(forbidden.code).toBe('agent_forbidden');
      const stranger = new OpenAI({ baseURL, apiKey: 'dck_not-a-key', maxRetries: 0 });
      const bad = await sdkError(stranger.chat.completions.create({ model: 'data_chat', messages: ask('?') }));
      expect(bad).toBeInstanceOf(OpenAI.AuthenticationError);
      expect(llm.requests).toHaveLength(0);
    });

    it("raises the model endpoint's failures as the SDK's classes: RateLimitError for its 429, InternalServerError for its 5xx", async () => {
      llm.enqueue(MockReply.httpError(429, { message: 'slow down' }));
      const limited = await sdkError(member.chat.completions.create({ model: 'data_chat', messages: ask('?') }));
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      expect(limited.error).toMatchObject({ type: 'rate_limit_error', code: 'llm_rate_limited' });
      expect(limited.message).not.toContain('slow down');
      llm.enqueue(MockReply.httpError(500));
      const failed = await sdkError(member.chat.completions.create({ model: 'data_chat', messages: ask('?') }));
      expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
      expect(failed.status).toBe(502);
      expect(failed.error).toMatchObject({ type: 'server_error', code: 'llm_unavailable' });
    });

    it('raises the failure of the model endpoint in the stream as an APIError', async () => {
      llm.enqueue(MockReply.streamError({ content: 'Partial answer', mode: 'errorEvent' }));
      const stream = await member.chat.completions.create({ model: 'data_chat', messages: ask('?'), stream: true });
      const deltas: string[] = [];
      const failure = await sdkError(
        (async () => {
          for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas.push(chunk.choices[0].delta.content);
        })(),
      );
      expect(deltas.join('')).toBe('Partial answer');
      expect(failure.error).toMatchObject({ type: 'server_error', code: 'llm_unavailable' });
    });

    it('cancels the turn, and the model call, when the client goes away', async () => {
      llm.enqueue(MockReply.hang());
      const controller = new AbortController();
      const pending = member.chat.completions.create({ model: 'data_chat', messages: ask('?') }, { signal: controller.signal });
      await llm.waitForRequests(1);
      controller.abort();
      await expect(pending).rejects.toBeInstanceOf(OpenAI.APIUserAbortError);
      for (let i = 0; i < 200 && llm.abortedRequests === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(llm.abortedRequests).toBe(1);
    });
  });
});

describe('OpenAI-compatible API without a model endpoint', () => {
  let t: TestApp;
  let member: OpenAI;

  beforeAll(async () => {
    t = await startTestApp();
    const key = await createApiKey(t, { name: 'sdk', role: 'member' });
    member = new OpenAI({ baseURL: `${await listen(t)}/v1`, apiKey: key.secret, maxRetries: 0 });
  });
  afterAll(() => t.close());

  it('answers 503 llm_not_configured, raised as InternalServerError, while the models are listed', async () => {
    const error = await sdkError(
      member.chat.completions.create({ model: 'data_chat', messages: [{ role: 'user', content: '?' }] }),
    );
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(error.status).toBe(503);
    expect(error.code).toBe('llm_not_configured');
    expect(error.type).toBe('server_error');
    const ids: string[] = [];
    for await (const model of member.models.list()) ids.push(model.id);
    expect(ids).toEqual(['data_chat']);
  });
});
