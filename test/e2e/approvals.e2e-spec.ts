import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { AuditListResponse } from '../../src/audit/audit.dto';
import type { UiChatMessagesResponse } from '../../src/chats/durable/ui-chat.dto';
import type { ChatMessagesResponse, ChatResponse, WriteProposalResponse } from '../../src/chats/durable/chat.dto';
import type { Chat } from '@ai-sdk/react';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from 'ai';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApprovalExpiry } from '../../src/approvals/approval-expiry.service';
import { sentMessages, sentToolNames, startAppWithMockLlm } from '../support/agent-fixtures';
import { eventually, hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { textOf, uiChat, waitUntil } from '../support/ui-chat';
import { match } from '../support/matchers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

const SECRET = 'approval-secret-shared-by-every-replica-0123456789';
const WRITE_TOOLS = ['create_record', 'update_record', 'delete_record', 'update_records'];

type ToolPart = Extract<UIMessage['parts'][number], { toolCallId: string }>;

interface ToolError {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

/**
 * Writes with approval: the model's write tool calls become proposals; only a person's approval, with the
 * proposal's single-use token, writes anything, as the approving key, under If-Match.
 */
describe('writes with approval', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  /** The chats' owner: a member key with every member right. */
  let alice: CreatedApiKeyResponse;
  /** The same subject under a read-only policy: may see the chat, may not write. */
  let aliceReader: string;
  /** Another member. */
  let bob: string;

  const admin = () => bearer(t.adminKey);
  const records = async () =>
    t.sql<{ id: string; sku: string; qty: number | null }>(`select id::text, sku, qty::int as qty from data.item order by sku`);
  const item = async (sku: string) => (await records()).find((r) => r.sku === sku)!;
  const spentTokens = async () => Number((await t.sql<{ n: string }>(`select count(*) as n from approval_tokens`))[0].n);

  /** Starts a chat with the writer agent as alice; resolves once it waits for approval. */
  async function proposal(message = 'Change it'): Promise<{ id: string; chat: ChatResponse }> {
    const created = await t.http.post('/api/v1/chats').set(bearer(alice.secret)).send({ agent: 'writer', message }).expect(201);
    const id = bodyOf<ChatResponse>(created).id;
    const chat = await waitForChat(t, id, hasStatus('requires_approval', 'waiting', 'error'), alice.secret);
    return { id, chat };
  }

  let listening: Promise<string> | undefined;
  /** Where the app listens for clients that need a real URL (the AI SDK's Chat, the MCP SDK's client). */
  const baseUrl = () => (listening ??= listen(t));

  const decide = (chatId: string, body: Record<string, unknown>, key = alice.secret) =>
    t.http.post(`/api/v1/chats/${chatId}/approvals`).set(bearer(key)).send(body);

  /** The tool message the model read for this call in the last request it got. */
  function resultSeen(toolCallId: string): unknown {
    const last = llm.requests.length - 1;
    const message = sentMessages(llm, last).find((m) => m.role === 'tool' && m.tool_call_id === toolCallId);
    if (!message) throw new Error(`the model never read a result of ${toolCallId}`);
    const text = message.content ?? '';
    return JSON.parse(text.startsWith('Tool call failed: ') ? text.slice('Tool call failed: '.length) : text);
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: { APPROVAL_SECRET: SECRET, CHAT_POLL_INTERVAL_MS: '200', CHAT_HEARTBEAT_INTERVAL_MS: '100' },
    }));
    await t.http
      .post('/api/v1/objects')
      .set(admin())
      .send({
        name: 'item',
        label: 'Item',
        fields: [
          { name: 'sku', label: 'SKU', type: 'text', required: true, unique: true },
          { name: 'qty', label: 'Quantity', type: 'integer' },
        ],
      })
      .expect(201);
    for (let i = 0; i < 5; i++) {
      await t.http
        .post('/api/v1/objects/item/records')
        .set(admin())
        .send({ sku: `a-${i}`, qty: i })
        .expect(201);
    }
    await t.http
      .post('/api/v1/policies')
      .set(admin())
      .send({ name: 'item-reader', objects: { item: { read: true } } })
      .expect(201);
    const key = (body: Record<string, unknown>) =>
      t.http
        .post('/api/v1/api-keys')
        .set(admin())
        .send(body)
        .expect(201)
        .then((res) => bodyOf<CreatedApiKeyResponse>(res));
    alice = await key({ name: 'alice', role: 'member', subject: 'alice' });
    aliceReader = (await key({ name: 'alice-reader', role: 'member', subject: 'alice', policies: ['item-reader'] })).secret;
    bob = (await key({ name: 'bob', role: 'member', subject: 'bob' })).secret;
    await t.http
      .post('/api/v1/ai/agents')
      .set(admin())
      .send({
        name: 'writer',
        label: 'Writer',
        instructions: 'You keep the items up to date.',
        tools: ['query_records', 'get_record', ...WRITE_TOOLS],
        writes: { item: ['create', 'update', 'delete'] },
      })
      .expect(201);
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });
  beforeEach(() => llm.reset());

  it('refuses writes on objects that do not exist when an agent is defined', async () => {
    const res = await t.http
      .post('/api/v1/ai/agents')
      .set(admin())
      .send({ name: 'bad_writer', label: 'Bad', instructions: 'x', tools: ['update_record'], writes: { nope: ['update'] } })
      .expect(400);
    expect(errorOf(res).code).toBe('validation_failed');
    const ops = await t.http
      .post('/api/v1/ai/agents')
      .set(admin())
      .send({ name: 'bad_writer', label: 'Bad', instructions: 'x', tools: ['update_record'], writes: { item: ['truncate'] } })
      .expect(400);
    expect(errorOf(ops).code).toBe('validation_failed');
  });

  it('pauses an update for approval with a diff of the changed fields and the version the records API shows; writes it as the approver', async () => {
    const target = await item('a-1');
    const etag = (await t.http.get(`/api/v1/objects/item/records/${target.id}`).set(admin()).expect(200)).headers.etag;
    llm.enqueue(
      MockReply.toolCalls([
        {
          id: 'call_upd',
          name: 'update_record',
          arguments: { objectName: 'item', recordId: target.id, values: { qty: 42, sku: 'a-1' } },
        },
      ]),
      MockReply.text('Done: a-1 now has 42.'),
    );
    const { id, chat } = await proposal();
    expect(chat.status).toBe('requires_approval');
    expect(sentToolNames(llm, 0)).toEqual(['query_records', 'get_record', ...WRITE_TOOLS]);
    const [proposed] = chat.requiredAction!.proposals;
    expect(chat.requiredAction!.type).toBe('approval');
    expect(proposed).toMatchObject({
      toolCallId: 'call_upd',
      tool: 'update_record',
      arguments: { objectName: 'item', recordId: target.id, values: { qty: 42, sku: 'a-1' } },
      // sku does not change: only qty is in the diff.
      changes: [{ id: target.id, etag, before: { qty: 1 }, after: { qty: 42 } }],
    });
    expect(Date.parse(proposed.expiresAt) - Date.now()).toBeGreaterThan(800_000);
    expect((await item('a-1')).qty).toBe(1);

    await decide(id, { toolCallId: 'call_upd', decision: 'approve', token: proposed.token }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect((await item('a-1')).qty).toBe(42);
    expect(resultSeen('call_upd')).toMatchObject({
      status: 'written',
      operation: 'update',
      records: [{ id: target.id }],
      approvedBy: 'alice',
    });

    // The change feed shows the write as the approving key's.
    const feed = await t.http.get('/api/v1/objects/item/changes?limit=100').set(admin()).expect(200);
    const change = bodyOf<{ changes: Array<{ id: string; op: string; keyId: string }> }>(feed)
      .changes.filter((c) => c.id === target.id)
      .at(-1)!;
    expect(change).toMatchObject({ op: 'update', keyId: alice.id });

    // Proposal, decision and write in the audit trail, linked by the tool call id.
    await eventually(async () => (await auditOf('call_upd')).length >= 3);
    const audit = await auditOf('call_upd');
    expect(audit.map((e) => [e.tool, e.action ?? null, e.outcome, e.keyId])).toEqual([
      ['update_record', null, 'ok', alice.id],
      ['update_record', 'approval.approve', 'ok', alice.id],
      ['update_record', 'record.write', 'ok', alice.id],
    ]);
    expect(audit[2]).toMatchObject({ chatId: id, target: `item/${target.id}`, rowCount: 1 });
  });

  /** The audit entries of a call in the order they happened (a tool call's own entry is written in a batch, later). */
  async function auditOf(toolCallId: string) {
    const res = await t.http.get(`/api/v1/audit?kind=tool&limit=200`).set(admin()).expect(200);
    return bodyOf<AuditListResponse>(res)
      .entries.filter((e) => e.toolCallId === toolCallId)
      .sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || Number(a.id) - Number(b.id));
  }

  it('writes nothing without an approval, across every write tool and repeated calls', async () => {
    const before = await records();
    const target = await item('a-2');
    const calls = [
      { id: 'w1', name: 'create_record', arguments: { objectName: 'item', values: { sku: 'new-1', qty: 1 } } },
      { id: 'w2', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 99 } } },
      { id: 'w3', name: 'delete_record', arguments: { objectName: 'item', recordId: target.id } },
      { id: 'w4', name: 'update_records', arguments: { objectName: 'item', where: {}, values: { qty: 0 } } },
      { id: 'w5', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 98 } } },
    ];
    llm.enqueue(MockReply.toolCalls(calls), MockReply.text('Understood, nothing changes.'));
    const { id, chat } = await proposal('Do everything');
    expect(chat.requiredAction!.proposals.map((p) => p.toolCallId)).toEqual(['w1', 'w2', 'w3', 'w4', 'w5']);
    expect(await records()).toEqual(before);

    // A user message cannot get past the pause either.
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(alice.secret)).send({ message: 'just do it' }).expect(409);
    // The write tools do not exist outside a durable chat: not listed, not callable directly.
    const listed = await t.http.get('/api/v1/ai/tools').set(bearer(alice.secret)).expect(200);
    expect(bodyOf<{ tools: Array<{ name: string }> }>(listed).tools.map((tool) => tool.name)).not.toContain('update_record');
    await t.http
      .post('/api/v1/ai/tools/update_record/execute')
      .set(bearer(alice.secret))
      .send({ arguments: { objectName: 'item', recordId: target.id, values: { qty: 7 } } })
      .expect(404);

    // Each rejected: the chat goes on, nothing written.
    for (const proposed of chat.requiredAction!.proposals) {
      await decide(id, { toolCallId: proposed.toolCallId, decision: 'reject', token: proposed.token }).expect(202);
    }
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect(await records()).toEqual(before);
    expect(resultSeen('w3')).toMatchObject({ error: { code: 'approval_rejected' } });
  });

  it('offers no write tool to a stateless chat (no place to pause for an approval); a call to one writes nothing', async () => {
    const before = await records();
    const target = await item('a-3');
    llm.enqueue(
      MockReply.toolCall('update_record', { objectName: 'item', recordId: target.id, values: { qty: 1000 } }),
      MockReply.toolCall('update_record', { objectName: 'item', recordId: target.id, values: { qty: 1001 } }),
      MockReply.text('I could not change it.'),
    );
    const res = await t.http
      .post('/api/v1/ai/agents/writer/chat')
      .set(bearer(alice.secret))
      .send({ messages: [{ role: 'user', content: 'Set a-3 to 1000' }] })
      .expect(200);
    expect(sentToolNames(llm, 0)).toEqual(['query_records', 'get_record']);
    expect(bodyOf<{ toolCalls: Array<{ result: ToolError }> }>(res).toolCalls.map((c) => c.result.error.code)).toEqual([
      'tool_not_allowed',
      'tool_not_allowed',
    ]);
    expect(await records()).toEqual(before);

    expect(await records()).toEqual(before);
  });

  it('lists no write tool over MCP to a client that cannot confirm one; a call to one writes nothing', async () => {
    const before = await records();
    const target = await item('a-3');
    // No elicitation declared: nothing could ask the person, so there is nothing to approve with.
    const client = new Client({ name: 'approvals-e2e', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL('/mcp/agents/writer', await baseUrl()), {
        requestInit: { headers: bearer(alice.secret) },
      }),
    );
    try {
      expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(['get_record', 'query_records']);
      for (const name of WRITE_TOOLS) {
        const result = await client.callTool({
          name,
          arguments: { objectName: 'item', recordId: target.id, ids: [target.id], values: { qty: 1003 } },
        });
        expect(result.isError).toBe(true);
        expect(result.structuredContent).toMatchObject({ error: { code: 'tool_not_found' } });
      }
    } finally {
      await client.close();
    }
    // Nor on /mcp, which has no agent (and so no writes), even for a client that can confirm.
    const eliciting = new Client({ name: 'approvals-e2e', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    let elicited = 0;
    eliciting.setRequestHandler(ElicitRequestSchema, () => {
      elicited += 1;
      return { action: 'accept', content: { decision: 'approve' } };
    });
    await eliciting.connect(
      new StreamableHTTPClientTransport(new URL('/mcp', await baseUrl()), { requestInit: { headers: bearer(alice.secret) } }),
    );
    try {
      expect((await eliciting.listTools()).tools.map((tool) => tool.name).filter((name) => WRITE_TOOLS.includes(name))).toEqual(
        [],
      );
      const result = await eliciting.callTool({
        name: 'update_record',
        arguments: { objectName: 'item', recordId: target.id, values: { qty: 1003 } },
      });
      expect(result.structuredContent).toMatchObject({ error: { code: 'tool_not_found' } });
    } finally {
      await eliciting.close();
    }
    expect(elicited).toBe(0);
    expect(await records()).toEqual(before);
  });

  it('refuses forged, mismatched, replayed and unauthorised approvals with 403 approval_invalid, writing nothing', async () => {
    const a = await item('a-3');
    const b = await item('a-4');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'p_a', name: 'update_record', arguments: { objectName: 'item', recordId: a.id, values: { qty: 300 } } },
        { id: 'p_b', name: 'update_record', arguments: { objectName: 'item', recordId: b.id, values: { qty: 400 } } },
      ]),
      MockReply.text('ok'),
    );
    const { id, chat } = await proposal();
    const [pa, pb] = chat.requiredAction!.proposals;
    const before = await records();
    const spent = await spentTokens();
    const refused = async (body: Record<string, unknown>, key?: string) => {
      const res = await decide(id, body, key).expect(403);
      expect(errorOf(res).code).toBe('approval_invalid');
    };
    // Forged: a token of the right form with another signature.
    const [v, expiry] = pa.token.split('.');
    await refused({ toolCallId: 'p_a', decision: 'approve', token: `${v}.${expiry}.${'A'.repeat(43)}` });
    // Its expiry moved on: the signature no longer matches.
    await refused({
      toolCallId: 'p_a',
      decision: 'approve',
      token: pa.token.replace(`.${expiry}.`, `.${Number(expiry) + 1000}.`),
    });
    // The token of the other proposal (other arguments, another record).
    await refused({ toolCallId: 'p_a', decision: 'approve', token: pb.token });
    // Keys that may not make the write: the owner's read-only key, another member.
    await refused({ toolCallId: 'p_a', decision: 'approve', token: pa.token }, aliceReader);
    expect(await records()).toEqual(before);
    expect(await spentTokens()).toBe(spent);

    await decide(id, { toolCallId: 'p_a', decision: 'approve', token: pa.token }).expect(202);
    // Replayed: the same token again.
    await refused({ toolCallId: 'p_a', decision: 'approve', token: pa.token });
    expect((await item('a-3')).qty).toBe(300);
    expect(await spentTokens()).toBe(spent + 1);

    await decide(id, { toolCallId: 'p_b', decision: 'reject', token: pb.token, reason: 'not now' }).expect(202);
    await refused({ toolCallId: 'p_b', decision: 'approve', token: pb.token });
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect((await item('a-4')).qty).toBe(4);
  });

  it('lets the model read a rejection and its reason', async () => {
    const target = await item('a-0');
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_rej', name: 'delete_record', arguments: { objectName: 'item', recordId: target.id } }]),
      MockReply.text('I will leave it.'),
    );
    const { id, chat } = await proposal('Delete a-0');
    const [proposed] = chat.requiredAction!.proposals;
    expect(proposed.changes).toEqual([
      { id: target.id, etag: match.any(String), before: match.objectContaining({ sku: 'a-0' }), after: null },
    ]);
    await decide(id, { toolCallId: 'call_rej', decision: 'reject', token: proposed.token, reason: 'a-0 is still in use' }).expect(
      202,
    );
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect(resultSeen('call_rej')).toEqual({
      error: {
        code: 'approval_rejected',
        message: match.stringContaining('a-0 is still in use'),
        details: { reason: 'a-0 is still in use' },
      },
    });
    expect(await item('a-0')).toBeDefined();
  });

  it('writes nothing when the record changed after the proposal; the model reads version_changed with the current values', async () => {
    const target = await item('a-4');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_vc', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 5 } } },
      ]),
      MockReply.text('Someone changed it meanwhile.'),
    );
    const { id, chat } = await proposal();
    const [proposed] = chat.requiredAction!.proposals;
    await t.http.patch(`/api/v1/objects/item/records/${target.id}`).set(bearer(bob)).send({ qty: 77 }).expect(200);
    await decide(id, { toolCallId: 'call_vc', decision: 'approve', token: proposed.token }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect((await item('a-4')).qty).toBe(77);
    expect(resultSeen('call_vc')).toMatchObject({
      error: { code: 'version_changed', details: { records: [{ id: target.id, changed: true, current: { qty: 77 } }] } },
    });
    await eventually(async () => (await auditOf('call_vc')).some((e) => e.action === 'record.write'));
    expect((await auditOf('call_vc')).find((e) => e.action === 'record.write')).toMatchObject({ outcome: 'version_changed' });
  });

  it('changes up to 100 records of update_records in one transaction or none: one changed record writes none', async () => {
    const before = await records();
    const ids = before.map((r) => r.id);
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_many', name: 'update_records', arguments: { objectName: 'item', ids, values: { qty: 500 } } },
      ]),
      MockReply.text('One of them changed.'),
    );
    const { id, chat } = await proposal();
    const [proposed] = chat.requiredAction!.proposals;
    expect(proposed.changes.map((c) => c.id).sort()).toEqual([...ids].sort());
    // Another key edits one record between proposal and approval.
    await t.http.patch(`/api/v1/objects/item/records/${ids[2]}`).set(bearer(bob)).send({ qty: 3 }).expect(200);
    const now = await records();
    await decide(id, { toolCallId: 'call_many', decision: 'approve', token: proposed.token }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect(await records()).toEqual(now);
    const seen = resultSeen('call_many') as ToolError;
    expect(seen.error.code).toBe('version_changed');
  });

  it('refuses an update_records matching more than 100 records; approves one of 100 as a whole', async () => {
    for (let i = 0; i < 100; i++) {
      await t.http
        .post('/api/v1/objects/item/records')
        .set(admin())
        .send({ sku: `bulk-${String(i).padStart(3, '0')}`, qty: 1 })
        .expect(201);
    }
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_all', name: 'update_records', arguments: { objectName: 'item', where: {}, values: { qty: 2 } } },
      ]),
      MockReply.toolCalls([
        {
          id: 'call_bulk',
          name: 'update_records',
          arguments: { objectName: 'item', where: { sku: { $startsWith: 'bulk-' } }, values: { qty: 2 } },
        },
      ]),
      MockReply.text('Done.'),
    );
    const { id, chat } = await proposal('Set every bulk item to 2');
    // The model read that its first call matched too many records, and proposed a narrower one.
    expect(parsedFailure(sentMessages(llm, 1).find((m) => m.tool_call_id === 'call_all')!.content!)).toMatchObject({
      error: { code: 'too_many_records' },
    });
    const [proposed] = chat.requiredAction!.proposals;
    expect(proposed.toolCallId).toBe('call_bulk');
    expect(proposed.changes).toHaveLength(100);
    await decide(id, { toolCallId: 'call_bulk', decision: 'approve', token: proposed.token }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    const bulk = (await records()).filter((r) => r.sku.startsWith('bulk-'));
    expect(bulk.every((r) => r.qty === 2)).toBe(true);
    expect((resultSeen('call_bulk') as { records: unknown[] }).records).toHaveLength(100);
  });

  describe('a proposal larger than the tool output cap (16 KB)', () => {
    const longText = (c: string, n: number) => c.repeat(n);
    const notes = async () =>
      t.sql<{ id: string; title: string; body: string }>(`select id::text, title, body from data.note order by title`);

    beforeAll(async () => {
      await t.http
        .post('/api/v1/objects')
        .set(admin())
        .send({
          name: 'note',
          label: 'Note',
          fields: [
            { name: 'title', label: 'Title', type: 'text', required: true, unique: true },
            { name: 'body', label: 'Body', type: 'text' },
          ],
        })
        .expect(201);
      for (let i = 0; i < 40; i++) {
        await t.http
          .post('/api/v1/objects/note/records')
          .set(admin())
          .send({ title: `n-${String(i).padStart(2, '0')}`, body: longText('x', 400) })
          .expect(201);
      }
      await t.http
        .post('/api/v1/ai/agents')
        .set(admin())
        .send({
          name: 'noter',
          label: 'Noter',
          instructions: 'You keep the notes.',
          tools: ['query_records', ...WRITE_TOOLS],
          writes: { note: ['update'] },
        })
        .expect(201);
    });

    async function noteProposal(call: { id: string; name: string; arguments: Record<string, unknown> }) {
      llm.enqueue(MockReply.toolCalls([call]), MockReply.text('Decided.'));
      const created = await t.http
        .post('/api/v1/chats')
        .set(bearer(alice.secret))
        .send({ agent: 'noter', message: 'Rewrite' })
        .expect(201);
      const id = bodyOf<ChatResponse>(created).id;
      const chat = await waitForChat(t, id, hasStatus('requires_approval', 'waiting', 'error'), alice.secret);
      expect(chat.status).toBe('requires_approval');
      return { id, proposed: chat.requiredAction!.proposals[0] };
    }

    it('shows an update_records of 40 records whole, and approving it writes all of them', async () => {
      const before = await notes();
      const ids = before.map((n) => n.id);
      const body = longText('y', 400);
      const { id, proposed } = await noteProposal({
        id: 'call_big',
        name: 'update_records',
        arguments: { objectName: 'note', ids, values: { body } },
      });
      expect(Buffer.byteLength(JSON.stringify(proposed.changes))).toBeGreaterThan(16 * 1024);
      expect(proposed.changes.map((c) => c.id).sort()).toEqual([...ids].sort());
      expect(proposed.changes.every((c) => c.after?.body === body)).toBe(true);
      await decide(id, { toolCallId: 'call_big', decision: 'approve', token: proposed.token }).expect(202);
      await waitForChat(t, id, hasStatus('waiting'), alice.secret);
      expect((await notes()).every((n) => n.body === body)).toBe(true);
      expect((resultSeen('call_big') as { status: string; records: unknown[] }).records).toHaveLength(40);
    });

    it('rejects, in another chat, a proposal of one value past 16 KB; nothing written, the model reads the rejection', async () => {
      const [target] = await notes();
      const { id, proposed } = await noteProposal({
        id: 'call_huge',
        name: 'update_record',
        arguments: { objectName: 'note', recordId: target.id, values: { body: longText('z', 20_000) } },
      });
      // Compared as booleans: a failure never prints 20 000 characters.
      expect(proposed.changes.map((c) => c.id)).toEqual([target.id]);
      const [change] = proposed.changes;
      expect(change.after?.body === longText('z', 20_000) && change.before?.body === target.body).toBe(true);
      await decide(id, { toolCallId: 'call_huge', decision: 'reject', token: proposed.token, reason: 'too long' }).expect(202);
      await waitForChat(t, id, hasStatus('waiting'), alice.secret);
      expect((await notes())[0].body === target.body).toBe(true);
      expect(resultSeen('call_huge')).toMatchObject({ error: { code: 'approval_rejected', details: { reason: 'too long' } } });
    });
  });

  it('accepts on a second replica an approval of a proposal made on the first', async () => {
    const replica = await startTestApp({
      database: t.database,
      env: {
        APPROVAL_SECRET: SECRET,
        CHAT_WORKER_ENABLED: 'false',
        OPENAI_BASE_URL: llm.url,
        OPENAI_API_KEY: 'sk-test-key',
        LLM_MODEL: 'mock-model',
      },
    });
    try {
      const target = await item('a-1');
      llm.enqueue(
        MockReply.toolCalls([
          { id: 'call_rep', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 11 } } },
        ]),
        MockReply.text('Done.'),
      );
      const { id, chat } = await proposal();
      const [proposed] = chat.requiredAction!.proposals;
      await replica.http
        .post(`/api/v1/chats/${id}/approvals`)
        .set(bearer(alice.secret))
        .send({ toolCallId: 'call_rep', decision: 'approve', token: proposed.token })
        .expect(202);
      await waitForChat(t, id, hasStatus('waiting'), alice.secret);
      expect((await item('a-1')).qty).toBe(11);
      // And the replay on the first replica is refused.
      const again = await decide(id, { toolCallId: 'call_rep', decision: 'approve', token: proposed.token }).expect(403);
      expect(errorOf(again).code).toBe('approval_invalid');

      // The same approval sent to both replicas at once: one of them writes, the other refuses.
      llm.enqueue(
        MockReply.toolCalls([
          { id: 'call_race', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 12 } } },
        ]),
        MockReply.text('Done.'),
      );
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(alice.secret)).send({ message: 'Now 12' }).expect(202);
      const raced = await waitForChat(t, id, hasStatus('requires_approval'), alice.secret);
      const body = { toolCallId: 'call_race', decision: 'approve', token: raced.requiredAction!.proposals[0].token };
      const statuses = await Promise.all([
        decide(id, body).then((res) => res.status),
        replica.http
          .post(`/api/v1/chats/${id}/approvals`)
          .set(bearer(alice.secret))
          .send(body)
          .then((res) => res.status),
      ]);
      expect(statuses.sort()).toEqual([202, 403]);
      await waitForChat(t, id, hasStatus('waiting'), alice.secret);
      expect((await item('a-1')).qty).toBe(12);
      expect(await t.sql(`select decision from approval_tokens where tool_call_id = 'call_race'`)).toEqual([
        { decision: 'approve' },
      ]);
    } finally {
      await replica.close();
    }
  });

  it("takes an admin's approval of a member's proposal, and writes it as the admin's key", async () => {
    const target = await item('a-0');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_admin', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 70 } } },
      ]),
      MockReply.text('Done.'),
    );
    const { id, chat } = await proposal();
    const [proposed] = chat.requiredAction!.proposals;
    await decide(id, { toolCallId: 'call_admin', decision: 'approve', token: proposed.token }, t.adminKey).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect((await item('a-0')).qty).toBe(70);
    const feed = await t.http.get('/api/v1/objects/item/changes?limit=1000').set(admin()).expect(200);
    const change = bodyOf<{ changes: Array<{ id: string; keyId: string }> }>(feed)
      .changes.filter((c) => c.id === target.id)
      .at(-1)!;
    expect(change.keyId).not.toBe(alice.id);
    await eventually(async () => (await auditOf('call_admin')).some((e) => e.action === 'record.write'));
    expect((await auditOf('call_admin')).find((e) => e.action === 'record.write')!.keyId).toBe(change.keyId);
  });

  it('tells the model when the agent may not propose a write', async () => {
    const target = await item('a-1');
    await t.http
      .post('/api/v1/ai/agents')
      .set(admin())
      .send({ name: 'updater', label: 'Updater', instructions: 'x', tools: WRITE_TOOLS, writes: { item: ['update'] } })
      .expect(201);
    llm.enqueue(MockReply.toolCall('delete_record', { objectName: 'item', recordId: target.id }), MockReply.text('I may not.'));
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(alice.secret))
      .send({ agent: 'updater', message: 'Delete a-1' })
      .expect(201);
    await waitForChat(t, bodyOf<ChatResponse>(created).id, hasStatus('waiting'), alice.secret);
    expect(parsedFailure(sentMessages(llm, 1).find((m) => m.role === 'tool')!.content!)).toMatchObject({
      error: { code: 'write_not_allowed' },
    });
    expect(await item('a-1')).toBeDefined();
  });

  it('round-trips with the AI SDK Chat: the proposal arrives as an approval request, addToolApprovalResponse approves it', async () => {
    const base = await baseUrl();
    const target = await item('a-2');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_ui', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 21 } } },
      ]),
      MockReply.text('Set to 21.'),
    );
    const chatId = `approvals-${Date.now()}`;
    const chat: Chat<UIMessage> = uiChat(base, '/api/v1/ai/agents/writer/chats', alice.secret, {
      id: chatId,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await chat.sendMessage({ text: 'Set a-2 to 21' });
    await waitUntil(() => chat.status === 'ready' && chat.messages.length === 2, 'the approval request');
    expect(chat.error).toBeUndefined();
    const part = chat.messages[1].parts.find((p) => p.type === 'tool-update_record') as ToolPart;
    expect(part).toMatchObject({
      state: 'approval-requested',
      toolCallId: 'call_ui',
      input: { objectName: 'item', recordId: target.id, values: { qty: 21 } },
      approval: {
        id: 'call_ui',
        descriptor: {
          objectName: 'item',
          operation: 'update',
          changes: [{ id: target.id, before: { qty: target.qty }, after: { qty: 21 } }],
        },
        signature: match.stringMatching(/^v2\./),
      },
    });
    expect((await item('a-2')).qty).toBe(target.qty);

    // A page that reloads restores it as the same approval request.
    const restored = bodyOf<UiChatMessagesResponse>(
      await t.http.get(`/api/v1/ai/agents/writer/chats/${chatId}/messages`).set(bearer(alice.secret)).expect(200),
    );
    expect(restored.messages[1].parts.find((p) => 'toolCallId' in p && p.toolCallId === 'call_ui')).toMatchObject({
      state: 'approval-requested',
      approval: { id: 'call_ui', signature: (part as { approval: { signature: string } }).approval.signature },
    });

    await chat.addToolApprovalResponse({ id: 'call_ui', approved: true });
    await waitUntil(
      () => chat.status === 'ready' && textOf(chat.messages.at(-1)) === 'Set to 21.',
      'the answer after the approval',
    );
    expect(chat.error).toBeUndefined();
    expect((await item('a-2')).qty).toBe(21);
    const done = chat.messages.at(-1)!.parts.find((p) => p.type === 'tool-update_record') as ToolPart;
    expect(done).toMatchObject({ state: 'output-available', output: { status: 'written', approvedBy: 'alice' } });
    expect(resultSeen('call_ui')).toMatchObject({ status: 'written' });
  });

  describe('tool calls that reuse an id within one model step', () => {
    /** The chat's messages, as its owner reads them. */
    const chatMessages = async (id: string) =>
      bodyOf<ChatMessagesResponse>(await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(alice.secret)).expect(200))
        .messages;
    type Part = { type: string; toolCallId?: string; toolName?: string; input?: unknown; output?: unknown };
    const partsOf = async (id: string, type: string) =>
      (await chatMessages(id)).flatMap((m) => m.parts as Part[]).filter((part) => part.type === type);

    it('refuses a second write call with the id of the first: nothing runs under it, the first still proposes as it was made', async () => {
      const deleted = await item('a-3');
      const updated = await item('a-4');
      const deleteArgs = { objectName: 'item', recordId: deleted.id };
      llm.enqueue(
        MockReply.toolCalls([
          { id: 'call_dup', name: 'delete_record', arguments: deleteArgs },
          { id: 'call_dup', name: 'update_record', arguments: { objectName: 'item', recordId: updated.id, values: { qty: 99 } } },
        ]),
        MockReply.text('Left as it is.'),
      );
      const { id, chat } = await proposal('Delete a-3 and set a-4 to 99');
      expect(chat.status).toBe('requires_approval');
      const proposals = chat.requiredAction!.proposals;
      expect(proposals).toHaveLength(1);
      expect(proposals[0]).toMatchObject({
        toolCallId: 'call_dup',
        tool: 'delete_record',
        arguments: deleteArgs,
        changes: [{ id: deleted.id, etag: match.any(String), before: match.objectContaining({ sku: 'a-3' }), after: null }],
      });
      // The chat shows the one call the model's id names: the delete, with its own arguments.
      expect(await partsOf(id, 'tool-call')).toEqual([
        match.objectContaining({ toolCallId: 'call_dup', toolName: 'delete_record', input: deleteArgs }),
      ]);

      await decide(id, { toolCallId: 'call_dup', decision: 'reject', token: proposals[0].token }).expect(202);
      await waitForChat(t, id, hasStatus('waiting'), alice.secret);
      // The next request is valid for OpenAI: one call per id, one tool message per call; the note tells the
      // model that its second call was refused, and why.
      const sent = sentMessages(llm, 1);
      const step = sent.find((m) => m.role === 'assistant' && m.tool_calls)!;
      expect(step.tool_calls!.map((c) => [c.id, c.function?.name])).toEqual([['call_dup', 'delete_record']]);
      expect(step.content).toContain('duplicate_tool_call_id');
      expect(sent.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).toEqual(['call_dup']);
      expect(resultSeen('call_dup')).toMatchObject({ error: { code: 'approval_rejected' } });
      expect(await item('a-3')).toBeDefined();
      expect(await item('a-4')).toEqual(updated);
    });

    it('refuses a second read call with the id of the first: it runs nothing, the first call and its result stand', async () => {
      const first = await item('a-1');
      const second = await item('a-2');
      llm.enqueue(
        MockReply.toolCalls([
          { id: 'call_read', name: 'get_record', arguments: { objectName: 'item', recordId: first.id } },
          { id: 'call_read', name: 'get_record', arguments: { objectName: 'item', recordId: second.id } },
        ]),
        MockReply.text('Read.'),
      );
      const { id } = await proposal('Read a-1 and a-2');
      await waitForChat(t, id, hasStatus('waiting'), alice.secret);
      expect(llm.requests).toHaveLength(2);
      const sent = sentMessages(llm, 1);
      const step = sent.find((m) => m.role === 'assistant' && m.tool_calls)!;
      expect(step.tool_calls!.map((c) => c.id)).toEqual(['call_read']);
      expect(JSON.parse(step.tool_calls![0].function!.arguments)).toEqual({ objectName: 'item', recordId: first.id });
      expect(step.content).toContain('duplicate_tool_call_id');
      const results = sent.filter((m) => m.role === 'tool');
      expect(results.map((m) => m.tool_call_id)).toEqual(['call_read']);
      expect(results[0].content).toContain('"a-1"');
      expect(results[0].content).not.toContain('"a-2"');
      expect((await partsOf(id, 'tool-call')).map((p) => [p.toolCallId, p.input])).toEqual([
        ['call_read', { objectName: 'item', recordId: first.id }],
      ]);
      expect((await partsOf(id, 'tool-result')).map((p) => p.toolCallId)).toEqual(['call_read']);
    });
  });

  it("withholds a pending proposal (the record, the proposed values, the token) from the subject's other keys, on every route", async () => {
    const base = await baseUrl();
    await t.http
      .post('/api/v1/policies')
      .set(admin())
      .send({
        name: 'item-narrow',
        objects: { item: { read: true, update: true, delete: true, rowFilter: { sku: 'a-0' }, hiddenFields: ['qty'] } },
      })
      .expect(201);
    const aliceNarrow = (
      await t.http
        .post('/api/v1/api-keys')
        .set(admin())
        .send({ name: 'alice-narrow', role: 'member', subject: 'alice', policies: ['item-narrow'] })
        .expect(201)
    ).body as CreatedApiKeyResponse;
    // A delete shows the whole record: a hidden field (qty), in a row outside the narrower key's filter (sku a-4).
    const target = await item('a-4');
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_leak', name: 'delete_record', arguments: { objectName: 'item', recordId: target.id } }]),
      MockReply.text('Kept.'),
    );
    const clientId = `withheld-${Date.now()}`;
    const ui: Chat<UIMessage> = uiChat(base, '/api/v1/ai/agents/writer/chats', alice.secret, { id: clientId });
    await ui.sendMessage({ text: 'Delete a-4' });
    await waitUntil(() => ui.status === 'ready' && ui.messages.length === 2, 'the approval request');
    const listed = bodyOf<{ chats: ChatResponse[] }>(
      await t.http.get('/api/v1/chats?limit=100').set(bearer(alice.secret)).expect(200),
    );
    const id = listed.chats.find((c) => c.clientId === clientId)!.id;

    // The owner's key, which the proposing step ran as, sees the proposal whole.
    const own = await waitForChat(t, id, hasStatus('requires_approval'), alice.secret);
    const [proposed] = own.requiredAction!.proposals;
    expect(proposed).toMatchObject({
      toolCallId: 'call_leak',
      tool: 'delete_record',
      changes: [{ id: target.id, before: { sku: 'a-4', qty: target.qty }, after: null }],
    });
    const secrets = [proposed.token, target.id, '"a-4"'];
    const leaks = (body: unknown) => secrets.filter((secret) => JSON.stringify(body).includes(secret));
    const withheld = { type: 'approval', proposals: [], withheld: true, reason: 'access_changed' };

    for (const key of [aliceNarrow.secret, aliceReader]) {
      const viewed = bodyOf<ChatResponse>(await t.http.get(`/api/v1/chats/${id}`).set(bearer(key)).expect(200));
      expect(viewed.status).toBe('requires_approval');
      expect(viewed.requiredAction).toEqual(withheld);
      expect(leaks(viewed)).toEqual([]);

      const all = bodyOf<{ chats: ChatResponse[] }>(await t.http.get('/api/v1/chats?limit=100').set(bearer(key)).expect(200));
      expect(all.chats.find((c) => c.id === id)!.requiredAction).toEqual(withheld);
      expect(leaks(all)).toEqual([]);

      const restored = bodyOf<UiChatMessagesResponse>(
        await t.http.get(`/api/v1/ai/agents/writer/chats/${clientId}/messages`).set(bearer(key)).expect(200),
      );
      const part = restored.messages[1].parts.find((p) => 'toolCallId' in p && p.toolCallId === 'call_leak');
      expect(part).toMatchObject({ state: 'input-available' });
      expect(leaks(restored)).toEqual([]);

      const stream = await SseClient.open(base, `/api/v1/chats/${id}/stream?afterId=0`, key);
      try {
        await stream.waitFor((events) => events.some((e) => e.event === 'action_required'));
        expect(stream.of('action_required')[0].data).toEqual({ requiredAction: withheld });
        expect(leaks(stream.events)).toEqual([]);
      } finally {
        stream.close();
      }
    }

    // The owner's key still gets it on every route, and decides on it as before.
    const restored = bodyOf<UiChatMessagesResponse>(
      await t.http.get(`/api/v1/ai/agents/writer/chats/${clientId}/messages`).set(bearer(alice.secret)).expect(200),
    );
    expect(restored.messages[1].parts.find((p) => 'toolCallId' in p && p.toolCallId === 'call_leak')).toMatchObject({
      state: 'approval-requested',
      approval: { id: 'call_leak', signature: proposed.token },
    });
    const stream = await SseClient.open(base, `/api/v1/chats/${id}/stream?afterId=0`, alice.secret);
    try {
      await stream.waitFor((events) => events.some((e) => e.event === 'action_required'));
      expect(stream.of('action_required')[0].data).toMatchObject({ requiredAction: { proposals: [{ token: proposed.token }] } });
    } finally {
      stream.close();
    }
    await decide(id, { toolCallId: 'call_leak', decision: 'reject', token: proposed.token, reason: 'keep it' }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect(await item('a-4')).toEqual(target);
  });

  it("answers an approval on another person's chat 404 chat_not_found, as for a chat that does not exist", async () => {
    const target = await item('a-3');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_other', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 99 } } },
      ]),
      MockReply.text('ok'),
    );
    const { id, chat } = await proposal();
    const [proposed] = chat.requiredAction!.proposals;
    const body = { toolCallId: 'call_other', decision: 'approve', token: proposed.token };
    const others = await decide(id, body, bob).expect(404);
    const missing = await decide('00000000-0000-4000-8000-000000000000', body, bob).expect(404);
    expect(errorOf(others).code).toBe('chat_not_found');
    expect(errorOf(missing).code).toBe('chat_not_found');
    expect(Object.keys(bodyOf<object>(others)).sort()).toEqual(Object.keys(bodyOf<object>(missing)).sort());
    expect((await item('a-3')).qty).toBe(target.qty);
    await decide(id, { ...body, decision: 'reject' }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
  });

  it('shows the proposal in the chat messages as the call the model made, and its result once decided', async () => {
    const target = await item('a-1');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_msg', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 13 } } },
      ]),
      MockReply.text('Done.'),
    );
    const { id, chat } = await proposal();
    const messages = async () =>
      bodyOf<ChatMessagesResponse>(await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(alice.secret)).expect(200))
        .messages;
    expect((await messages()).map((m) => m.role)).toEqual(['user', 'assistant']);
    const [proposed]: WriteProposalResponse[] = chat.requiredAction!.proposals;
    await decide(id, { toolCallId: 'call_msg', decision: 'approve', token: proposed.token }).expect(202);
    await waitForChat(t, id, hasStatus('waiting'), alice.secret);
    expect((await messages()).map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
  });
});

/** A failed tool message's JSON, after its prefix. */
function parsedFailure(content: string): unknown {
  return JSON.parse(content.replace(/^Tool call failed: /, ''));
}

describe('writes with approval: expiry', () => {
  let t: TestApp;
  let llm: MockLlmServer;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      // The sweep runs only when a test asks for it: a late approval finds its proposal still waiting.
      env: {
        APPROVAL_TTL_S: '1',
        CHAT_POLL_INTERVAL_MS: '200',
        CHAT_HEARTBEAT_INTERVAL_MS: '600000',
        CHAT_STALE_AFTER_MS: '3600000',
      },
    }));
    await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .send({
        name: 'item',
        label: 'Item',
        fields: [
          { name: 'sku', label: 'SKU', type: 'text' },
          { name: 'qty', label: 'Qty', type: 'integer' },
        ],
      })
      .expect(201);
    await t.http
      .post('/api/v1/ai/agents')
      .set(bearer(t.adminKey))
      .send({ name: 'writer', label: 'Writer', instructions: 'x', tools: ['update_record'], writes: { item: ['update'] } })
      .expect(201);
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });
  beforeEach(() => llm.reset());

  /** A chat whose update proposal waits; its token. */
  async function waitingProposal(toolCallId: string): Promise<{ chatId: string; recordId: string; token: string }> {
    const created = await t.http
      .post('/api/v1/objects/item/records')
      .set(bearer(t.adminKey))
      .send({ sku: toolCallId, qty: 1 })
      .expect(201);
    const recordId = bodyOf<{ id: string }>(created).id;
    llm.enqueue(
      MockReply.toolCalls([
        { id: toolCallId, name: 'update_record', arguments: { objectName: 'item', recordId, values: { qty: 2 } } },
      ]),
      MockReply.text('It expired.'),
    );
    const chat = bodyOf<ChatResponse>(
      await t.http.post('/api/v1/chats').set(bearer(t.adminKey)).send({ agent: 'writer', message: 'set 2' }).expect(201),
    );
    const paused = await waitForChat(t, chat.id, hasStatus('requires_approval'));
    return { chatId: chat.id, recordId, token: paused.requiredAction!.proposals[0].token };
  }

  const qtyOf = async (recordId: string) =>
    (await t.sql<{ qty: number }>(`select qty::int as qty from data.item where id = $1`, [recordId]))[0].qty;

  it('refuses an approval that comes too late with 403; the model reads that the proposal expired, nothing written', async () => {
    const { chatId, recordId, token } = await waitingProposal('call_late');
    await eventually(() => Date.now() > Number(token.split('.')[1]) + 50, 5_000);
    const res = await t.http
      .post(`/api/v1/chats/${chatId}/approvals`)
      .set(bearer(t.adminKey))
      .send({ toolCallId: 'call_late', decision: 'approve', token })
      .expect(403);
    expect(errorOf(res).code).toBe('approval_invalid');
    await waitForChat(t, chatId, hasStatus('waiting'));
    const seen = sentMessages(llm, 1).find((m) => m.tool_call_id === 'call_late')!;
    expect(parsedFailure(seen.content!)).toMatchObject({ error: { code: 'approval_expired' } });
    expect(await qtyOf(recordId)).toBe(1);
    expect(await t.sql(`select * from approval_tokens where tool_call_id = 'call_late'`)).toEqual([]);
  });

  it('answers an expired proposal nobody decided on for the model, at the sweep', async () => {
    const { chatId, recordId } = await waitingProposal('call_swept');
    await sleep(1_100);
    await t.app.get(ApprovalExpiry).sweep();
    await waitForChat(t, chatId, hasStatus('waiting'));
    const seen = sentMessages(llm, 1).find((m) => m.tool_call_id === 'call_swept')!;
    expect(parsedFailure(seen.content!)).toMatchObject({ error: { code: 'approval_expired' } });
    expect(await qtyOf(recordId)).toBe(1);
  });
});
