import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiKeyListResponse, CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import type { AuditEntryResponse, AuditListResponse } from '../../src/audit/audit.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

/** A value only the hidden field `amount` holds in the arguments below: it must never reach the audit trail. */
const SECRET_AMOUNT = 987654;

describe('the audit trail of tool calls and admin changes', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: CreatedApiKeyResponse;
  let adminKeyId: string;

  function audit(query: Record<string, string> = {}, key = t.adminKey) {
    return t.http.get('/api/v1/audit').query(query).set(bearer(key));
  }

  /** Tool entries are written in batches shortly after the call: waits until `count` match the query. */
  async function toolEntries(query: Record<string, string>, count: number): Promise<AuditEntryResponse[]> {
    const until = Date.now() + 10_000;
    for (;;) {
      const entries = bodyOf<AuditListResponse>(await audit({ kind: 'tool', ...query }).expect(200)).entries;
      if (entries.length >= count || Date.now() > until) return entries;
      await sleep(25);
    }
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { CHAT_POLL_INTERVAL_MS: '200' } }));
    const keys = bodyOf<ApiKeyListResponse>(await t.http.get('/api/v1/api-keys').set(asAdmin(t)).expect(200));
    adminKeyId = keys.apiKeys.find((k) => k.role === 'admin')!.id;
    await createObject(t, 'deal', [fieldSpec('title', 'text'), fieldSpec('owner', 'text')]);
    await t.http
      .post('/api/v1/objects/deal/fields')
      .set(asAdmin(t))
      .send({ name: 'amount', label: 'Amount', type: 'number' })
      .expect(201);
    for (const [title, owner] of [
      ['a', 'alice'],
      ['b', 'alice'],
      ['c', 'bob'],
    ]) {
      await t.http.post('/api/v1/objects/deal/records').set(asAdmin(t)).send({ title, owner, amount: SECRET_AMOUNT }).expect(201);
    }
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'own-deals', objects: { deal: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount'] } } })
      .expect(201);
    alice = await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice', policies: ['own-deals'] });
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());

  it('records each admin change with its key, action and target', async () => {
    await t.http.patch('/api/v1/objects/deal').set(asAdmin(t)).send({ label: 'Deals' }).expect(200);
    await t.http.patch('/api/v1/objects/deal/fields/title').set(asAdmin(t)).send({ label: 'Name' }).expect(200);
    await t.http.post('/api/v1/objects').set(asAdmin(t)).send({ name: 'scratch', label: 'Scratch' }).expect(201);
    await t.http
      .post('/api/v1/objects/scratch/fields')
      .set(asAdmin(t))
      .send({ name: 'note', label: 'Note', type: 'text' })
      .expect(201);
    await t.http.delete('/api/v1/objects/scratch/fields/note').set(asAdmin(t)).expect(204);
    await t.http.delete('/api/v1/objects/scratch').set(asAdmin(t)).expect(204);
    const agent = {
      name: 'audited_agent',
      label: 'Audited',
      role: 'Analyst',
      instructions: 'Answer.',
      tools: ['query_records'],
      allowedObjects: ['deal'],
    };
    await t.http.post('/api/v1/ai/agents').set(asAdmin(t)).send(agent).expect(201);
    await t.http
      .put('/api/v1/ai/agents/audited_agent')
      .set(asAdmin(t))
      .send({ ...agent, label: 'Audited 2' })
      .expect(200);
    await t.http.delete('/api/v1/ai/agents/audited_agent').set(asAdmin(t)).expect(204);
    await t.http.post('/api/v1/policies').set(asAdmin(t)).send({ name: 'nothing', objects: {} }).expect(201);
    await t.http
      .put('/api/v1/policies/nothing')
      .set(asAdmin(t))
      .send({ objects: { deal: { read: true } } })
      .expect(200);
    await t.http.delete('/api/v1/policies/nothing').set(asAdmin(t)).expect(204);
    const key = await createApiKey(t, { name: 'temp', role: 'member' });
    await t.http.patch(`/api/v1/api-keys/${key.id}`).set(asAdmin(t)).send({ tokensPerDay: 10 }).expect(200);
    await t.http.delete(`/api/v1/api-keys/${key.id}`).set(asAdmin(t)).expect(204);
    // A refused change leaves no entry: it rolled back with the change.
    await t.http.post('/api/v1/ai/agents').set(asAdmin(t)).send(agent).expect(201);
    await t.http.post('/api/v1/ai/agents').set(asAdmin(t)).send(agent).expect(409);

    const entries = bodyOf<AuditListResponse>(
      await audit({ kind: 'admin', keyId: adminKeyId, limit: '1000' }).expect(200),
    ).entries;
    const seen = entries.map((e) => `${e.action} ${e.target}`).reverse();
    expect(seen).toEqual([
      'object.create deal',
      'field.create deal.amount',
      'policy.create own-deals',
      `api_key.create ${alice.id}`,
      'object.update deal',
      'field.update deal.title',
      'object.create scratch',
      'field.create scratch.note',
      'field.delete scratch.note',
      'object.delete scratch',
      'agent.create audited_agent',
      'agent.update audited_agent',
      'agent.delete audited_agent',
      'policy.create nothing',
      'policy.update nothing',
      'policy.delete nothing',
      `api_key.create ${key.id}`,
      `api_key.update ${key.id}`,
      `api_key.delete ${key.id}`,
      'agent.create audited_agent',
    ]);
    // What the server does itself (its built-in agents) has no key.
    const bySystem = bodyOf<AuditListResponse>(await audit({ kind: 'admin' }).expect(200)).entries.filter(
      (e) => e.keyId === null,
    );
    expect(bySystem.map((e) => e.action)).toContain('agent.create');
    for (const entry of entries) {
      expect(entry).toMatchObject({ kind: 'admin', keyId: adminKeyId, outcome: 'ok' });
      expect(entry).not.toHaveProperty('tool');
    }
  });

  it('records a direct tool call with the caller, rows returned and arguments without hidden values', async () => {
    const res = await t.http
      .post('/api/v1/ai/tools/query_records/execute')
      .set(bearer(alice.secret))
      .send({ arguments: { objectName: 'deal', where: { $or: [{ title: 'a' }, { amount: SECRET_AMOUNT }] } } })
      .expect(200);
    // `amount` is unknown to alice: the call fails, and still is audited.
    expect(bodyOf<{ isError: boolean }>(res).isError).toBe(true);
    await t.http
      .post('/api/v1/ai/tools/query_records/execute')
      .set(bearer(alice.secret))
      .send({ arguments: { objectName: 'deal', fields: ['title'] } })
      .expect(200);

    const entries = await toolEntries({ keyId: alice.id }, 2);
    expect(entries).toHaveLength(2);
    const [ok, failed] = entries;
    expect(ok).toMatchObject({
      kind: 'tool',
      keyId: alice.id,
      tool: 'query_records',
      arguments: { objectName: 'deal', fields: ['title'] },
      // alice's own deals only.
      rowCount: 2,
      outcome: 'ok',
    });
    expect(typeof ok.durationMs).toBe('number');
    expect(ok).not.toHaveProperty('agent');
    expect(failed).toMatchObject({
      tool: 'query_records',
      outcome: 'unknown_field',
      arguments: { objectName: 'deal', where: { $or: [{ title: 'a' }, {}] } },
    });
    expect(failed).not.toHaveProperty('rowCount');
    const stored = await t.sql<{ arguments: unknown }>(`select arguments from audit_log where key_id = $1`, [alice.id]);
    expect(JSON.stringify(stored)).not.toContain(String(SECRET_AMOUNT));
    expect(JSON.stringify(stored)).not.toContain('amount');
  });

  it('records the tool calls of a stateless chat with its agent, and of a durable chat with its chat id', async () => {
    llm.enqueue(
      MockReply.toolCalls([
        { name: 'query_records', arguments: { objectName: 'deal', where: { amount: { $gt: SECRET_AMOUNT } } } },
        { name: 'aggregate_data', arguments: { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] } },
      ]),
      MockReply.text('done'),
    );
    await t.http
      .post('/api/v1/ai/agents/data_chat/chat')
      .set(bearer(alice.secret))
      .send({ messages: [{ role: 'user', content: 'deals?' }] })
      .expect(200);

    llm.enqueue(
      MockReply.toolCall('get_record', { objectName: 'deal', recordId: '00000000-0000-4000-8000-000000000000' }),
      MockReply.text('none'),
    );
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(alice.secret))
      .send({ agent: 'data_chat', message: 'that deal?' })
      .expect(201);
    const chatId = bodyOf<ChatResponse>(created).id;
    await waitForChat(t, chatId, hasStatus('waiting', 'error'), alice.secret);

    const chatEntries = await toolEntries({ chatId }, 1);
    // Two calls of the stateless chat, one of the durable chat.
    const stateless = await toolEntries({ keyId: alice.id, agent: 'data_chat' }, 3);
    expect(stateless).toHaveLength(3);
    expect(chatEntries).toEqual([
      expect.objectContaining({ tool: 'get_record', agent: 'data_chat', chatId, keyId: alice.id, outcome: 'record_not_found' }),
    ]);
    const inStateless = stateless.filter((e) => e.chatId === undefined);
    expect(inStateless.map((e) => [e.tool, e.outcome, e.rowCount])).toEqual([
      ['aggregate_data', 'ok', 1],
      ['query_records', 'unknown_field', undefined],
    ]);
    expect(inStateless[1].arguments).toEqual({ objectName: 'deal', where: {} });
  });

  it('pages newest first with a cursor, clamps the limit and filters by time', async () => {
    const first = bodyOf<AuditListResponse>(await audit({ limit: '3' }).expect(200));
    expect(first.entries).toHaveLength(3);
    expect(first.nextCursor).toBeDefined();
    const second = bodyOf<AuditListResponse>(await audit({ limit: '3', cursor: first.nextCursor! }).expect(200));
    const ids = [...first.entries, ...second.entries].map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(new Set(ids).size).toBe(6);

    const all = bodyOf<AuditListResponse>(await audit({ limit: '100000' }).expect(200));
    const [{ n }] = await t.sql<{ n: number }>(`select count(*)::int as n from audit_log`);
    expect(all.entries).toHaveLength(Math.min(n, 1000));
    expect(bodyOf<AuditListResponse>(await audit({ to: '2000-01-01' }).expect(200)).entries).toEqual([]);
    for (const query of [{ cursor: 'abc' }, { kind: 'other' }, { limit: '0' }, { chatId: 'x' }] as Record<string, string>[]) {
      expect((await audit(query)).status).toBe(400);
    }
  });

  it('is for admins only', async () => {
    const res = await audit({}, alice.secret);
    expect(res.status).toBe(403);
    expect(errorOf(res).code).toBe('forbidden');
  });

  it('cannot be changed or emptied, not even by the application’s own database user', async () => {
    const [{ n }] = await t.sql<{ n: number }>(`select count(*)::int as n from audit_log`);
    expect(n).toBeGreaterThan(0);
    await expect(t.sql(`update audit_log set outcome = 'forged'`)).rejects.toThrow(/append-only/);
    await expect(t.sql(`delete from audit_log`)).rejects.toThrow(/append-only/);
    await expect(t.sql(`truncate audit_log`)).rejects.toThrow(/append-only/);
    const [{ after }] = await t.sql<{ after: number }>(`select count(*)::int as after from audit_log where outcome <> 'forged'`);
    expect(after).toBe(n);
  });
});
