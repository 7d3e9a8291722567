import type { Chat } from '@ai-sdk/react';
import { typedOnly } from '../support/grounding';
import { lastAssistantMessageIsCompleteWithToolCalls, type UIMessage } from 'ai';
import { EventSource } from 'eventsource';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StreamTokenResponse } from '../../src/auth/stream-token.dto';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import type { UiChatMessagesResponse } from '../../src/chats/durable/ui-chat.dto';
import { parsedContent, sentMessages, startAppWithMockLlm } from '../support/agent-fixtures';
import { listen } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createAgent, createApiKey } from '../support/fixtures';
import { textOf, uiChat, waitUntil } from '../support/ui-chat';

const API = '/api/v1/ai/agents/data_chat/chats';
const FORM_TOOL = {
  name: 'show_form',
  description: 'Show a form to the user and return what they entered.',
  inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
};
const COUNT_DEALS = { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] };

type ToolPart = Extract<UIMessage['parts'][number], { toolCallId: string }>;
type UiChunk = Record<string, unknown> & { type: string };

/**
 * A browser's EventSource on `url`: no Authorization header (a page's EventSource cannot send one).
 * `chunks` fill as UI message parts arrive; `done` resolves at `[DONE]` and fails if the stream does.
 */
function browserStream(url: string): { chunks: UiChunk[]; done: Promise<UiChunk[]> } {
  const chunks: UiChunk[] = [];
  const source = new EventSource(url);
  const done = new Promise<UiChunk[]>((resolve, reject) => {
    source.onmessage = (event) => {
      const { data } = event as unknown as { data: string };
      if (data !== '[DONE]') return void chunks.push(JSON.parse(data) as UiChunk);
      source.close();
      resolve(chunks);
    };
    source.onerror = (event) => {
      source.close();
      reject(new Error(`the event stream failed: ${event.message ?? ''} (status ${event.code ?? '?'})`));
    };
  });
  return { chunks, done };
}

describe('durable chats through the AI SDK (useChat)', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let otherKey: string;
  let chatNumber = 0;
  /** A fresh client chat id per test: ids are the client's, and a test's chat must not meet another's. */
  const newId = () => `chat-${++chatNumber}-${Date.now().toString(36)}`;

  const history = async (id: string, key = t.adminKey) =>
    bodyOf<UiChatMessagesResponse>(await t.http.get(`${API}/${id}/messages`).set(bearer(key)).expect(200)).messages;
  const chatRow = async (clientId: string) =>
    (await t.sql<{ id: string; status: string }>(`select id, status from chats where client_id = $1`, [clientId]))[0];

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: { SEED: 'true', CHAT_POLL_INTERVAL_MS: '200', CHAT_HEARTBEAT_INTERVAL_MS: '100', SSE_KEEPALIVE_MS: '1000' },
    }));
    baseUrl = await listen(t);
    otherKey = (await createApiKey(t, { name: 'other', role: 'member', subject: 'someone-else' })).secret;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  it('answers with a built-in tool part and text, and GET .../messages is the same conversation', async () => {
    llm.enqueue(
      MockReply.toolCall('aggregate_data', COUNT_DEALS, { usage: { prompt_tokens: 10, completion_tokens: 2 } }),
      MockReply.text(['There are ', '2000 deals ', 'in total.'], { usage: { prompt_tokens: 20, completion_tokens: 5 } }),
    );
    const id = newId();
    const chat = uiChat(baseUrl, API, t.adminKey, { id });
    await chat.sendMessage({ text: 'How many deals?' });

    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    const answer = chat.messages[1];
    expect(textOf(answer)).toBe('There are 2000 deals in total.');
    expect(answer.parts.map((p) => p.type)).toEqual([
      'step-start',
      'tool-aggregate_data',
      'step-start',
      'text',
      'data-grounding',
    ]);
    expect(answer.parts[1]).toMatchObject({ state: 'output-available', input: COUNT_DEALS, output: { rows: [{ n: 2000 }] } });
    // "2000" comes from the tool's result: the answer is grounded.
    const grounding = typedOnly({
      numbers: 1,
      supported: [
        {
          text: '2000',
          toolCallId: (answer.parts[1] as { toolCallId: string }).toolCallId,
          row: 0,
          column: 'n',
          entityChecked: false,
        },
      ],
      unsupported: [],
    });
    expect(answer.parts[4]).toEqual({ type: 'data-grounding', data: grounding });
    expect(answer.metadata).toEqual({
      model: 'mock-model',
      finishReason: 'stop',
      usage: { promptTokens: 30, completionTokens: 7, totalTokens: 37 },
      grounding,
    });
    // Same ids too: the user message keeps the client's id, the answer's comes from the server in `start`.
    expect(await history(id)).toEqual(chat.messages);

    // The same chat through the chat API, under its server id, showing the client's id.
    const row = await chatRow(id);
    const viaApi = bodyOf<ChatResponse>(await t.http.get(`/api/v1/chats/${row.id}`).set(bearer(t.adminKey)).expect(200));
    expect(viaApi).toMatchObject({ clientId: id, status: 'waiting', agent: 'data_chat' });

    // A follow-up in the same Chat appends to the same durable chat.
    llm.enqueue(MockReply.text('Still 2000.'));
    await chat.sendMessage({ text: 'And now?' });
    expect(textOf(chat.messages[3])).toBe('Still 2000.');
    expect(
      sentMessages(llm, 2)
        .filter((m) => m.role !== 'system')
        .map((m) => m.role),
    ).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
    expect(await history(id)).toEqual(chat.messages);
  });

  it('fires onToolCall for a client tool only, continues with the output addToolOutput sends, and refuses it again', async () => {
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_count', name: 'aggregate_data', arguments: COUNT_DEALS },
        { id: 'call_form', name: 'show_form', arguments: { title: 'Region?' } },
      ]),
      MockReply.text('EMEA it is: 2000 deals.'),
    );
    const id = newId();
    const toolCalls: Array<{ toolName: string; toolCallId: string; input: unknown }> = [];
    const chat: Chat<UIMessage> = uiChat(baseUrl, API, t.adminKey, {
      id,
      body: { dynamicTools: [FORM_TOOL] },
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
      onToolCall: ({ toolCall }) => {
        toolCalls.push(toolCall);
        if (toolCall.toolName === 'show_form') {
          void chat.addToolOutput({ tool: 'show_form', toolCallId: toolCall.toolCallId, output: { region: 'EMEA' } });
        }
      },
    });
    await chat.sendMessage({ text: 'How many deals in my region?' });
    // On a time-out, the client's state says which side stopped: no request sent, a refused one, or no answer.
    const clientState = () =>
      JSON.stringify({
        status: chat.status,
        error: chat.error?.message,
        parts: chat.messages.map((m) => m.parts.map((p) => ('state' in p ? `${p.type}:${String(p.state)}` : p.type))),
      });
    await waitUntil(
      () => chat.status === 'ready' && textOf(chat.messages[1]) !== '',
      () => `the answer after the tool output: ${clientState()}`,
    );

    expect(chat.error).toBeUndefined();
    // The built-in call came with its result; only the client's own call asked the client to act.
    expect(toolCalls).toMatchObject([{ toolName: 'show_form', toolCallId: 'call_form', input: { title: 'Region?' } }]);
    const answer = chat.messages[1];
    expect(answer.parts.map((p) => p.type)).toEqual([
      'step-start',
      'tool-aggregate_data',
      'tool-show_form',
      'step-start',
      'text',
      'data-grounding',
    ]);
    expect(answer.parts[2]).toMatchObject({ state: 'output-available', output: { region: 'EMEA' } });
    expect(textOf(answer)).toBe('EMEA it is: 2000 deals.');
    const results = sentMessages(llm, 1).filter((m) => m.role === 'tool');
    expect(results.map((m) => m.tool_call_id)).toEqual(['call_count', 'call_form']);
    expect(parsedContent(results[1])).toEqual({ region: 'EMEA' });
    expect(await history(id)).toEqual(chat.messages);

    // What the transport sent after addToolOutput, once more: the chat no longer waits for it.
    const outputs = { ...answer, parts: answer.parts.slice(0, 3) };
    const again = await t.http
      .post(API)
      .set(bearer(t.adminKey))
      .send({ id, trigger: 'submit-message', messageId: answer.id, messages: [chat.messages[0], outputs] })
      .expect(409);
    expect(errorOf(again).code).toBe('chat_not_waiting_for_tools');
    expect(llm.requests).toHaveLength(2);
  });

  it('takes an output-error of a client tool as a failed call the model reads', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_form', name: 'show_form', arguments: { title: 'Region?' } }]),
      MockReply.text('Understood, no region.'),
    );
    const id = newId();
    const chat: Chat<UIMessage> = uiChat(baseUrl, API, t.adminKey, {
      id,
      body: { dynamicTools: [FORM_TOOL] },
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
      onToolCall: ({ toolCall }) => {
        void chat.addToolOutput({
          tool: 'show_form',
          toolCallId: toolCall.toolCallId,
          state: 'output-error',
          errorText: 'The user closed the form',
        });
      },
    });
    await chat.sendMessage({ text: 'Deals in my region?' });
    await waitUntil(() => chat.status === 'ready' && textOf(chat.messages[1]) !== '', 'the answer after the tool error');

    expect(sentMessages(llm, 1).at(-1)).toEqual({
      role: 'tool',
      tool_call_id: 'call_form',
      content: 'Tool call failed: The user closed the form',
    });
    expect(chat.messages[1].parts[1]).toMatchObject({ state: 'output-error', errorText: 'The user closed the form' });
    expect(await history(id)).toEqual(chat.messages);
  });

  it('resumes a running turn from its start in a new Chat, with the whole answer exactly once', async () => {
    const words = Array.from({ length: 12 }, (_, i) => `word${i} `);
    llm.enqueue(MockReply.toolCall('list_objects', {}, { delayMs: 300 }), MockReply.text(words, { chunkDelayMs: 120 }));
    const id = newId();
    const first = uiChat(baseUrl, API, t.adminKey, { id });
    const sending = first.sendMessage({ text: 'What objects exist?' });

    // A page reload while the first step runs: the history so far, then the stream; the answer's text streams to it live.
    await llm.waitForRequests(1);
    const early = uiChat(baseUrl, API, t.adminKey, { id, messages: await history(id) });
    const earlyDone = early.resumeStream();
    // Another one in the middle of the answer's text: that step comes whole when it commits.
    await waitUntil(() => textOf(first.messages[1]).length > 0, 'the first words of the answer');
    const late = uiChat(baseUrl, API, t.adminKey, { id, messages: await history(id) });
    const lateDone = late.resumeStream();
    await Promise.all([sending, earlyDone, lateDone]);

    const full = words.join('');
    const stored = await history(id);
    for (const chat of [first, early, late]) {
      expect(chat.error).toBeUndefined();
      expect(chat.status).toBe('ready');
      expect(textOf(chat.messages[1])).toBe(full);
      expect(chat.messages).toEqual(stored);
    }

    // Nothing runs now: 204, and a Chat that tries to resume stays ready with what it has.
    await t.http.get(`${API}/${id}/stream`).set(bearer(t.adminKey)).expect(204);
    const idle = uiChat(baseUrl, API, t.adminKey, { id, messages: stored });
    await idle.resumeStream();
    expect(idle.status).toBe('ready');
    expect(idle.error).toBeUndefined();
    expect(idle.messages).toEqual(stored);
  });

  it('resumes in a browser EventSource with ?token= (unbound, or bound to this chat); a token of another chat is 401', async () => {
    llm.enqueue(MockReply.text('The other chat.'));
    const otherId = newId();
    await uiChat(baseUrl, API, t.adminKey, { id: otherId }).sendMessage({ text: 'Another chat' });
    // The answer waits until both browsers listen: they must receive it live, whole and once.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const words = ['Streamed ', 'to ', 'a ', 'browser.'];
    llm.enqueue(async () => {
      await released;
      return MockReply.text(words, { chunkDelayMs: 20 });
    });
    const id = newId();
    const chat = uiChat(baseUrl, API, t.adminKey, { id });
    const sending = chat.sendMessage({ text: 'Hello from a page' });
    await llm.waitForRequests(2);

    const tokenFor = async (chatId?: string) =>
      bodyOf<StreamTokenResponse>(
        await t.http
          .post('/api/v1/stream-tokens')
          .set(bearer(t.adminKey))
          .send(chatId ? { chatId } : {})
          .expect(201),
      ).token;
    const refused = await t.http.get(`${API}/${id}/stream?token=${await tokenFor((await chatRow(otherId)).id)}`).expect(401);
    expect(errorOf(refused)).toEqual({ code: 'unauthorized', error: 'This stream token was made for another chat' });
    // A token of this chat does not open the other chat under its client id either, nor a client id with no chat.
    const bound = await tokenFor((await chatRow(id)).id);
    for (const path of [`${API}/${otherId}/stream`, `${API}/no-such-chat/stream`]) {
      await t.http.get(`${path}?token=${bound}`).expect(401);
    }

    const browsers = [
      browserStream(`${baseUrl}${API}/${id}/stream?token=${await tokenFor()}`),
      browserStream(`${baseUrl}${API}/${id}/stream?token=${bound}`),
    ];
    await waitUntil(() => browsers.every((b) => b.chunks.length > 0), 'both browser streams to open');
    release();
    await sending;
    for (const { done } of browsers) {
      const chunks = await done;
      expect(chunks[0]).toEqual({ type: 'start', messageId: chat.messages[1].id });
      const deltas = chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta as string);
      expect(deltas.join('')).toBe(words.join(''));
      expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    }
    expect(textOf(chat.messages[1])).toBe(words.join(''));

    // The turn is over: 204 for the token as for the key.
    await t.http.get(`${API}/${id}/stream?token=${bound}`).expect(204);
  });

  it("ends a turn's streams, the POST's and a resumed one, and the turn itself, when their key is revoked", async () => {
    const carol = await createApiKey(t, { name: 'carol', role: 'member', subject: 'carol' });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    llm.enqueue(async () => {
      await released;
      return MockReply.text('Nobody listens.');
    });
    const id = newId();
    const chat = uiChat(baseUrl, API, carol.secret, { id });
    const sending = chat.sendMessage({ text: 'Hello' });
    await llm.waitForRequests(1);
    const resumed = await fetch(`${baseUrl}${API}/${id}/stream`, { headers: bearer(carol.secret) });
    expect(resumed.status).toBe(200);
    const resumedText = resumed.text();

    await t.http.delete(`/api/v1/api-keys/${carol.id}`).set(bearer(t.adminKey)).expect(204);
    // Both streams end at once, before the turn does: cut off, no finish and no [DONE].
    const text = await resumedText;
    expect(text).toContain('"type":"start"');
    expect(text).not.toContain('[DONE]');
    await sending;
    expect(textOf(chat.messages[1])).toBe('');

    // The turn stops too (key_revoked): the model's late answer is never written.
    const deadline = Date.now() + 10_000;
    while ((await chatRow(id)).status !== 'error') {
      if (Date.now() > deadline) throw new Error('the turn of the revoked key did not stop');
      await sleep(50);
    }
    release();
    await sleep(200);
    const [stored] = await t.sql<{ roles: string[]; code: string }>(
      `select array(select role from chat_messages m where m.chat_id = c.id order by m.id) as roles, c.last_error->>'code' as code
         from chats c where c.client_id = $1`,
      [id],
    );
    expect(stored).toEqual({ roles: ['user'], code: 'key_revoked' });
  });

  it("is another key's 404 on all three routes, and that key's own chat under the same id stays its own", async () => {
    llm.enqueue(MockReply.toolCalls([{ id: 'call_form', name: 'show_form', arguments: { title: 'Region?' } }]));
    const id = newId();
    const mine = uiChat(baseUrl, API, t.adminKey, { id, body: { dynamicTools: [FORM_TOOL] } });
    await mine.sendMessage({ text: 'Mine' });
    expect((await chatRow(id)).status).toBe('requires_action');
    // Waiting for the client's tool: no turn runs.
    await t.http.get(`${API}/${id}/stream`).set(bearer(t.adminKey)).expect(204);

    const form = mine.messages[1].parts[1] as ToolPart;
    const outputs = {
      ...mine.messages[1],
      parts: [mine.messages[1].parts[0], { ...form, state: 'output-available', output: { region: 'EMEA' } }],
    };
    const asOther = [
      t.http.get(`${API}/${id}/messages`).set(bearer(otherKey)),
      t.http.get(`${API}/${id}/stream`).set(bearer(otherKey)),
      t.http
        .post(API)
        .set(bearer(otherKey))
        .send({ id, trigger: 'submit-message', messages: [mine.messages[0], outputs] }),
    ];
    for (const res of await Promise.all(asOther)) {
      expect(res.status).toBe(404);
      expect(errorOf(res).code).toBe('chat_not_found');
    }
    expect((await chatRow(id)).status).toBe('requires_action');

    llm.enqueue(MockReply.text('Yours.'));
    const theirs = uiChat(baseUrl, API, otherKey, { id });
    await theirs.sendMessage({ text: 'Theirs' });
    expect(textOf(theirs.messages[1])).toBe('Yours.');
    expect(await history(id, otherKey)).toEqual(theirs.messages);
    expect(await history(id)).toEqual(mine.messages);
  });

  it('refuses another agent under the same id (409 on POST, 404 on the GETs) and regenerate-message (400)', async () => {
    await createAgent(t, { name: 'helper', label: 'Helper', instructions: 'Help.', tools: ['list_objects'] });
    llm.enqueue(MockReply.text('Hi.'));
    const id = newId();
    const chat = uiChat(baseUrl, API, t.adminKey, { id });
    await chat.sendMessage({ text: 'Hello' });

    const other = '/api/v1/ai/agents/helper/chats';
    const send = (body: Record<string, unknown>, api = API) => t.http.post(api).set(bearer(t.adminKey)).send(body);
    const message = { id: 'm2', role: 'user', parts: [{ type: 'text', text: 'Again' }] };
    const mismatch = await send({ id, trigger: 'submit-message', messages: [message] }, other).expect(409);
    expect(errorOf(mismatch)).toMatchObject({ code: 'chat_agent_mismatch', details: { agent: 'data_chat' } });
    await t.http.get(`${other}/${id}/messages`).set(bearer(t.adminKey)).expect(404);
    await t.http.get(`${other}/${id}/stream`).set(bearer(t.adminKey)).expect(404);

    const regenerate = await send({ id, trigger: 'regenerate-message', messages: [chat.messages[0]] }).expect(400);
    expect(errorOf(regenerate).code).toBe('unsupported_trigger');
    expect(await history(id)).toEqual(chat.messages);
    expect(llm.requests).toHaveLength(1);
  });

  describe('client chat ids', () => {
    const body = (id: string) => ({
      id,
      trigger: 'submit-message',
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
    });

    it.each([
      ['of 129 characters', 'x'.repeat(129)],
      ['with a slash', 'a/b'],
      ['that is empty', ''],
    ])('refuses an id %s with 400 on every route', async (_name, id) => {
      const res = await t.http.post(API).set(bearer(t.adminKey)).send(body(id)).expect(400);
      expect(errorOf(res)).toMatchObject({ code: 'validation_failed', error: expect.stringContaining('id must be') as unknown });
      if (id) {
        for (const route of ['messages', 'stream']) {
          const get = await t.http
            .get(`${API}/${encodeURIComponent(id)}/${route}`)
            .set(bearer(t.adminKey))
            .expect(400);
          expect(errorOf(get).code).toBe('validation_failed');
        }
      }
      expect(llm.requests).toHaveLength(0);
    });

    it('takes an id of 128 characters', async () => {
      llm.enqueue(MockReply.text('Long id, fine.'));
      const id = 'x'.repeat(127) + Date.now().toString(36).slice(-1);
      const chat = uiChat(baseUrl, API, t.adminKey, { id });
      await chat.sendMessage({ text: 'hi' });
      expect(chat.error).toBeUndefined();
      expect(await history(id)).toEqual(chat.messages);
    });
  });
});

describe('durable useChat chats on two replicas', () => {
  const FAST = { CHAT_POLL_INTERVAL_MS: '100', CHAT_HEARTBEAT_INTERVAL_MS: '100' };

  it('streams to a client on one replica the turn that the worker of the other one runs', async () => {
    const { t: worker, llm } = await startAppWithMockLlm({ env: { ...FAST, SEED: 'true' } });
    // The client's replica runs no chats at all: whatever it streams, the other one produced.
    const front = await startTestApp({
      database: worker.database,
      env: { ...FAST, CHAT_WORKER_ENABLED: 'false', OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'k' },
    });
    try {
      const frontUrl = await listen(front);
      const words = Array.from({ length: 8 }, (_, i) => `part${i} `);
      llm.enqueue(MockReply.toolCall('aggregate_data', COUNT_DEALS), MockReply.text(words, { chunkDelayMs: 60 }));
      const id = 'replicated-chat';
      const chat = uiChat(frontUrl, API, front.adminKey, { id });
      const sending = chat.sendMessage({ text: 'How many deals?' });
      await waitUntil(() => textOf(chat.messages[1]).length > 0, 'the first words');
      const resumed = uiChat(frontUrl, API, front.adminKey, {
        id,
        messages: bodyOf<UiChatMessagesResponse>(
          await front.http.get(`${API}/${id}/messages`).set(bearer(front.adminKey)).expect(200),
        ).messages,
      });
      await Promise.all([sending, resumed.resumeStream()]);

      const stored = bodyOf<UiChatMessagesResponse>(
        await worker.http.get(`${API}/${id}/messages`).set(bearer(worker.adminKey)).expect(200),
      ).messages;
      for (const c of [chat, resumed]) {
        expect(c.error).toBeUndefined();
        expect(textOf(c.messages[1])).toBe(words.join(''));
        expect(c.messages).toEqual(stored);
      }
      expect(stored[1].parts[1]).toMatchObject({ type: 'tool-aggregate_data', output: { rows: [{ n: 2000 }] } });
    } finally {
      await front.close();
      await worker.close();
      await llm.close();
    }
  });
});
