import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_PATH_PARAM_LENGTH } from '../../src/common/framework-errors';
import { startAppWithMockLlm, sentToolNames } from '../support/agent-fixtures';
import { hasStatus, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { listenOnLoopback, RawConnection, RawResponse, sendRaw } from '../support/raw-http';
import { idOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createAgent, createObject, fieldSpec, memberSecret } from '../support/fixtures';

/** A message of a model request, as the mock model server received it. */
type SentMessage = { role: string; content?: string | null; tool_call_id?: string; tool_calls?: Array<{ id: string }> };

/** The part of a stateless chat's answer these tests read. */
type ChatBody = { toolCalls: Array<{ name: string; isError: boolean; result: unknown }> };

/** What a member key can send that must neither stall, exhaust nor confuse the server. */
describe('hardening against hostile member input', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: string;
  let bob: string;

  const createChat = (key: string, dynamicTools: unknown[]) =>
    t.http.post('/api/v1/chats').set(bearer(key)).send({ agent: 'data_chat', message: 'hi', dynamicTools });

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm());
    alice = await memberSecret(t, 'alice');
    bob = await memberSecret(t, 'bob');
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  describe('client tool schemas are checked without being kept (finding 2)', () => {
    const tool = (name: string, inputSchema: Record<string, unknown>) => ({ name, description: 'A client tool.', inputSchema });

    it('accepts the same $id from two keys, and both chats reach the model with their own schema', async () => {
      llm.enqueue(MockReply.text('one'), MockReply.text('two'));
      const a = await createChat(alice, [
        tool('pick_a', { $id: 'shared', type: 'object', properties: { a: { type: 'string' } } }),
      ]).expect(201);
      const b = await createChat(bob, [
        tool('pick_b', { $id: 'shared', type: 'object', properties: { b: { type: 'number' } } }),
      ]).expect(201);
      await waitForChat(t, (a.body as { id: string }).id, hasStatus('waiting'), alice);
      await waitForChat(t, (b.body as { id: string }).id, hasStatus('waiting'), bob);
      const sent = [0, 1].flatMap((i) => sentToolNames(llm, i));
      expect(sent).toEqual(expect.arrayContaining(['pick_a', 'pick_b']));
      // A third chat of the first key, after the others, still works: nothing was registered.
      llm.enqueue(MockReply.text('three'));
      const again = await createChat(alice, [tool('pick_a', { $id: 'shared', type: 'object' })]).expect(201);
      await waitForChat(t, (again.body as { id: string }).id, hasStatus('waiting'), alice);
    });

    it('answers a $ref the same whether or not another key declared that $id (no cross-key resolution)', async () => {
      llm.enqueue(MockReply.text('ok'));
      const declared = await createChat(alice, [
        tool('secret_form', { $id: 'alice-form', type: 'object', properties: { ssn: { type: 'string' } } }),
      ]);
      expect(declared.status).toBe(201);
      await waitForChat(t, (declared.body as { id: string }).id, hasStatus('waiting'), alice);
      llm.enqueue(MockReply.text('ok'), MockReply.text('ok'));
      const toDeclared = await createChat(bob, [tool('peek', { $ref: 'alice-form' })]);
      const toUnknown = await createChat(bob, [tool('peek', { $ref: 'nobody-declared-this' })]);
      expect(toDeclared.status).toBe(toUnknown.status);
      // Neither resolves inside its own schema.
      expect(toDeclared.status).toBe(400);
      for (const res of [toDeclared, toUnknown]) {
        if (res.status === 201) await waitForChat(t, (res.body as { id: string }).id, hasStatus('waiting'), bob);
      }
      expect(JSON.stringify(llm.requests.map((r) => r.body?.tools))).not.toContain('ssn":{"type":"string"}},"$ref');
    });

    it('accepts 900 patterned properties (checked against the meta-schema, no code generated)', async () => {
      const patternProperties = Object.fromEntries(
        Array.from({ length: 900 }, (_, i) => [`^field_${i}_[a-z]+$`, { type: 'string' }]),
      );
      llm.enqueue(MockReply.text('ok'));
      const res = await createChat(alice, [tool('wide', { type: 'object', patternProperties })]).expect(201);
      await waitForChat(t, (res.body as { id: string }).id, hasStatus('waiting'), alice);
    });

    it.each([
      [
        'an invalid regular expression',
        [tool('bad_re', { type: 'object', properties: { a: { type: 'string', pattern: '([a-z' } } })],
      ],
      [
        'an invalid patternProperties key',
        [tool('bad_pp', { type: 'object', patternProperties: { '(unclosed': { type: 'string' } } })],
      ],
      ['an unknown meta-schema', [tool('future', { $schema: 'https://example.invalid/schema', type: 'object' })]],
      [
        'schemas over 256 KB together',
        Array.from({ length: 5 }, (_, i) => tool(`big_${i}`, { type: 'object', description: 'x'.repeat(60_000) })),
      ],
    ])('rejects %s with 400 invalid_dynamic_tools', async (_label, tools) => {
      const res = await createChat(alice, tools).expect(400);
      expect((res.body as { code: string }).code).toBe('invalid_dynamic_tools');
      expect(llm.requests).toHaveLength(0);
    });
  });

  describe('a client tool schema whose $ref points outside it is refused at creation, on every door', () => {
    /** `address` points at a $defs entry the schema does not have. */
    const dangling = { type: 'object', properties: { address: { $ref: '#/$defs/address' } } };
    const resolving = {
      type: 'object',
      $defs: { address: { type: 'object', properties: { street: { type: 'string' } } } },
      properties: { address: { $ref: '#/$defs/address' } },
    };
    const formTool = (inputSchema: Record<string, unknown>) => ({ name: 'fill_form', description: 'A form.', inputSchema });
    const userMessage = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] };

    it('refuses it on POST /api/v1/chats with 400 invalid_dynamic_tools naming the tool', async () => {
      const res = await createChat(alice, [formTool(dangling)]).expect(400);
      expect(res.body).toMatchObject({ code: 'invalid_dynamic_tools', details: { tool: 'fill_form' } });
      expect((res.body as { error: string }).error).toContain('"#/$defs/address" does not point inside the schema');
      expect(llm.requests).toHaveLength(0);
    });

    it("refuses it on the useChat transport's route, before any stream opens", async () => {
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chats')
        .set(bearer(alice))
        .send({ id: 'dangling-ref', messages: [userMessage], trigger: 'submit-message', dynamicTools: [formTool(dangling)] })
        .expect(400);
      expect(res.body).toMatchObject({ code: 'invalid_dynamic_tools', details: { tool: 'fill_form' } });
      expect(llm.requests).toHaveLength(0);
      await t.http.get('/api/v1/ai/agents/data_chat/chats/dangling-ref/messages').set(bearer(alice)).expect(404);
    });

    it('refuses it in the tools of /v1/chat/completions, naming the parameter', async () => {
      const res = await t.http
        .post('/v1/chat/completions')
        .set(bearer(alice))
        .send({
          model: 'data_chat',
          messages: [{ role: 'user', content: 'hi' }],
          tools: [{ type: 'function', function: { name: 'fill_form', parameters: dangling } }],
        })
        .expect(400);
      const { error } = res.body as { error: { code: string; param: string; message: string } };
      expect(error).toMatchObject({ code: 'invalid_dynamic_tools', param: 'tools[0].function.parameters' });
      expect(error.message).toContain('client tool "fill_form"');
      expect(llm.requests).toHaveLength(0);
    });

    it('accepts the same schema once its $ref resolves inside it', async () => {
      llm.enqueue(MockReply.text('ok'));
      const res = await createChat(alice, [formTool(resolving)]).expect(201);
      await waitForChat(t, (res.body as { id: string }).id, hasStatus('waiting'), alice);
    });
  });

  describe('model output is stored whatever its characters (finding 8)', () => {
    it('stores an answer with NUL, an unpaired surrogate and a surrogate pair split across chunks', async () => {
      llm.enqueue(MockReply.text(['Total: 42\u0000 ', 'lone \ud800 end', ' smile \ud83d', '\ude00']));
      const res = await createChat(alice, []).expect(201);
      const id = (res.body as { id: string }).id;
      const chat = (await waitForChat(t, id, hasStatus('waiting', 'error'), alice)) as { status: string };
      expect(chat.status).toBe('waiting');
      const messages = (await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(alice)).expect(200)).body as {
        messages: Array<{ role: string; parts: Array<{ type: string; text?: string }> }>;
      };
      const answer = messages.messages.find((m) => m.role === 'assistant')!;
      expect(answer.parts).toEqual([{ type: 'text', text: 'Total: 42\uFFFD lone \uFFFD end smile \u{1F600}' }]);
    });

    it('stores a client tool call whose arguments hold a NUL', async () => {
      llm.enqueue(MockReply.toolCall('show_form', '{"title":"a\\u0000b"}'));
      const form = {
        name: 'show_form',
        description: 'Show a form.',
        inputSchema: { type: 'object', properties: { title: { type: 'string' } } },
      };
      const res = await createChat(alice, [form]).expect(201);
      const chat = (await waitForChat(t, (res.body as { id: string }).id, hasStatus('requires_action', 'error'), alice)) as {
        status: string;
        pendingToolCalls: Array<{ name: string; arguments: unknown }>;
      };
      expect(chat.status).toBe('requires_action');
      expect(chat.pendingToolCalls[0]).toMatchObject({ name: 'show_form', arguments: { title: 'a\uFFFDb' } });
    });
  });

  describe("the provider's error text stays in the log (finding 9)", () => {
    const leaky = 'Incorrect API key provided: sk-live-9f8e7d6c. Upstream http://10.20.30.40:8443/v1 refused.';

    it('answers a stateless chat with the classified message only', async () => {
      llm.enqueue(MockReply.httpError(400, { message: leaky }));
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(alice))
        .send({ messages: [{ role: 'user', content: 'hi' }] });
      expect(res.status).toBe(502);
      expect((res.body as { code: string }).code).toBe('llm_bad_request');
      expect(JSON.stringify(res.body)).not.toMatch(/sk-live|10\.20\.30\.40|Incorrect API key/);
    });

    it("records the classified message as a durable chat's lastError", async () => {
      llm.enqueue(MockReply.httpError(401, { message: leaky }));
      const res = await createChat(alice, []).expect(201);
      const chat = (await waitForChat(t, (res.body as { id: string }).id, hasStatus('error'), alice)) as {
        lastError: { code: string };
      };
      expect(chat.lastError.code).toBe('llm_auth_failed');
      expect(JSON.stringify(chat)).not.toMatch(/sk-live|10\.20\.30\.40|Incorrect API key/);
    });
  });

  describe('datetimes outside years 1..9999 (finding 13)', () => {
    beforeAll(async () => {
      await createObject(t, 'meeting', [fieldSpec('starts_at', 'datetime')]);
    });

    it.each(['0001-01-01T00:30:00+01:00', '9999-12-31T23:30:00-05:00'])('refuses %j with 400 invalid_value', async (startsAt) => {
      const res = await t.http
        .post('/api/v1/objects/meeting/records')
        .set(bearer(alice))
        .send({ starts_at: startsAt })
        .expect(400);
      expect(res.body as { code: string; error: string }).toMatchObject({
        code: 'invalid_value',
        error: expect.stringContaining('starts_at') as unknown,
      });
    });

    it('stores the edges of the range and reads them back as ISO 8601', async () => {
      for (const [sent, read] of [
        ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
        ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
      ]) {
        const created = await t.http
          .post('/api/v1/objects/meeting/records')
          .set(bearer(alice))
          .send({ starts_at: sent })
          .expect(201);
        const id = (created.body as { id: string }).id;
        const got = await t.http.get(`/api/v1/objects/meeting/records/${id}`).set(bearer(alice)).expect(200);
        expect((got.body as { starts_at: string }).starts_at).toBe(read);
      }
    });
  });

  describe('metadata that would leave stale grants or orphaned values (finding 15)', () => {
    it('refuses to delete an object an agent still names in allowedObjects, with 409 listing the agents', async () => {
      await createObject(t, 'contract', [fieldSpec('title', 'text')]);
      await createAgent(t, {
        name: 'contracts_bot',
        label: 'Contracts',
        instructions: 'x',
        tools: ['query_records'],
        allowedObjects: ['contract'],
      });
      const refused = await t.http.delete('/api/v1/objects/contract').set(asAdmin(t)).expect(409);
      expect(refused.body).toMatchObject({ code: 'object_in_use', details: { agents: ['contracts_bot'] } });
      await t.http.get('/api/v1/objects/contract').set(asAdmin(t)).expect(200);
      await t.http.delete('/api/v1/ai/agents/contracts_bot').set(asAdmin(t)).expect(204);
      await t.http.delete('/api/v1/objects/contract').set(asAdmin(t)).expect(204);
    });

    describe('narrowing select options', () => {
      beforeAll(async () => {
        await createObject(t, 'ticket', [
          fieldSpec('priority', 'select', { options: ['low', 'high', 'urgent'] }),
          fieldSpec('tags', 'multiselect', { options: ['bug', 'ui', 'api'] }),
        ]);
        for (const record of [
          { priority: 'low', tags: ['bug'] },
          { priority: 'high', tags: ['bug', 'ui'] },
          { priority: 'high' },
        ]) {
          await t.http.post('/api/v1/objects/ticket/records').set(bearer(alice)).send(record).expect(201);
        }
      });

      it('answers 409 with the counts of records still using a removed select option', async () => {
        const res = await t.http
          .patch('/api/v1/objects/ticket/fields/priority')
          .set(asAdmin(t))
          .send({ options: ['low'] })
          .expect(409);
        expect(res.body).toMatchObject({ code: 'options_in_use', details: { inUse: { high: 2 } } });
        const field = (await t.http.get('/api/v1/objects/ticket').set(asAdmin(t)).expect(200)).body as {
          fields: Array<{ name: string; options?: string[] }>;
        };
        expect(field.fields.find((f) => f.name === 'priority')!.options).toEqual(['low', 'high', 'urgent']);
      });

      it('answers 409 for multiselect options still in use, and removes unused options', async () => {
        const res = await t.http
          .patch('/api/v1/objects/ticket/fields/tags')
          .set(asAdmin(t))
          .send({ options: ['api'] })
          .expect(409);
        expect(res.body).toMatchObject({ code: 'options_in_use', details: { inUse: { bug: 2, ui: 1 } } });
        const ok = await t.http
          .patch('/api/v1/objects/ticket/fields/tags')
          .set(asAdmin(t))
          .send({ options: ['bug', 'ui'] })
          .expect(200);
        expect((ok.body as { options: string[] }).options).toEqual(['bug', 'ui']);
        await t.http
          .patch('/api/v1/objects/ticket/fields/priority')
          .set(asAdmin(t))
          .send({ options: ['low', 'high'] })
          .expect(200);
      });

      it('refuses a select left with no options (400), on update as on create', async () => {
        const res = await t.http
          .patch('/api/v1/objects/ticket/fields/priority')
          .set(asAdmin(t))
          .send({ options: [] })
          .expect(400);
        expect((res.body as { code: string }).code).toBe('missing_options');
        await t.http
          .post('/api/v1/objects/ticket/fields')
          .set(asAdmin(t))
          .send({ name: 'stage', label: 'Stage', type: 'select', required: true, options: [] })
          .expect(400);
      });
    });
  });

  describe('tool calls per model step are capped (finding 4)', () => {
    const listCalls = (n: number) =>
      MockReply.toolCalls(Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: 'list_objects', arguments: {} })));

    it('runs the first 16 calls of a step by default and drops the rest, with one note the model reads', async () => {
      llm.enqueue(listCalls(40), MockReply.text('done'));
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(alice))
        .send({ messages: [{ role: 'user', content: 'go' }] })
        .expect(200);
      const { toolCalls } = res.body as ChatBody;
      expect(toolCalls.map((c) => c.isError)).toEqual(Array.from({ length: 16 }, () => false));
      const sent = llm.requests[1].body?.messages as SentMessage[];
      const first16 = Array.from({ length: 16 }, (_, i) => `c${i}`);
      expect(sent.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).toEqual(first16);
      const step = sent.find((m) => m.role === 'assistant' && m.tool_calls)!;
      expect(step.tool_calls!.map((c) => c.id)).toEqual(first16);
      expect(step.content).toContain('24 more tool calls of this step were dropped without running: at most 16 run per step');
    });

    it("honours the agent's planning.maxToolCallsPerStep, in durable chats too", async () => {
      await createAgent(t, {
        name: 'frugal',
        label: 'Frugal',
        instructions: 'x',
        tools: ['list_objects'],
        planning: { maxIterations: 3, maxToolCallsPerStep: 2 },
      });
      await t.http
        .post('/api/v1/ai/agents')
        .set(bearer(t.adminKey))
        .send({
          name: 'greedy',
          label: 'Greedy',
          instructions: 'x',
          tools: ['list_objects'],
          planning: { maxIterations: 3, maxToolCallsPerStep: 65 },
        })
        .expect(400);
      llm.enqueue(listCalls(5), MockReply.text('done'));
      const res = await t.http.post('/api/v1/chats').set(bearer(alice)).send({ agent: 'frugal', message: 'go' }).expect(201);
      const id = (res.body as { id: string }).id;
      await waitForChat(t, id, hasStatus('waiting'), alice);
      const stored = (await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(alice)).expect(200)).body as {
        messages: Array<{ role: string; parts: Array<{ type: string; isError?: boolean }> }>;
      };
      const results = stored.messages.find((m) => m.role === 'tool')!.parts;
      expect(results.map((p) => p.isError)).toEqual([false, false]);
    });
  });

  describe('a model step of 3,000 tool calls still answers (calls past the cap are dropped, not blamed on the caller)', () => {
    const CALLS = 3_000;
    const CAP = 16;
    const manyCalls = () =>
      MockReply.toolCalls(Array.from({ length: CALLS }, (_, i) => ({ id: `call_${i}`, name: 'list_objects', arguments: {} })));

    /** The second model request holds the first CAP calls and their results, and the note about the rest. */
    function expectCappedSecondRequest(): void {
      const sent = llm.requests[1].body?.messages as SentMessage[];
      const withCalls = sent.filter((m) => m.role === 'assistant' && m.tool_calls);
      expect(withCalls).toHaveLength(1);
      expect(withCalls[0].tool_calls).toHaveLength(CAP);
      expect(withCalls[0].content).toContain(`${CALLS - CAP} more tool calls of this step were dropped`);
      expect(sent.filter((m) => m.role === 'tool')).toHaveLength(CAP);
    }

    it('answers a stateless chat (200) and sends the model back at most the cap of calls, with the note', async () => {
      llm.enqueue(manyCalls(), MockReply.text('Here is what I found.'));
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(alice))
        .send({ messages: [{ role: 'user', content: 'list everything, many times' }] });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ content: 'Here is what I found.', finishReason: 'stop' });
      expect((res.body as ChatBody).toolCalls).toHaveLength(CAP);
      expect(llm.requests).toHaveLength(2);
      expectCappedSecondRequest();
    });

    it("never answers with the note: a turn whose budget ends after such a step answers with the model's own text", async () => {
      await createAgent(t, {
        name: 'spent',
        label: 'Spent',
        instructions: 'x',
        tools: ['list_objects'],
        guardrails: { maxExecutionTimeSec: 30, maxTokensPerInvocation: 300 },
      });
      const step = manyCalls();
      llm.enqueue({ ...step, content: 'Looking it up.', usage: { prompt_tokens: 290, completion_tokens: 10 } });
      const res = await t.http
        .post('/api/v1/ai/agents/spent/chat')
        .set(bearer(alice))
        .send({ messages: [{ role: 'user', content: 'go' }] })
        .expect(200);
      expect(res.body).toMatchObject({ content: 'Looking it up.', finishReason: 'length' });
      expect(llm.requests).toHaveLength(1);
    });

    it('answers a durable chat (waiting) and stores only the calls that ran, with the note', async () => {
      llm.enqueue(manyCalls(), MockReply.text('Here is what I found.'));
      const res = await t.http.post('/api/v1/chats').set(bearer(alice)).send({ agent: 'data_chat', message: 'go' }).expect(201);
      const id = (res.body as { id: string }).id;
      const chat = (await waitForChat(t, id, hasStatus('waiting', 'error'), alice)) as { status: string; lastError?: unknown };
      expect(chat).toMatchObject({ status: 'waiting' });
      expectCappedSecondRequest();
      const stored = (await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(alice)).expect(200)).body as {
        messages: Array<{ role: string; parts: Array<{ type: string; text?: string }> }>;
      };
      const parts = stored.messages.flatMap((m) => m.parts);
      expect(parts.filter((p) => p.type === 'tool-call')).toHaveLength(CAP);
      expect(parts.filter((p) => p.type === 'tool-result')).toHaveLength(CAP);
      expect(parts.some((p) => p.type === 'text' && p.text!.includes(`${CALLS - CAP} more tool calls`))).toBe(true);
      expect(parts.at(-1)).toEqual({ type: 'text', text: 'Here is what I found.' });
    });
  });

  describe('bodies with many keys are refused before any transformation (finding 3)', () => {
    const manyKeys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 1]));

    beforeAll(async () => {
      await createObject(t, 'gadget', [fieldSpec('title', 'text')]);
    });

    it.each([
      [
        'a where of the aggregate route',
        '/api/v1/objects/deal/aggregate',
        { where: manyKeys(99_000), aggregations: [{ function: 'count', alias: 'n' }] },
      ],
      [
        'the options of a chat',
        '/api/v1/ai/agents/data_chat/chat',
        { messages: [{ role: 'user', content: 'x' }], options: manyKeys(99_000) },
      ],
      ['the arguments of a tool call', '/api/v1/ai/tools/query_records/execute', { arguments: manyKeys(5_000) }],
    ])('answers 400 for an object of too many keys in %s', async (_label, path, body) => {
      const res = await t.http.post(path).set(bearer(alice)).send(body).expect(400);
      expect(res.body).toMatchObject({ code: 'validation_failed', details: { maxKeys: 1000 } });
      expect(llm.requests).toHaveLength(0);
    });

    it('lets an object of 1,000 keys through to its route', async () => {
      const res = await t.http
        .post('/api/v1/objects/gadget/aggregate')
        .set(bearer(alice))
        .send({ where: manyKeys(1_000), aggregations: [{ function: 'count', alias: 'n' }] })
        .expect(400);
      // The where compiler's own answer, not the body limit: the body reached the route.
      expect((res.body as { code: string }).code).toBe('unknown_field');
    });
  });

  describe('errors the framework answers itself have the { error, code } body (finding 14)', () => {
    let port: number;

    /** The one error shape: a JSON body of a message, a snake_case code and nothing else but details. */
    function expectErrorBody(res: RawResponse, status: number, code: string): void {
      expect({ status: res.status, contentType: res.headers['content-type'] }).toEqual({
        status,
        contentType: 'application/json; charset=utf-8',
      });
      const body = JSON.parse(res.body) as Record<string, unknown>;
      expect(body).toMatchObject({ error: expect.stringMatching(/\S/) as unknown, code });
      expect(body.code).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
      expect(Object.keys(body).filter((key) => !['error', 'code', 'details'].includes(key))).toEqual([]);
    }

    const request = (head: string, body = '') => `${head}\r\n\r\n${body}`;
    const get = (path: string, headers = 'Host: x\r\nConnection: close') => request(`GET ${path} HTTP/1.1\r\n${headers}`);
    const postObject = (contentType: string, body: string) =>
      request(
        `POST /api/v1/objects HTTP/1.1\r\nHost: x\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\nConnection: close`,
        body,
      );

    beforeAll(async () => {
      port = await listenOnLoopback(t.app.getHttpServer());
    });
    afterAll(async () => {
      await new Promise((resolve) => t.app.getHttpServer().close(resolve));
    });

    it(`answers a path parameter longer than ${MAX_PATH_PARAM_LENGTH} characters with 414 uri_too_long`, async () => {
      const auth = `Authorization: Bearer ${alice}\r\nHost: x\r\nConnection: close`;
      const res = await sendRaw(port, get(`/api/v1/objects/${'a'.repeat(MAX_PATH_PARAM_LENGTH + 1)}/records`, auth));
      expectErrorBody(res, 414, 'uri_too_long');
      expect(JSON.parse(res.body)).toMatchObject({ details: { maxLength: MAX_PATH_PARAM_LENGTH } });
      expect(res.headers['x-request-id']).toMatch(/\S/);
      // At the limit the route runs and gives its own answer.
      const atLimit = await sendRaw(port, get(`/api/v1/objects/${'a'.repeat(MAX_PATH_PARAM_LENGTH)}/records`, auth));
      expectErrorBody(atLimit, 404, 'object_not_found');
    });

    it('answers a malformed percent-encoding in the path with 400 invalid_url', async () => {
      expectErrorBody(await sendRaw(port, get('/api/v1/objects/%E0%A4%A/records')), 400, 'invalid_url');
      expectErrorBody(await sendRaw(port, get('/docs/%zz')), 400, 'invalid_url');
    });

    it.each([
      ['a control character in a header value', get('/health', 'Host: x\r\nX-Note: a\x01b\r\nConnection: close')],
      ['a space in a header name', get('/health', 'Host: x\r\nX Note: b\r\nConnection: close')],
      ['a header line without a colon', get('/health', 'Host: x\r\nX-Note\r\nConnection: close')],
      ['a space in the request target', get('/he alth')],
      ['an invalid method token', request('G(ET /health HTTP/1.1\r\nHost: x\r\nConnection: close')],
      ['an unknown HTTP version', request('GET /health HTTP/9.9\r\nHost: x\r\nConnection: close')],
      ['a request target without a leading slash', get('health')],
      [
        'a Content-Length that is not a number',
        request(
          'POST /api/v1/objects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: two\r\nConnection: close',
          '{}',
        ),
      ],
      [
        'two different Content-Lengths',
        request(
          'POST /api/v1/objects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\nConnection: close',
          '{}',
        ),
      ],
      [
        'Transfer-Encoding together with Content-Length',
        request(
          'POST /api/v1/objects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\nConnection: close',
          '2\r\n{}\r\n0\r\n\r\n',
        ),
      ],
      [
        'a malformed chunk size',
        request(
          'POST /api/v1/objects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close',
          'zz\r\n{}\r\n0\r\n\r\n',
        ),
      ],
      ['an HTTP/1.1 request without Host', get('/health', 'Connection: close')],
    ])('answers %s with 400 malformed_request', async (_label, bytes) => {
      expectErrorBody(await sendRaw(port, bytes), 400, 'malformed_request');
    });

    it('names what the parser refused, and still serves an HTTP/1.0 request without Host', async () => {
      const res = await sendRaw(port, get('/health', 'Host: x\r\nX-Note: a\x01b\r\nConnection: close'));
      expect(JSON.parse(res.body)).toMatchObject({ error: 'The request is not valid HTTP: Invalid header value char' });
      expect((await sendRaw(port, request('GET /health HTTP/1.0'))).status).toBe(200);
    });

    it('answers request headers over 16 KB with 431 headers_too_large', async () => {
      const res = await sendRaw(port, get('/health', `Host: x\r\nX-Big: ${'a'.repeat(20_000)}\r\nConnection: close`));
      expectErrorBody(res, 431, 'headers_too_large');
    });

    it('answers an Expect it cannot meet with 417 expectation_failed, and still meets 100-continue', async () => {
      const refused = await sendRaw(port, get('/health', 'Host: x\r\nExpect: teapot\r\nConnection: close'));
      expectErrorBody(refused, 417, 'expectation_failed');
      const body = '{"arguments":{}}';
      const res = await sendRaw(
        port,
        request(
          `POST /api/v1/ai/tools/list_objects/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close`,
          body,
        ),
      );
      expect(res.status).toBe(200);
    });

    it('answers CONNECT, which Node would drop without a word, with 404 route_not_found', async () => {
      const res = await sendRaw(port, request('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443'));
      expectErrorBody(res, 404, 'route_not_found');
    });

    it.each([
      ['an unknown route', 404, 'route_not_found', get('/nope')],
      [
        'a method the route does not take',
        404,
        'route_not_found',
        request('DELETE /health HTTP/1.1\r\nHost: x\r\nConnection: close'),
      ],
      [
        'a method Fastify does not route',
        404,
        'route_not_found',
        request('TRACE /health HTTP/1.1\r\nHost: x\r\nConnection: close'),
      ],
      ['a body over 2 MB', 413, 'payload_too_large', postObject('text/plain', 'a'.repeat(3_000_000))],
      ['a content type without a parser', 415, 'unsupported_media_type', postObject('application/octet-stream', 'hi')],
      ['a malformed content type', 415, 'unsupported_media_type', postObject(';;;', '{}')],
    ])('answers %s with %i %s', async (_label, status, code, bytes) => {
      expectErrorBody(await sendRaw(port, bytes), status, code);
    });

    it('answers a request that did not arrive in time with 408 request_timeout', async () => {
      // Node reports it as a clientError with this code after headersTimeout (60 s); raised here on a real connection.
      const server = t.app.getHttpServer();
      const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
      const connection = RawConnection.open(port);
      connection.write('GET /health HTTP/1.1\r\nHost: x\r\n');
      const timeout = Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
      server.emit('clientError', timeout, await accepted);
      const [res] = await connection.closed;
      expectErrorBody(res, 408, 'request_timeout');
    });

    it('answers a request that arrives while the server shuts down with 503 shutting_down', async () => {
      const s = await startTestApp();
      let closing: Promise<void> | undefined;
      try {
        await createObject(s, 'gauge', [fieldSpec('level', 'integer')]);
        const id = idOf(
          await s.http.post('/api/v1/objects/gauge/records').set(bearer(s.adminKey)).send({ level: 1 }).expect(201),
        );
        const serverPort = await listenOnLoopback(s.app.getHttpServer());
        // A PATCH waiting for a row lock keeps its connection busy while the server starts to close.
        await s.sql('begin');
        await s.sql('select 1 from data.gauge where id = $1 for update', [id]);
        const connection = RawConnection.open(serverPort);
        const body = '{"level":2}';
        connection.write(
          request(
            `PATCH /api/v1/objects/gauge/records/${id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.adminKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}`,
            body,
          ),
        );
        while (
          !(await s.sql<{ waiting: boolean }>('select exists (select 1 from pg_locks where not granted) as waiting'))[0].waiting
        ) {
          await sleep(10);
        }
        closing = s.close();
        while (s.app.getHttpServer().listening) await sleep(5);
        connection.write(get('/health', 'Host: x'));
        await sleep(100);
        await s.sql('commit');
        const [patched, refused] = await connection.closed;
        expect(patched.status).toBe(200);
        expectErrorBody(refused, 503, 'shutting_down');
        expect(refused.headers.connection).toBe('close');
      } finally {
        if (closing) await closing;
        else await s.close();
      }
    });

    it('closes a connection that never sent a request when the server shuts down, rather than waiting for it', async () => {
      // Node stops timing such connections out once closing begins; an HTTP client leaves one after an aborted request.
      const s = await startTestApp();
      const server = s.app.getHttpServer();
      const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
      const connection = RawConnection.open(await listenOnLoopback(server));
      await accepted;
      await s.close();
      expect(await connection.closed).toEqual([]);
    });
  });
});
