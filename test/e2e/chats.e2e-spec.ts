import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatListResponse, ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import { parsedContent, startAppWithMockLlm, sentMessages, sentToolNames } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { match } from '../support/matchers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { createAgent, createApiKey, DATA_CHAT_TOOLS } from '../support/fixtures';

const FORM_TOOL = {
  name: 'show_form',
  description: 'Show a form to the user and return what they entered.',
  inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
};

describe('durable chats', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let otherKey: string;

  const create = (body: Record<string, unknown>, key = t.adminKey) => t.http.post('/api/v1/chats').set(bearer(key)).send(body);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: {
        SEED: 'true',
        CHAT_POLL_INTERVAL_MS: '200',
        CHAT_HEARTBEAT_INTERVAL_MS: '100',
        CHAT_ACTION_TIMEOUT_MS: '60000',
        SSE_KEEPALIVE_MS: '1000',
      },
    }));
    baseUrl = await listen(t);
    otherKey = (await createApiKey(t, { name: 'other', role: 'member', subject: 'someone-else' })).secret;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('pauses for a client tool called beside a built-in one, then completes with both results seen by the model', async () => {
    llm.enqueue(
      MockReply.toolCalls([
        {
          id: 'call_builtin',
          name: 'aggregate_data',
          arguments: { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] },
        },
        { id: 'call_client', name: 'show_form', arguments: { title: 'Pick a region' } },
      ]),
      MockReply.text('Thanks, EMEA it is: 2000 deals.'),
    );
    const created = await create({
      agent: 'data_chat',
      message: 'How many deals in my region?',
      dynamicTools: [FORM_TOOL],
    }).expect(201);
    expect(created.body).toMatchObject({ status: 'pending', agent: 'data_chat' });
    const id = bodyOf<ChatResponse>(created).id;

    const paused = await waitForChat(t, id, hasStatus('requires_action'));
    expect(paused.pendingToolCalls).toEqual([{ id: 'call_client', name: 'show_form', arguments: { title: 'Pick a region' } }]);
    expect(sentToolNames(llm, 0)).toEqual([...DATA_CHAT_TOOLS, 'show_form']);

    const before = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200),
    ).messages;
    expect(before.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(before[2].parts[0]).toMatchObject({
      type: 'tool-result',
      toolCallId: 'call_builtin',
      isError: false,
      output: { rows: [{ n: 2000 }] },
    });

    await t.http
      .post(`/api/v1/chats/${id}/tool-results`)
      .set(bearer(t.adminKey))
      .send({ results: [{ toolCallId: 'call_client', output: { region: 'EMEA' } }] })
      .expect(204);
    const done = await waitForChat(t, id, hasStatus('waiting'));
    expect(done.pendingToolCalls).toBeUndefined();

    const seen = sentMessages(llm, 1).filter((m) => m.role === 'tool');
    expect(seen.map((m) => m.tool_call_id)).toEqual(['call_builtin', 'call_client']);
    expect(parsedContent<{ rows: Array<{ n: number }> }>(seen[0]).rows[0].n).toBe(2000);
    expect(parsedContent(seen[1])).toEqual({ region: 'EMEA' });
    const after = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200),
    ).messages;
    expect(after.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant']);
    expect(after[4].parts).toEqual([{ type: 'text', text: 'Thanks, EMEA it is: 2000 deals.' }]);
  });

  it('streams statuses, live text deltas and persisted messages, and resumes without loss', async () => {
    llm.enqueue(
      MockReply.toolCall('list_objects', {}),
      MockReply.text('Here are your objects and more words to stream', { chunkDelayMs: 5 }),
    );
    const created = await create({ agent: 'data_chat', message: 'What objects exist?' }).expect(201);
    const id = bodyOf<ChatResponse>(created).id;
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey);
    await stream.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));
    stream.close();
    const messages = stream.of('message');
    expect(messages.map((e) => e.data.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(messages.map((e) => Number(e.id))).toEqual(messages.map((e) => e.data.id));
    expect(
      stream
        .of('message_part')
        .map((e) => e.data.delta)
        .join(''),
    ).toBe('Here are your objects and more words to stream');

    // Resume after the second message: the rest, exactly once.
    const resumed = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey, {
      'last-event-id': String(messages[1].data.id),
    });
    await resumed.waitFor((events) => events.some((e) => e.event === 'status'));
    resumed.close();
    expect(resumed.of('message').map((e) => e.data.id)).toEqual(messages.slice(2).map((e) => e.data.id));
  });

  it('resumes a dropped stream mid-chat with every persisted message exactly once', async () => {
    llm.enqueue(
      { ...MockReply.toolCall('list_objects', {}), delayMs: 150 },
      { ...MockReply.toolCall('describe_object', { objectName: 'deal' }), delayMs: 150 },
      { ...MockReply.toolCall('describe_object', { objectName: 'account' }), delayMs: 150 },
      MockReply.text('finished'),
    );
    const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'explore' }).expect(201)).id;
    const first = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, t.adminKey);
    await first.waitFor((events) => events.filter((e) => e.event === 'message').length >= 2);
    first.close();
    const seen = first.of('message');
    const resumed = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream?afterId=${seen.at(-1)!.id}`, t.adminKey);
    await resumed.waitFor((events) => events.some((e) => e.event === 'status' && e.data.status === 'waiting'));
    resumed.close();
    const all = [...seen, ...resumed.of('message')].map((e) => e.data.id);
    const persisted = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)),
    ).messages.map((m: { id: number }) => m.id);
    expect(persisted).toHaveLength(8);
    expect(all).toEqual(persisted);
  });

  it('gives the model the whole history of a long chat, and GET /messages pages of 1000', async () => {
    llm.enqueue(MockReply.text('first'));
    const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'start' }).expect(201)).id;
    await waitForChat(t, id, hasStatus('waiting'));
    await t.sql(
      `insert into chat_messages (chat_id, role, parts)
       select $1::uuid, case when i % 2 = 0 then 'user' else 'assistant' end, jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'm' || i))
         from generate_series(1, 1200) as i`,
      [id],
    );
    llm.enqueue(MockReply.text('read it all'));
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'last' }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'));
    const sent = sentMessages(llm, 1).filter((m) => m.role !== 'system');
    expect(sent).toHaveLength(2 + 1200 + 1);
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'last' });
    const page = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).expect(200),
    ).messages;
    expect(page).toHaveLength(1000);
    const rest = bodyOf<ChatMessagesResponse>(
      await t.http
        .get(`/api/v1/chats/${id}/messages?afterId=${page.at(-1)!.id}`)
        .set(bearer(t.adminKey))
        .expect(200),
    ).messages;
    expect(rest).toHaveLength(2 + 1200 + 2 - 1000);
  });

  it('catches a stream up on a chat of more than a page, each message once and in order, then its status', async () => {
    llm.enqueue(MockReply.text('first'));
    const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'start' }).expect(201)).id;
    await waitForChat(t, id, hasStatus('waiting'));
    await t.sql(
      `insert into chat_messages (chat_id, role, parts)
       select $1::uuid, 'assistant', jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'm' || i))
         from generate_series(1, 1100) as i`,
      [id],
    );
    const persisted = (await t.sql<{ id: string }>(`select id from chat_messages where chat_id = $1 order by id`, [id])).map(
      (row) => Number(row.id),
    );
    for (const afterId of [0, persisted[600]]) {
      const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream?until=idle&afterId=${afterId}`, t.adminKey);
      await stream.waitForEnd();
      expect(stream.of('message').map((e) => e.data.id)).toEqual(persisted.filter((messageId) => messageId > afterId));
      expect(stream.events.filter((e) => e.event !== 'message').map((e) => [e.event, e.data.status])).toEqual([
        ['status', 'waiting'],
        ['end', 'waiting'],
      ]);
    }

    // Refused before the stream opens: another owner's chat, a chat that does not exist, an id that is no chat id.
    for (const [path, key] of [
      [id, otherKey],
      ['00000000-0000-4000-8000-000000000000', t.adminKey],
      ['not-a-chat', t.adminKey],
    ]) {
      const res = await t.http.get(`/api/v1/chats/${path}/stream`).set(bearer(key)).expect(404);
      expect(errorOf(res).code).toBe('chat_not_found');
    }
  });

  it("hides another owner's chat behind a 404", async () => {
    llm.enqueue(MockReply.text('hi'));
    const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'mine' }).expect(201)).id;
    await waitForChat(t, id, hasStatus('waiting'));
    for (const request of [
      t.http.get(`/api/v1/chats/${id}`),
      t.http.get(`/api/v1/chats/${id}/messages`),
      t.http.post(`/api/v1/chats/${id}/messages`).send({ message: 'x' }),
      t.http.post(`/api/v1/chats/${id}/interrupt`),
      t.http.post(`/api/v1/chats/${id}/tool-results`).send({ results: [{ toolCallId: 'a', output: 1 }] }),
    ]) {
      const res = await request.set(bearer(otherKey));
      expect(res.status).toBe(404);
      expect(errorOf(res).code).toBe('chat_not_found');
    }
    const list = await t.http.get('/api/v1/chats').set(bearer(otherKey)).expect(200);
    expect(bodyOf<ChatListResponse>(list).chats.map((c: { id: string }) => c.id)).not.toContain(id);
  });

  /** A chat paused in requires_action on `show_form` (call id `form_1`). */
  async function pausedChat(
    extraCalls: Array<{ id: string; name: string; arguments: Record<string, unknown> }> = [],
  ): Promise<string> {
    llm.enqueue(MockReply.toolCalls([{ id: 'form_1', name: 'show_form', arguments: { title: 'x' } }, ...extraCalls]));
    const id = bodyOf<ChatResponse>(
      await create({
        agent: 'data_chat',
        message: 'form please',
        dynamicTools: [FORM_TOOL, { ...FORM_TOOL, name: 'pick_date' }],
      }).expect(201),
    ).id;
    await waitForChat(t, id, hasStatus('requires_action'));
    return id;
  }

  describe('tool results', () => {
    it.each([
      ['an empty list', { results: [] }],
      ['no results field', {}],
      ['a result without toolCallId', { results: [{ output: 1 }] }],
      ['a result without output', { results: [{ toolCallId: 'form_1' }] }],
    ])('rejects %s with 400', async (_label, body) => {
      const id = await pausedChat();
      await t.http.post(`/api/v1/chats/${id}/tool-results`).set(bearer(t.adminKey)).send(body).expect(400);
      expect((await waitForChat(t, id, () => true)).status).toBe('requires_action');
      await t.http.post(`/api/v1/chats/${id}/interrupt`).set(bearer(t.adminKey)).expect(202);
    });

    it.each([
      ['a missing id', [{ toolCallId: 'form_1', output: 1 }]],
      [
        'an extra id',
        [
          { toolCallId: 'form_1', output: 1 },
          { toolCallId: 'date_1', output: 2 },
          { toolCallId: 'nope', output: 3 },
        ],
      ],
      [
        'a duplicate id',
        [
          { toolCallId: 'form_1', output: 1 },
          { toolCallId: 'form_1', output: 1 },
          { toolCallId: 'date_1', output: 2 },
        ],
      ],
    ])('rejects %s with 400 invalid_tool_results and keeps waiting', async (_label, results) => {
      const id = await pausedChat([{ id: 'date_1', name: 'pick_date', arguments: { title: 'When?' } }]);
      const res = await t.http.post(`/api/v1/chats/${id}/tool-results`).set(bearer(t.adminKey)).send({ results }).expect(400);
      expect(errorOf(res).code).toBe('invalid_tool_results');
      const chat = await waitForChat(t, id, () => true);
      expect(chat.status).toBe('requires_action');
      expect(chat.pendingToolCalls!.map((c: { id: string }) => c.id)).toEqual(['form_1', 'date_1']);
      await t.http.post(`/api/v1/chats/${id}/interrupt`).set(bearer(t.adminKey)).expect(202);
    });

    it('accepts null as a tool output', async () => {
      const id = await pausedChat();
      llm.enqueue(MockReply.text('nothing there'));
      await t.http
        .post(`/api/v1/chats/${id}/tool-results`)
        .set(bearer(t.adminKey))
        .send({ results: [{ toolCallId: 'form_1', output: null }] })
        .expect(204);
      await waitForChat(t, id, hasStatus('waiting'));
      expect(sentMessages(llm, 1).find((m) => m.role === 'tool')!.content).toBe('null');
    });

    it('answers 409 when the chat is not waiting for tool results', async () => {
      llm.enqueue(MockReply.text('plain answer'));
      const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'hi' }).expect(201)).id;
      await waitForChat(t, id, hasStatus('waiting'));
      const res = await t.http
        .post(`/api/v1/chats/${id}/tool-results`)
        .set(bearer(t.adminKey))
        .send({ results: [{ toolCallId: 'x', output: 1 }] })
        .expect(409);
      expect(errorOf(res).code).toBe('chat_not_waiting_for_tools');
    });

    it('accepts exactly one of 20 concurrent posts', async () => {
      const id = await pausedChat();
      llm.enqueue(MockReply.text('done'));
      const posts = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          t.http
            .post(`/api/v1/chats/${id}/tool-results`)
            .set(bearer(t.adminKey))
            .send({ results: [{ toolCallId: 'form_1', output: { n: i } }] }),
        ),
      );
      const statuses = posts.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 204)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(19);
      await waitForChat(t, id, hasStatus('waiting'));
      const messages = bodyOf<ChatMessagesResponse>(
        await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)),
      ).messages;
      expect(messages.filter((m: { role: string }) => m.role === 'tool')).toHaveLength(1);
    });
  });

  describe('turns', () => {
    it('takes the next message of a chat as it is now, not as this replica saw it: changed client tools, another owner, deleted', async () => {
      llm.enqueue(MockReply.text('first answer'));
      const body = { agent: 'data_chat', message: 'first', dynamicTools: [FORM_TOOL] };
      const id = bodyOf<ChatResponse>(await create(body).expect(201)).id;
      await waitForChat(t, id, hasStatus('waiting'));
      // Changed by another door since this replica created it: the write refuses the tools it saw, and the turn
      // is admitted and written for the chat as it is.
      const renamed = { ...FORM_TOOL, name: 'show_other_form' };
      await t.sql(`update chats set dynamic_tools = $2::jsonb where id = $1`, [id, JSON.stringify([renamed])]);
      llm.enqueue(MockReply.text('second answer'));
      const asked = llm.requests.length;
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'second' }).expect(202);
      await waitForChat(t, id, hasStatus('waiting'));
      expect(sentToolNames(llm, asked)).toContain('show_other_form');
      expect(sentToolNames(llm, asked)).not.toContain('show_form');
      const other = await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(otherKey)).send({ message: 'mine?' });
      expect([other.status, errorOf(other).code]).toEqual([404, 'chat_not_found']);
      await t.http.delete(`/api/v1/chats/${id}`).set(bearer(t.adminKey)).expect(204);
      const gone = await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'third' });
      expect([gone.status, errorOf(gone).code]).toEqual([404, 'chat_not_found']);
      expect(llm.requests).toHaveLength(asked + 1);
    });

    it('answers 409 to a new message while the chat is pending, running or requires_action, and accepts it when waiting', async () => {
      llm.enqueue({ ...MockReply.text('slow answer'), delayMs: 400 });
      const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'first' }).expect(201)).id;
      const busy = await t.http
        .post(`/api/v1/chats/${id}/messages`)
        .set(bearer(t.adminKey))
        .send({ message: 'second' })
        .expect(409);
      expect(errorOf(busy).code).toBe('chat_busy');
      await waitForChat(t, id, hasStatus('running'));
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'second' }).expect(409);
      await waitForChat(t, id, hasStatus('waiting'));
      llm.enqueue(MockReply.text('second answer'));
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'second' }).expect(202);
      await waitForChat(t, id, hasStatus('waiting'));
      expect(
        sentMessages(llm, 1)
          .filter((m) => m.role !== 'system')
          .map((m) => m.content),
      ).toEqual(['first', 'slow answer', 'second']);

      const paused = await pausedChat();
      await t.http.post(`/api/v1/chats/${paused}/messages`).set(bearer(t.adminKey)).send({ message: 'x' }).expect(409);
    });

    it('interrupts a running model call and returns the chat to waiting', async () => {
      llm.enqueue(MockReply.hang());
      const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'never answered' }).expect(201)).id;
      await llm.waitForRequests(1);
      await t.http.post(`/api/v1/chats/${id}/interrupt`).set(bearer(t.adminKey)).expect(202);
      await waitForChat(t, id, hasStatus('waiting'));
      await sleep(200);
      expect(llm.requests[0].aborted).toBe(true);
      expect((await waitForChat(t, id, () => true)).status).toBe('waiting');
      // The chat takes the next message normally.
      llm.enqueue(MockReply.text('back'));
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'again' }).expect(202);
      await waitForChat(t, id, hasStatus('waiting'));
      const messages = bodyOf<ChatMessagesResponse>(
        await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)),
      ).messages;
      expect(messages.map((m: { role: string }) => m.role)).toEqual(['user', 'user', 'assistant']);
    });

    it('lets a run write only while the chat still carries its claim token', async () => {
      llm.enqueue({ ...MockReply.text('too late'), delayMs: 400 });
      const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'x' }).expect(201)).id;
      await llm.waitForRequests(1);
      // Another claim took the chat over while the model was answering.
      await t.sql(`update chats set claim_token = gen_random_uuid() where id = $1`, [id]);
      await sleep(800);
      const rows = await t.sql<{ role: string }>(`select role from chat_messages where chat_id = $1 order by id`, [id]);
      expect(rows.map((r) => r.role)).toEqual(['user']);
      expect((await waitForChat(t, id, () => true)).status).toBe('running');
      await t.http.post(`/api/v1/chats/${id}/interrupt`).set(bearer(t.adminKey)).expect(202);
    });

    it('retries a failing model call, then records the error with its code', async () => {
      llm.enqueue(
        MockReply.httpError(500, { message: 'upstream broke' }),
        MockReply.httpError(500, { message: 'upstream broke' }),
        MockReply.httpError(500, { message: 'upstream broke' }),
      );
      const id = bodyOf<ChatResponse>(await create({ agent: 'data_chat', message: 'x' }).expect(201)).id;
      const failed = await waitForChat(t, id, hasStatus('error'), t.adminKey, 20_000);
      expect(failed.lastError!.code).toBe('llm_unavailable');
      expect(llm.requests).toHaveLength(3);
      // From error, a new message starts a new turn.
      llm.enqueue(MockReply.text('recovered'));
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'retry please' }).expect(202);
      const ok = await waitForChat(t, id, hasStatus('waiting'));
      expect(ok.lastError).toBeNull();
    });
  });

  describe('client tool declarations', () => {
    it.each([
      ['a bad name', [{ ...FORM_TOOL, name: 'bad name!' }]],
      ['a 65-character name', [{ ...FORM_TOOL, name: 'a'.repeat(65) }]],
      ['duplicate names', [FORM_TOOL, FORM_TOOL]],
      ['more than 64 tools', Array.from({ length: 65 }, (_, i) => ({ ...FORM_TOOL, name: `tool_${i}` }))],
      ['a name shadowing an agent tool', [{ ...FORM_TOOL, name: 'query_records' }]],
      [
        'a schema that does not compile',
        [{ ...FORM_TOOL, inputSchema: { type: 'object', properties: { a: { type: 'not-a-type' } } } }],
      ],
      ['a missing schema', [{ name: 'x', description: 'y' }]],
      ['a schema on a custom tool', [{ type: 'custom', name: 'x', inputSchema: { type: 'object' } }]],
      ['not an array', { name: 'x' }],
    ])('rejects %s with 400', async (_label, dynamicTools) => {
      const res = await create({ agent: 'data_chat', message: 'x', dynamicTools }).expect(400);
      expect(errorOf(res).code).toMatch(/invalid_dynamic_tools|validation_failed/);
      expect(llm.requests).toHaveLength(0);
    });

    it('answers 404 for an unknown agent and 400 for a missing message', async () => {
      await create({ agent: 'nobody', message: 'x' }).expect(404);
      await create({ agent: 'data_chat' }).expect(400);
      await create({ agent: 'data_chat', message: 'x', tools: [] }).expect(400);
    });

    it('sends freeform tools as OpenAI custom tools and pauses on their calls with the raw text', async () => {
      llm.enqueue(
        MockReply.toolCalls([{ id: 'custom_1', type: 'custom', name: 'run_sql_in_ide', arguments: 'select 1;\nselect 2;' }]),
        MockReply.text('ran it'),
      );
      const id = bodyOf<ChatResponse>(
        await create({
          agent: 'data_chat',
          message: 'x',
          dynamicTools: [{ type: 'custom', name: 'run_sql_in_ide', description: 'Runs text in the IDE' }],
        }).expect(201),
      ).id;
      const paused = await waitForChat(t, id, hasStatus('requires_action'));
      expect(paused.pendingToolCalls).toEqual([{ id: 'custom_1', name: 'run_sql_in_ide', arguments: 'select 1;\nselect 2;' }]);
      const tools = llm.requests[0].body!.tools as unknown[];
      expect(tools.at(-1)).toEqual({ type: 'custom', custom: { name: 'run_sql_in_ide', description: 'Runs text in the IDE' } });
      await t.http
        .post(`/api/v1/chats/${id}/tool-results`)
        .set(bearer(t.adminKey))
        .send({ results: [{ toolCallId: 'custom_1', output: 'ok: 2 statements' }] })
        .expect(204);
      await waitForChat(t, id, hasStatus('waiting'));
      const replayed = sentMessages(llm, 1).find((m) => m.role === 'assistant')!;
      expect(replayed.tool_calls).toEqual([
        { id: 'custom_1', type: 'custom', custom: { name: 'run_sql_in_ide', input: 'select 1;\nselect 2;' } },
      ]);
    });

    it('lets an agent ask the user through ask_user', async () => {
      await createAgent(t, {
        name: 'curious',
        label: 'Curious',
        instructions: 'Ask when unsure.',
        tools: ['query_records', 'ask_user'],
      });
      llm.enqueue(MockReply.toolCall('ask_user', { question: 'Which quarter?' }), MockReply.text('Q3 it is'));
      const id = bodyOf<ChatResponse>(await create({ agent: 'curious', message: 'sales?' }).expect(201)).id;
      const paused = await waitForChat(t, id, hasStatus('requires_action'));
      expect(paused.pendingToolCalls).toEqual([
        { id: match.any(String), name: 'ask_user', arguments: { question: 'Which quarter?' } },
      ]);
      expect(sentToolNames(llm, 0)).toEqual(['query_records', 'ask_user']);
      await t.http
        .post(`/api/v1/chats/${id}/tool-results`)
        .set(bearer(t.adminKey))
        .send({ results: [{ toolCallId: paused.pendingToolCalls![0].id, output: 'Q3' }] })
        .expect(204);
      await waitForChat(t, id, hasStatus('waiting'));
      expect(sentMessages(llm, 1).find((m) => m.role === 'tool')!.content).toBe('Q3');
    });
  });

  it("sends action_required and status changes to the owner's watch stream only", async () => {
    const watch = await SseClient.open(baseUrl, '/api/v1/chats/watch', t.adminKey);
    const otherWatch = await SseClient.open(baseUrl, '/api/v1/chats/watch', otherKey);
    const id = await pausedChat();
    await watch.waitFor((events) => events.some((e) => e.event === 'action_required' && e.data.chatId === id));
    expect(watch.events.some((e) => e.event === 'created' && e.data.chatId === id)).toBe(true);
    await t.http.delete(`/api/v1/chats/${id}`).set(bearer(t.adminKey)).expect(204);
    await watch.waitFor((events) => events.some((e) => e.event === 'deleted' && e.data.chatId === id));
    watch.close();
    otherWatch.close();
    expect(otherWatch.events.filter((e) => e.data.chatId === id)).toEqual([]);
  });
});

describe('durable chats: requires_action expiry', () => {
  it('errors with tool_results_timeout and writes error results so the next turn has a valid history', async () => {
    const { t, llm } = await startAppWithMockLlm({
      env: { CHAT_ACTION_TIMEOUT_MS: '300', CHAT_HEARTBEAT_INTERVAL_MS: '100', CHAT_POLL_INTERVAL_MS: '200' },
    });
    try {
      llm.enqueue(MockReply.toolCalls([{ id: 'form_1', name: 'show_form', arguments: { title: 'x' } }]));
      const id = bodyOf<ChatResponse>(
        await t.http
          .post('/api/v1/chats')
          .set(bearer(t.adminKey))
          .send({ agent: 'data_chat', message: 'x', dynamicTools: [FORM_TOOL] })
          .expect(201),
      ).id;
      const failed = await waitForChat(t, id, hasStatus('error'));
      expect(failed.lastError!.code).toBe('tool_results_timeout');
      await t.http
        .post(`/api/v1/chats/${id}/tool-results`)
        .set(bearer(t.adminKey))
        .send({ results: [{ toolCallId: 'form_1', output: 1 }] })
        .expect(409);
      llm.enqueue(MockReply.text('sorry about that'));
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'still there?' }).expect(202);
      await waitForChat(t, id, hasStatus('waiting'));
      const sent = sentMessages(llm, 1);
      const toolMessage = sent.find((m) => m.role === 'tool')!;
      expect(toolMessage.tool_call_id).toBe('form_1');
      expect(toolMessage.content).toContain('tool_results_timeout');
      expect(sent.at(-1)).toEqual({ role: 'user', content: 'still there?' });
    } finally {
      await t.close();
      await llm.close();
    }
  });

  it('sends freeform tools as one-string functions when the endpoint lacks custom tools', async () => {
    const { t, llm } = await startAppWithMockLlm({
      env: { LLM_CUSTOM_TOOLS_AS_FUNCTIONS: 'true', CHAT_POLL_INTERVAL_MS: '200' },
    });
    try {
      llm.enqueue(MockReply.toolCall('patch_file', { input: 'line 1\nline 2' }));
      const id = bodyOf<ChatResponse>(
        await t.http
          .post('/api/v1/chats')
          .set(bearer(t.adminKey))
          .send({
            agent: 'data_chat',
            message: 'x',
            dynamicTools: [{ type: 'custom', name: 'patch_file', description: 'Apply a patch' }],
          })
          .expect(201),
      ).id;
      const paused = await waitForChat(t, id, hasStatus('requires_action'));
      expect(paused.pendingToolCalls![0].arguments).toBe('line 1\nline 2');
      const tools = llm.requests[0].body!.tools as unknown[];
      expect(tools.at(-1)).toMatchObject({
        type: 'function',
        function: { name: 'patch_file', parameters: { properties: { input: { type: 'string' } }, required: ['input'] } },
      });
    } finally {
      await t.close();
      await llm.close();
    }
  });
});
