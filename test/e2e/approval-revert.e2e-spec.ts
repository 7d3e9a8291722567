import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import type { ChangeSetResponse, HistoryResponse } from '../../src/history/history.dto';
import { parsedContent, sentMessages, startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply, type MockStep } from '../support/mock-llm.server';
import type { RecordedRequest } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

/**
 * An approved agent write is one change set, tied to its chat and tool call: the model reads its id, the
 * person can revert it as one (REST or by approving the agent's revert_change_set), and record_history tells
 * who changed what, as the asking key may read it.
 */
describe('approved agent writes as change sets', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: CreatedApiKeyResponse;
  let bob: string;

  const admin = () => bearer(t.adminKey);
  const qty = async (sku: string) =>
    (await t.sql<{ qty: number | null }>(`select qty::int as qty from data.item where sku = $1`, [sku]))[0]?.qty;
  const idOfSku = async (sku: string) =>
    (await t.sql<{ id: string }>(`select id::text from data.item where sku = $1`, [sku]))[0].id;

  /** The result the model last read for a tool call. */
  function resultIn(request: RecordedRequest, toolCallId: string): Record<string, unknown> {
    const messages = (request.body?.messages ?? []) as Array<{ role: string; tool_call_id?: string; content?: string }>;
    const message = messages.find((m) => m.role === 'tool' && m.tool_call_id === toolCallId);
    if (!message) throw new Error(`no result of ${toolCallId} in the request`);
    const text = message.content ?? '';
    return JSON.parse(text.startsWith('Tool call failed: ') ? text.slice('Tool call failed: '.length) : text) as Record<
      string,
      unknown
    >;
  }

  async function approveAll(chatId: string): Promise<ChatResponse> {
    const chat = await waitForChat(t, chatId, hasStatus('requires_approval', 'waiting', 'error'), alice.secret);
    expect(chat.status).toBe('requires_approval');
    for (const proposal of chat.requiredAction!.proposals) {
      await t.http
        .post(`/api/v1/chats/${chatId}/approvals`)
        .set(bearer(alice.secret))
        .send({ toolCallId: proposal.toolCallId, decision: 'approve', token: proposal.token })
        .expect(202);
    }
    return chat;
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { CHAT_POLL_INTERVAL_MS: '200' } }));
    await t.http
      .post('/api/v1/objects')
      .set(admin())
      .send({
        name: 'item',
        label: 'Item',
        fields: [
          { name: 'sku', label: 'SKU', type: 'text', required: true, unique: true },
          { name: 'qty', label: 'Quantity', type: 'integer' },
          { name: 'cost', label: 'Cost', type: 'currency' },
        ],
      })
      .expect(201);
    for (let i = 0; i < 4; i++) {
      await t.http
        .post('/api/v1/objects/item/records')
        .set(admin())
        .send({ sku: `s-${i}`, qty: i, cost: 10 })
        .expect(201);
    }
    const key = async (body: Record<string, unknown>) =>
      bodyOf<CreatedApiKeyResponse>(await t.http.post('/api/v1/api-keys').set(admin()).send(body).expect(201));
    alice = await key({ name: 'alice', role: 'member', subject: 'alice' });
    bob = (await key({ name: 'bob', role: 'member', subject: 'bob' })).secret;
    await t.http
      .post('/api/v1/policies')
      .set(admin())
      .send({ name: 'no-cost', objects: { item: { read: true, hiddenFields: ['cost'] } } })
      .expect(201);
    await t.http
      .post('/api/v1/ai/agents')
      .set(admin())
      .send({
        name: 'writer',
        label: 'Writer',
        instructions: 'You keep the items up to date.',
        tools: ['query_records', 'record_history', 'update_records', 'update_record', 'revert_change_set'],
        writes: { item: ['create', 'update', 'delete'] },
      })
      .expect(201);
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });
  beforeEach(() => llm.reset());

  it('makes one change set per approval, linked to its chat and tool call, that the person reverts as one', async () => {
    llm.enqueue(
      MockReply.toolCalls([
        {
          id: 'call_bulk',
          name: 'update_records',
          arguments: { objectName: 'item', where: { sku: { $in: ['s-1', 's-2'] } }, values: { qty: 50 } },
        },
      ]),
      MockReply.text('Both are at 50 now.'),
    );
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(alice.secret))
      .send({ agent: 'writer', message: 'Set them to 50' })
      .expect(201);
    const chatId = bodyOf<ChatResponse>(created).id;
    await approveAll(chatId);
    await waitForChat(t, chatId, hasStatus('waiting'), alice.secret);
    expect([await qty('s-1'), await qty('s-2')]).toEqual([50, 50]);
    // The model read the change set of its write.
    const seen = resultIn(llm.requests[llm.requests.length - 1], 'call_bulk');
    expect(seen).toMatchObject({ status: 'written', changeSetId: expect.stringMatching(/^[0-9a-f-]{36}$/) as unknown });
    const setId = seen.changeSetId as string;
    const set = bodyOf<ChangeSetResponse>(await t.http.get(`/api/v1/change-sets/${setId}`).set(bearer(alice.secret)).expect(200));
    expect(set).toMatchObject({ via: 'approval', chatId, toolCallId: 'call_bulk', records: 2, actor: 'self' });
    // Another member may not revert it; the person who approved it may, as one.
    expect(errorOf(await t.http.post(`/api/v1/change-sets/${setId}/revert`).set(bearer(bob)).expect(403)).code).toBe('forbidden');
    await t.http.post(`/api/v1/change-sets/${setId}/revert`).set(bearer(alice.secret)).expect(200);
    expect([await qty('s-1'), await qty('s-2')]).toEqual([1, 2]);
  });

  it('lets the agent propose revert_change_set, which only an approval carries out, itself a change set', async () => {
    const target = await idOfSku('s-3');
    const revertOf = (request: RecordedRequest): MockStep => {
      const { changeSetId } = resultIn(request, 'call_set');
      return MockReply.toolCalls([{ id: 'call_undo', name: 'revert_change_set', arguments: { changeSetId } }]);
    };
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_set', name: 'update_record', arguments: { objectName: 'item', recordId: target, values: { qty: 77 } } },
      ]),
      revertOf,
      MockReply.text('Undone.'),
    );
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(alice.secret))
      .send({ agent: 'writer', message: 'Set and undo' })
      .expect(201);
    const chatId = bodyOf<ChatResponse>(created).id;
    await approveAll(chatId);
    // The revert is a proposal first: nothing is undone before the person approves it.
    const waiting = await waitForChat(t, chatId, hasStatus('requires_approval', 'error'), alice.secret);
    const [undo] = waiting.requiredAction!.proposals;
    expect(undo).toMatchObject({
      tool: 'revert_change_set',
      changes: [{ id: target, before: { qty: 77 }, after: { qty: 3 } }],
    });
    expect(await qty('s-3')).toBe(77);
    await approveAll(chatId);
    await waitForChat(t, chatId, hasStatus('waiting'), alice.secret);
    expect(await qty('s-3')).toBe(3);
    const outcome = resultIn(llm.requests[llm.requests.length - 1], 'call_undo');
    expect(outcome).toMatchObject({ status: 'written', operation: 'revert' });
    const revert = bodyOf<ChangeSetResponse>(
      await t.http
        .get(`/api/v1/change-sets/${outcome.changeSetId as string}`)
        .set(bearer(alice.secret))
        .expect(200),
    );
    expect(revert).toMatchObject({ via: 'revert', reverts: outcome.reverted, chatId, toolCallId: 'call_undo' });
    const history = bodyOf<HistoryResponse>(
      await t.http.get(`/api/v1/objects/item/records/${target}/history`).set(bearer(alice.secret)),
    );
    expect(history.versions.slice(0, 2).map((v) => [v.via, v.changes.qty])).toEqual([
      ['revert', { before: 77, after: 3 }],
      ['approval', { before: 3, after: 77 }],
    ]);
  });

  it('answers "who changed it" with record_history as the asking key reads it, never a hidden field', async () => {
    const target = await idOfSku('s-0');
    await t.http.patch(`/api/v1/objects/item/records/${target}`).set(bearer(bob)).send({ qty: 9, cost: 999 }).expect(200);
    const reader = bodyOf<CreatedApiKeyResponse>(
      await t.http
        .post('/api/v1/api-keys')
        .set(admin())
        .send({ name: 'reader', role: 'member', subject: 'carol', policies: ['no-cost'] })
        .expect(201),
    );
    await t.http
      .post('/api/v1/ai/agents')
      .set(admin())
      .send({ name: 'historian', label: 'Historian', instructions: 'Answer from history.', tools: ['record_history'] })
      .expect(201);
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_hist', name: 'record_history', arguments: { objectName: 'item', recordId: target } }]),
      MockReply.text('Another user changed the quantity from {{r1.1.before}} to {{r1.1.after}}.'),
    );
    const res = await t.http
      .post('/api/v1/ai/agents/historian/chat')
      .set(bearer(reader.secret))
      .send({ messages: [{ role: 'user', content: 'Who changed s-0?' }] })
      .expect(200);
    const sent = sentMessages(llm, 1).find((m) => m.role === 'tool')!;
    const result = parsedContent<{ rows: Array<Record<string, unknown>> }>(sent);
    expect(result.rows[0]).toMatchObject({ field: 'qty', before: 0, after: 9, actor: 'other', via: 'api' });
    expect(JSON.stringify(result)).not.toContain('cost');
    expect(JSON.stringify(result)).not.toContain('999');
    expect(JSON.stringify(res.body)).toContain('from 0 to 9');
  });
});
