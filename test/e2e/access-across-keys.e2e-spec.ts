import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatListResponse, ChatMessageResponse, ChatMessagesResponse } from '../../src/chats/durable/chat.dto';
import type { UiChatMessagesResponse } from '../../src/chats/durable/ui-chat.dto';
import type { OpenAiErrorBody } from '../../src/openai-compat/openai-errors';
import type { QueryRecordsResult } from '../../src/tools/data-tools/query-records.tool';
import { parsedContent, sentMessages, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { eventually, hasStatus, listen, SseClient, waitForChat, type SseEvent } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { createTestDatabase } from '../support/test-database';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { textOf, uiChat } from '../support/ui-chat';

const UI_API = '/api/v1/ai/agents/data_chat/chats';
const WITHHELD = { withheld: true, reason: 'access_changed' };
/** What the model reads for a withheld data result: it keeps its number in the chat, so later results' numbers stay. */
const WITHHELD_CONTENT = 'result withheld: produced under other access (r1)';
const ALL_DEALS = { objectName: 'deal', limit: 50 };
/** The deals' amounts (hidden from the narrower key): none of them may appear in what it gets. */
const AMOUNTS = [0, 1, 2, 3, 4, 5].map((i) => 777_000.25 + i);
const showsAmount = (value: unknown) => AMOUNTS.some((amount) => JSON.stringify(value).includes(String(amount)));
const FORM_TOOL = {
  name: 'show_form',
  description: 'Show a form.',
  inputSchema: { type: 'object', properties: { title: { type: 'string' } } },
};

type ToolResultPart = { type: 'tool-result'; toolCallId: string; output?: unknown; withheld?: boolean };

/** The tool-result parts of a chat's messages, by tool call id. */
function resultsById(messages: ChatMessageResponse[]): Record<string, ToolResultPart> {
  const parts = messages.flatMap((m) => m.parts as ToolResultPart[]).filter((p) => p.type === 'tool-result');
  return Object.fromEntries(parts.map((p) => [p.toolCallId, p]));
}

/** The tool messages the model received in request `index`, by tool call id. */
function toolMessages(llm: MockLlmServer, index: number): Record<string, SentMessage> {
  return Object.fromEntries(
    sentMessages(llm, index)
      .filter((m) => m.role === 'tool')
      .map((m) => [m.tool_call_id!, m]),
  );
}

/**
 * Two keys of one person (subject `pat`): `wide` has every member right, `narrow` is under a policy that
 * shows pat's own deals only, without `amount`, and not the `secret_note` object. A chat belongs to its
 * subject, so both see it; what each turn does and what each key is shown must follow its own access.
 */
describe('a chat turn runs as the key that posted it (access across keys of one subject)', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let wide: CreatedApiKeyResponse;
  let narrow: CreatedApiKeyResponse;

  const messagesOf = async (key: string, id: string) =>
    bodyOf<ChatMessagesResponse>(await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(key)).expect(200)).messages;

  async function member(name: string, subject: string, policies: string[] = []): Promise<CreatedApiKeyResponse> {
    return createApiKey(t, { name, role: 'member', subject, policies });
  }

  /** A durable chat of `key` whose first turn ran query_records over every deal (tool call `callId`). */
  async function chatWithDeals(key: string, callId: string): Promise<string> {
    llm.enqueue(MockReply.toolCalls([{ id: callId, name: 'query_records', arguments: ALL_DEALS }]), MockReply.text('Six deals.'));
    const id = idOf(
      await t.http.post('/api/v1/chats').set(bearer(key)).send({ agent: 'data_chat', message: 'deals?' }).expect(201),
    );
    await waitForChat(t, id, hasStatus('waiting', 'error'), key);
    return id;
  }

  /** Ids of the deals of the other person: outside the narrower key's filter. */
  const sams = async () => (await t.sql<{ id: string }>(`select id from data.deal where owner = 'sam'`)).map((r) => r.id);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { CHAT_POLL_INTERVAL_MS: '200', SSE_KEEPALIVE_MS: '1000' } }));
    baseUrl = await listen(t);
    await createObject(t, 'deal', [fieldSpec('title', 'text'), fieldSpec('owner', 'text'), fieldSpec('amount', 'currency')]);
    await createObject(t, 'secret_note', [fieldSpec('note', 'text')]);
    for (let i = 0; i < 6; i++) {
      const deal = { title: `deal ${i}`, owner: i % 2 ? 'sam' : 'pat', amount: AMOUNTS[i] };
      await t.http.post('/api/v1/objects/deal/records').set(asAdmin(t)).send(deal).expect(201);
    }
    await t.http.post('/api/v1/objects/secret_note/records').set(asAdmin(t)).send({ note: 'the board meets friday' }).expect(201);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'own-deals', objects: { deal: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount'] } } })
      .expect(201);
    wide = await member('pat laptop', 'pat');
    narrow = await member('pat kiosk', 'pat', ['own-deals']);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  it('withholds the stored results of a wider key from a narrower key of the same subject (GET /chats, GET …/messages, resumed streams)', async () => {
    const id = await chatWithDeals(wide.secret, 'c_wide');
    // The chat is the subject's: the narrower key lists it ...
    const listed = bodyOf<ChatListResponse>(await t.http.get('/api/v1/chats').set(bearer(narrow.secret)).expect(200));
    expect(listed.chats.map((c) => c.id)).toContain(id);
    // ... but does not get what the wider key's tool returned.
    const asNarrow = await messagesOf(narrow.secret, id);
    expect(resultsById(asNarrow).c_wide).toEqual({
      type: 'tool-result',
      toolCallId: 'c_wide',
      toolName: 'query_records',
      isError: false,
      ...WITHHELD,
      resultRef: 'r1',
    });
    expect(showsAmount(asNarrow)).toBe(false);
    // The key that produced them still gets them whole.
    const output = resultsById(await messagesOf(wide.secret, id)).c_wide.output as QueryRecordsResult;
    expect(output.records).toHaveLength(6);

    // A stream read from the start (?afterId) and one resumed with Last-Event-ID withhold them the same way.
    const userMessageId = asNarrow[0].id;
    for (const [path, headers] of [
      [`/api/v1/chats/${id}/stream?afterId=0&until=idle`, {}],
      [`/api/v1/chats/${id}/stream?until=idle`, { 'Last-Event-ID': String(userMessageId) }],
    ] as const) {
      const stream = await SseClient.open(baseUrl, path, narrow.secret, headers);
      await stream.waitForEnd();
      const streamed = stream.of('message').map((e) => e.data as unknown as ChatMessageResponse);
      expect(resultsById(streamed).c_wide).toMatchObject(WITHHELD);
      expect(showsAmount(streamed)).toBe(false);
    }
  });

  it('withholds the answer a wider key’s turn wrote (its text, live and stored, its tool arguments and grounding) from a narrower key', async () => {
    const id = await chatWithDeals(wide.secret, 'c_first');
    // Both keys follow the chat; the wider key's next turn filters on the hidden field and names an amount.
    const wideStream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, wide.secret);
    const narrowStream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream`, narrow.secret);
    /** The turn ran and settled: a `running` status, then `waiting`. */
    const settled = (events: SseEvent[]) => {
      const running = events.findIndex((e) => e.event === 'status' && e.data?.status === 'running');
      return running >= 0 && events.slice(running).some((e) => e.event === 'status' && e.data?.status === 'waiting');
    };
    const answer = `The largest deal is ${AMOUNTS[5]} and the smallest ${AMOUNTS[0]}.`;
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'c_big', name: 'query_records', arguments: { ...ALL_DEALS, where: { amount: { $gt: AMOUNTS[4] } } } },
      ]),
      MockReply.text(answer, { chunkDelayMs: 20 }),
    );
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(wide.secret)).send({ message: 'largest?' }).expect(202);
    await wideStream.waitFor(settled);
    await narrowStream.waitFor(settled);
    wideStream.close();
    narrowStream.close();
    // The text as the model wrote it reached the wider key's stream only.
    expect(
      wideStream
        .of('message_part')
        .map((e) => (e.data as unknown as { delta: string }).delta)
        .join(''),
    ).toBe(answer);
    expect(narrowStream.of('message_part')).toEqual([]);
    for (const messages of [
      narrowStream.of('message').map((e) => e.data as unknown as ChatMessageResponse),
      await messagesOf(narrow.secret, id),
    ]) {
      expect(showsAmount(messages)).toBe(false);
      expect(JSON.stringify(messages)).not.toContain('"amount"');
      const texts = messages
        .filter((m) => m.role === 'assistant')
        .flatMap((m) => (m.parts as Array<{ type: string; text?: string }>).filter((p) => p.type === 'text'));
      expect(texts.length).toBeGreaterThan(0);
      for (const part of texts) expect(part.text).toMatch(/^\[answer withheld/);
      expect(messages.some((m) => m.metadata?.grounding)).toBe(false);
    }
    // The wider key still reads its own answer whole.
    expect(JSON.stringify(await messagesOf(wide.secret, id))).toContain(answer);
  });

  it('runs the next turn as the key that posts it: no hidden field, row outside its filter or unreadable object reaches the model or the client', async () => {
    const id = await chatWithDeals(wide.secret, 'c_before');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'c_mine', name: 'query_records', arguments: ALL_DEALS },
        { id: 'c_secret', name: 'query_records', arguments: { objectName: 'secret_note' } },
      ]),
      MockReply.text('Your deals.'),
    );
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(narrow.secret)).send({ message: 'and mine?' }).expect(202);
    await waitForChat(t, id, hasStatus('waiting', 'error'), narrow.secret);

    // The turn's first model call: the wider key's earlier result is not sent again.
    const first = sentMessages(llm, 2);
    expect(toolMessages(llm, 2).c_before.content).toBe(WITHHELD_CONTENT);
    expect(showsAmount(first)).toBe(false);
    // Its tools ran as the narrower key: pat's deals only, no amount, no secret note.
    const results = toolMessages(llm, 3);
    const page = parsedContent<QueryRecordsResult>(results.c_mine);
    expect(page.records.map((r) => r.owner)).toEqual(['pat', 'pat', 'pat']);
    expect(page.records.every((r) => !('amount' in r))).toBe(true);
    expect(results.c_secret.content).toMatch(/^Tool call failed: .*object_not_found/);
    const sent = JSON.stringify(sentMessages(llm, 3));
    expect(showsAmount(sent)).toBe(false);
    expect(sent).not.toContain('board meets');
    for (const samsDeal of await sams()) expect(sent).not.toContain(samsDeal);

    // Each key is shown the results produced under its own access only.
    const asNarrow = resultsById(await messagesOf(narrow.secret, id));
    expect(asNarrow.c_before).toMatchObject(WITHHELD);
    expect((asNarrow.c_mine.output as QueryRecordsResult).records).toHaveLength(3);
    const asWide = resultsById(await messagesOf(wide.secret, id));
    expect(asWide.c_mine).toMatchObject(WITHHELD);
    expect((asWide.c_before.output as QueryRecordsResult).records).toHaveLength(6);
    // The turn's message and the chat row name the key that posted it.
    const [row] = await t.sql<{ key_id: string; turn_key_id: string }>(
      `select m.key_id, c.turn_key_id from chat_messages m join chats c on c.id = m.chat_id
        where m.chat_id = $1 and m.role = 'user' order by m.id desc limit 1`,
      [id],
    );
    expect(row).toEqual({ key_id: narrow.id, turn_key_id: narrow.id });
  });

  it('runs a useChat turn under a client-chosen chat id as the key that posts it, and withholds the other key’s results', async () => {
    const id = 'pat-shared-chat';
    llm.enqueue(
      MockReply.toolCalls([{ id: 'c_ui_wide', name: 'query_records', arguments: ALL_DEALS }]),
      MockReply.text('Six deals.'),
    );
    const wideChat = uiChat(baseUrl, UI_API, wide.secret, { id });
    await wideChat.sendMessage({ text: 'deals?' });
    expect(textOf(wideChat.messages[1])).toBe('Six deals.');

    llm.enqueue(
      MockReply.toolCalls([{ id: 'c_ui_narrow', name: 'query_records', arguments: ALL_DEALS }]),
      MockReply.text('Yours.'),
    );
    const narrowChat = uiChat(baseUrl, UI_API, narrow.secret, { id });
    await narrowChat.sendMessage({ text: 'and mine?' });
    expect(narrowChat.error).toBeUndefined();
    expect(textOf(narrowChat.messages[1])).toBe('Yours.');
    expect(toolMessages(llm, 2).c_ui_wide.content).toBe(WITHHELD_CONTENT);
    const page = parsedContent<QueryRecordsResult>(toolMessages(llm, 3).c_ui_narrow);
    expect(page.records.map((r) => r.owner)).toEqual(['pat', 'pat', 'pat']);
    expect(showsAmount(sentMessages(llm, 3))).toBe(false);
    // The turn's stream showed the narrower key nothing of the wider key's result either.
    expect(showsAmount(narrowChat.messages)).toBe(false);

    const history = bodyOf<UiChatMessagesResponse>(
      await t.http.get(`${UI_API}/${id}/messages`).set(bearer(narrow.secret)).expect(200),
    ).messages;
    const parts = history.flatMap((m) => m.parts) as Array<{ toolCallId?: string; state?: string; output?: unknown }>;
    expect(parts.find((p) => p.toolCallId === 'c_ui_wide')).toMatchObject({ state: 'output-available', output: WITHHELD });
    expect(showsAmount(history)).toBe(false);
  });

  it('goes on with a turn as the key that posts its client tool results: the earlier results are withheld from its model calls and its resumed useChat stream', async () => {
    const id = 'pat-form-chat';
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'c_ui_before', name: 'query_records', arguments: ALL_DEALS },
        { id: 'c_ui_form', name: 'show_form', arguments: { title: 'Region?' } },
      ]),
    );
    await uiChat(baseUrl, UI_API, wide.secret, { id, body: { dynamicTools: [FORM_TOOL] } }).sendMessage({ text: 'deals?' });
    const [{ id: chatId }] = await t.sql<{ id: string }>(`select id from chats where client_id = $1`, [id]);
    await waitForChat(t, chatId, hasStatus('requires_action'), narrow.secret);

    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    llm.enqueue(async () => {
      await released;
      return MockReply.text('EMEA.');
    });
    await t.http
      .post(`/api/v1/chats/${chatId}/tool-results`)
      .set(bearer(narrow.secret))
      .send({ results: [{ toolCallId: 'c_ui_form', output: 'EMEA' }] })
      .expect(204);
    await llm.waitForRequests(2);
    // The rest of the turn runs as the narrower key: the model gets the form's answer, not the wider key's rows.
    expect(toolMessages(llm, 1).c_ui_before.content).toBe(WITHHELD_CONTENT);
    expect(toolMessages(llm, 1).c_ui_form.content).toBe('EMEA');
    expect(showsAmount(sentMessages(llm, 1))).toBe(false);

    // A page of the narrower key reattaches to the running turn: its stream, from the turn's start, withholds them too.
    const resumed = await fetch(`${baseUrl}${UI_API}/${id}/stream`, { headers: bearer(narrow.secret) });
    expect(resumed.status).toBe(200);
    const text = resumed.text();
    release();
    const chunks = (await text)
      .split('\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice('data: '.length)) as { type: string; toolCallId?: string; output?: unknown });
    const outputs = Object.fromEntries(
      chunks.filter((c) => c.type === 'tool-output-available').map((c): [string, unknown] => [c.toolCallId!, c.output]),
    );
    expect(outputs).toEqual({ c_ui_before: WITHHELD, c_ui_form: 'EMEA' });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish' });
    expect(showsAmount(chunks)).toBe(false);
  });

  it('withholds stored results from GET …/messages and from the model once the key’s policy narrows', async () => {
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'deal-reader', objects: { deal: { read: true } } })
      .expect(201);
    const kim = await member('kim', 'kim', ['deal-reader']);
    const id = await chatWithDeals(kim.secret, 'c_yesterday');
    expect(showsAmount(await messagesOf(kim.secret, id))).toBe(true);

    await t.http
      .put('/api/v1/policies/deal-reader')
      .set(asAdmin(t))
      .send({ objects: { deal: { read: true, hiddenFields: ['amount'] } } })
      .expect(200);
    const after = await messagesOf(kim.secret, id);
    expect(resultsById(after).c_yesterday).toMatchObject(WITHHELD);
    expect(showsAmount(after)).toBe(false);

    llm.enqueue(MockReply.text('Noted.'));
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(kim.secret)).send({ message: 'again?' }).expect(202);
    await waitForChat(t, id, hasStatus('waiting', 'error'), kim.secret);
    expect(toolMessages(llm, 2).c_yesterday.content).toBe(WITHHELD_CONTENT);
    expect(showsAmount(sentMessages(llm, 2))).toBe(false);
  });

  it('answers a key at its quota 429 on every door, before anything is stored (durable, useChat, stateless, /v1)', async () => {
    const key = await member('quota', 'quota-person');
    // A chat waiting for a client tool, and a useChat chat waiting for its next message.
    llm.enqueue(MockReply.toolCalls([{ id: 'c_form', name: 'show_form', arguments: { title: 'Region?' } }]));
    const paused = idOf(
      await t.http
        .post('/api/v1/chats')
        .set(bearer(key.secret))
        .send({ agent: 'data_chat', message: 'form?', dynamicTools: [FORM_TOOL] })
        .expect(201),
    );
    await waitForChat(t, paused, hasStatus('requires_action'), key.secret);
    llm.enqueue(MockReply.text('Hello.'));
    await uiChat(baseUrl, UI_API, key.secret, { id: 'quota-chat' }).sendMessage({ text: 'hi' });
    const [{ id: waiting }] = await t.sql<{ id: string }>(`select id from chats where client_id = 'quota-chat'`);

    await t.http.patch(`/api/v1/api-keys/${key.id}`).set(asAdmin(t)).send({ tokensPerDay: 0 }).expect(200);
    const stored = async () =>
      (await t.sql<{ n: string }>(`select (select count(*) from chats) + (select count(*) from chat_messages) as n`))[0].n;
    const before = await stored();
    const asked = llm.requests.length;
    const uiMessage = (text: string) => ({ id: `m-${text}`, role: 'user', parts: [{ type: 'text', text }] });
    const doors = {
      'POST /api/v1/chats': t.http.post('/api/v1/chats').set(bearer(key.secret)).send({ agent: 'data_chat', message: 'hi' }),
      'POST /api/v1/chats/:id/messages': t.http
        .post(`/api/v1/chats/${waiting}/messages`)
        .set(bearer(key.secret))
        .send({ message: 'again' }),
      'POST /api/v1/chats/:id/tool-results': t.http
        .post(`/api/v1/chats/${paused}/tool-results`)
        .set(bearer(key.secret))
        .send({ results: [{ toolCallId: 'c_form', output: 'EMEA' }] }),
      'useChat, a new chat': t.http
        .post(UI_API)
        .set(bearer(key.secret))
        .send({ id: 'quota-new', trigger: 'submit-message', messages: [uiMessage('new')] }),
      'useChat, its next message': t.http
        .post(UI_API)
        .set(bearer(key.secret))
        .send({ id: 'quota-chat', trigger: 'submit-message', messages: [uiMessage('next')] }),
      'POST …/agents/:agentName/chat': t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(key.secret))
        .send({ messages: [{ role: 'user', content: 'hi' }] }),
    };
    for (const [door, request] of Object.entries(doors)) {
      const res = await request;
      expect([door, res.status]).toEqual([door, 429]);
      expect(errorOf(res).code).toBe('quota_exceeded');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    const openai = await t.http
      .post('/v1/chat/completions')
      .set(bearer(key.secret))
      .send({ model: 'data_chat', messages: [{ role: 'user', content: 'hi' }] });
    expect(openai.status).toBe(429);
    expect(bodyOf<OpenAiErrorBody>(openai).error.code).toBe('quota_exceeded');

    expect(await stored()).toBe(before);
    expect(llm.requests).toHaveLength(asked);
    const statuses = await t.sql<{ status: string }>(`select status from chats where id = any($1::uuid[]) order by status`, [
      [paused, waiting],
    ]);
    expect(statuses.map((s) => s.status)).toEqual(['requires_action', 'waiting']);
  });
});

/** Revocation reaches every turn of the key, whichever replica holds it: nothing of it runs afterwards. */
describe('a revoked key’s turns stop (key_revoked) on every replica', () => {
  const FAST = { CHAT_POLL_INTERVAL_MS: '100', CHAT_HEARTBEAT_INTERVAL_MS: '100' };

  async function chatRow(t: TestApp, id: string) {
    const [row] = await t.sql<{ status: string; last_error: { code: string } | null }>(
      `select status, last_error from chats where id = $1`,
      [id],
    );
    return row;
  }

  const roles = async (t: TestApp, id: string) =>
    (await t.sql<{ role: string }>(`select role from chat_messages where chat_id = $1 order by id`, [id])).map((r) => r.role);

  it('never calls the model for a queued turn of a key revoked before a worker claims it, nor for one revoked while another replica runs it', async () => {
    const database = await createTestDatabase();
    const llm = await MockLlmServer.start();
    const env = { ...FAST, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', LLM_MAX_RETRIES: '0' };
    // B takes requests and runs no chats; A, started later, is the only worker.
    const b = await startTestApp({ database, env: { ...env, CHAT_WORKER_ENABLED: 'false' } });
    let a: TestApp | undefined;
    try {
      const key = async (name: string) => await createApiKey(b, { name, role: 'member', subject: name });
      const queuedKey = await key('queued');
      const queued = idOf(
        await b.http.post('/api/v1/chats').set(bearer(queuedKey.secret)).send({ agent: 'data_chat', message: 'hi' }).expect(201),
      );
      // Revoked behind the server's back (no notification reaches any replica): the claim itself must notice.
      await b.sql(`update api_keys set revoked = true where id = $1`, [queuedKey.id]);

      a = await startTestApp({ database, env });
      const worker = a;
      await eventually(async () => (await chatRow(worker, queued)).status === 'error', 10_000);
      expect((await chatRow(worker, queued)).last_error).toMatchObject({ code: 'key_revoked' });
      expect(llm.requests).toHaveLength(0);
      expect(await roles(worker, queued)).toEqual(['user']);

      // Revoked through B while A's worker waits for the model: A cancels the call and runs nothing of it.
      const runningKey = await key('running');
      llm.enqueue(MockReply.toolCalls([{ id: 'c_late', name: 'list_objects', arguments: {} }], { delayMs: 5_000 }));
      const running = idOf(
        await b.http.post('/api/v1/chats').set(bearer(runningKey.secret)).send({ agent: 'data_chat', message: 'hi' }).expect(201),
      );
      await llm.waitForRequests(1);
      await b.http.delete(`/api/v1/api-keys/${runningKey.id}`).set(bearer(b.adminKey)).expect(204);
      await eventually(async () => (await chatRow(worker, running)).status === 'error');
      expect((await chatRow(worker, running)).last_error).toMatchObject({ code: 'key_revoked' });
      await eventually(() => llm.abortedRequests === 1);
      expect(llm.requests).toHaveLength(1);
      expect(await roles(worker, running)).toEqual(['user']);
      const audited = await worker.sql(`select 1 from audit_log where kind = 'tool' and chat_id = $1`, [running]);
      expect(audited).toEqual([]);
    } finally {
      await a?.close();
      await b.close();
      await llm.close();
      await database.drop();
    }
  });
  it('runs no tool call of a turn whose key was revoked through another replica while the model was answering', async () => {
    // A stateless turn: no chat row that a revocation could end, only the check before its tool calls.
    const database = await createTestDatabase();
    const llm = await MockLlmServer.start();
    const env = { OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', LLM_MAX_RETRIES: '0' };
    let a: TestApp | undefined = await startTestApp({ database, env });
    const b = await startTestApp({ database, env: { ...env, CHAT_WORKER_ENABLED: 'false' } });
    try {
      const runner = a;
      const key = await createApiKey(b, { name: 'revoked mid-turn', role: 'member', subject: 'revoked mid-turn' });
      llm.enqueue(MockReply.toolCalls([{ id: 'c_after', name: 'list_objects', arguments: {} }], { delayMs: 4_000 }));
      llm.enqueue(MockReply.text('never asked'));
      const turn = runner.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(key.secret))
        .send({ messages: [{ role: 'user', content: 'which objects are there?' }] })
        .then((res) => res);
      await llm.waitForRequests(1);
      await b.http.delete(`/api/v1/api-keys/${key.id}`).set(bearer(b.adminKey)).expect(204);
      // A has heard of it (its own authentication cache is cleared by the same notification) before the model answers.
      await eventually(async () => (await runner.http.get('/api/v1/objects').set(bearer(key.secret))).status === 401);
      const res = await turn;
      expect(res.status).toBe(401);
      expect(errorOf(res).code).toBe('key_revoked');
      expect(llm.requests).toHaveLength(1);
      // Tool calls are audited in batches, all written by the time the replica has shut down.
      await runner.close();
      a = undefined;
      expect(await b.sql(`select tool from audit_log where kind = 'tool' and key_id = $1`, [key.id])).toEqual([]);
    } finally {
      await b.close();
      await a?.close();
      await llm.close();
      await database.drop();
    }
  });

  it('ends a turn waiting for its client (requires_action) when its key is revoked: nothing more is asked of the model', async () => {
    const llm = await MockLlmServer.start();
    const t = await startTestApp({ env: { ...FAST, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k', LLM_MAX_RETRIES: '0' } });
    try {
      const key = await createApiKey(t, { name: 'waiting', role: 'member', subject: 'waiting' });
      const form = {
        name: 'show_form',
        description: 'Show a form to the user and return what they entered.',
        inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
      };
      llm.enqueue(MockReply.toolCalls([{ id: 'form_1', name: 'show_form', arguments: { title: 'x' } }]));
      const id = idOf(
        await t.http
          .post('/api/v1/chats')
          .set(bearer(key.secret))
          .send({ agent: 'data_chat', message: 'form please', dynamicTools: [form] })
          .expect(201),
      );
      await eventually(async () => (await chatRow(t, id)).status === 'requires_action');
      await t.http.delete(`/api/v1/api-keys/${key.id}`).set(bearer(t.adminKey)).expect(204);
      await eventually(async () => (await chatRow(t, id)).status === 'error');
      expect((await chatRow(t, id)).last_error).toMatchObject({ code: 'key_revoked' });
      expect(llm.requests).toHaveLength(1);
    } finally {
      await t.close();
      await llm.close();
    }
  });
});
