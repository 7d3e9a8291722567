import type { CreateApiKeyDto, CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import type { UsageReportResponse } from '../../src/governance/usage.dto';
import type { OpenAiErrorBody } from '../../src/openai-compat/openai-errors';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, waitForChat, eventually } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { asAdmin, createAgent, createApiKey, createObject, fieldSpec } from '../support/fixtures';

const AGENT_QUOTA = 1000;

/** Token quotas (per key, per agent, per UTC day) and the usage report, against the scripted model's reported tokens. */
describe('token quotas and usage', () => {
  let t: TestApp;
  let llm: MockLlmServer;

  function member(name: string, extra: Partial<CreateApiKeyDto> = {}): Promise<CreatedApiKeyResponse> {
    return createApiKey(t, { name, role: 'member', subject: name, ...extra });
  }

  function chat(key: string, agent = 'data_chat') {
    return t.http
      .post(`/api/v1/ai/agents/${agent}/chat`)
      .set(bearer(key))
      .send({ messages: [{ role: 'user', content: 'how many deals?' }] });
  }

  function usage(key: string, query: Record<string, string> = {}) {
    return t.http.get('/api/v1/usage').query(query).set(bearer(key));
  }

  const today = () => new Date().toISOString().slice(0, 10);

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({
      env: { CHAT_POLL_INTERVAL_MS: '200', QUOTA_TOKENS_PER_AGENT_DAY: String(AGENT_QUOTA) },
    }));
    await createObject(t, 'deal', [fieldSpec('title', 'text')]);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  it('records every model call with the tokens the model reported, reported per key, agent and UTC day', async () => {
    const key = await member('counted');
    llm.enqueue(
      MockReply.toolCall('query_records', { objectName: 'deal' }, { usage: { prompt_tokens: 30, completion_tokens: 5 } }),
      MockReply.text('none yet', { usage: { prompt_tokens: 50, completion_tokens: 7 } }),
    );
    expect(bodyOf<StatelessChatResponse>(await chat(key.secret).expect(200)).content).toBe('none yet');

    const totals = { calls: 2, promptTokens: 80, completionTokens: 12, totalTokens: 92 };
    const byKey = bodyOf<UsageReportResponse>(await usage(t.adminKey, { groupBy: 'key' }).expect(200));
    expect(byKey.rows).toContainEqual({ keyId: key.id, ...totals });
    const byAgent = bodyOf<UsageReportResponse>(await usage(t.adminKey, { groupBy: 'agent', keyId: key.id }).expect(200));
    expect(byAgent.rows).toEqual([{ agent: 'data_chat', ...totals }]);
    const byDay = bodyOf<UsageReportResponse>(await usage(t.adminKey, { groupBy: 'day', keyId: key.id }).expect(200));
    expect(byDay.rows).toEqual([{ day: today(), ...totals }]);
    // The same figures as the table holds, call by call.
    const rows = await t.sql<{ model: string; total_tokens: number; outcome: string; agent: string; chat_id: string | null }>(
      `select model, total_tokens, outcome, agent, chat_id from usage where key_id = $1 order by id`,
      [key.id],
    );
    expect(rows).toEqual([
      { model: 'mock-model', total_tokens: 35, outcome: 'ok', agent: 'data_chat', chat_id: null },
      { model: 'mock-model', total_tokens: 57, outcome: 'ok', agent: 'data_chat', chat_id: null },
    ]);
    // A window that ends before today holds none of it.
    const before = bodyOf<UsageReportResponse>(await usage(t.adminKey, { keyId: key.id, to: today() }).expect(200));
    expect(before.rows).toEqual([]);
  });

  it('records a durable chat’s calls with its chat id', async () => {
    const key = await member('durable-counted');
    llm.enqueue(MockReply.text('hello', { usage: { prompt_tokens: 11, completion_tokens: 2 } }));
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(key.secret))
      .send({ agent: 'data_chat', message: 'hi' })
      .expect(201);
    const id = bodyOf<ChatResponse>(created).id;
    await waitForChat(t, id, hasStatus('waiting', 'error'), key.secret);
    // Usage rows are written in batches, within 100 ms of the call.
    const rows = () =>
      t.sql<{ chat_id: string; total_tokens: number }>(`select chat_id, total_tokens from usage where key_id = $1`, [key.id]);
    await eventually(async () => (await rows()).length > 0);
    expect(await rows()).toEqual([{ chat_id: id, total_tokens: 13 }]);
  });

  it('shows a member its own usage only, whatever keyId it names', async () => {
    const mine = await member('mine');
    const other = await member('other');
    for (const key of [mine, other]) {
      llm.enqueue(MockReply.text('ok', { usage: { prompt_tokens: 3, completion_tokens: 1 } }));
      await chat(key.secret).expect(200);
    }
    for (const query of [{}, { keyId: other.id }, { groupBy: 'key', keyId: other.id }] as Record<string, string>[]) {
      const report = bodyOf<UsageReportResponse>(await usage(mine.secret, { groupBy: 'key', ...query }).expect(200));
      expect(report.rows).toEqual([{ keyId: mine.id, calls: 1, promptTokens: 3, completionTokens: 1, totalTokens: 4 }]);
    }
  });

  it('refuses a key at its daily quota with 429 quota_exceeded and Retry-After, before the model receives anything', async () => {
    const key = await member('quota', { tokensPerDay: 100 });
    expect(key.tokensPerDay).toBe(100);
    // Under the quota when it starts: the call runs, and may go past it.
    llm.enqueue(MockReply.text('first', { usage: { prompt_tokens: 90, completion_tokens: 30 } }));
    await chat(key.secret).expect(200);
    expect(llm.requests).toHaveLength(1);

    const refused = await chat(key.secret);
    expect(refused.status).toBe(429);
    expect(errorOf(refused)).toMatchObject({ code: 'quota_exceeded', details: { scope: 'key', quota: 100, used: 120 } });
    const retryAfter = Number(refused.headers['retry-after']);
    const secondsToMidnight =
      (Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1) - Date.now()) / 1000;
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(secondsToMidnight) + 1);
    // The OpenAI-compatible door answers the same refusal in OpenAI's shape.
    const openai = await t.http
      .post('/v1/chat/completions')
      .set(bearer(key.secret))
      .send({ model: 'data_chat', messages: [{ role: 'user', content: 'hi' }] });
    expect(openai.status).toBe(429);
    expect(bodyOf<OpenAiErrorBody>(openai).error).toMatchObject({ type: 'rate_limit_error', code: 'quota_exceeded' });
    expect(openai.headers['retry-after']).toBeDefined();
    expect(llm.requests).toHaveLength(1);

    // Raising the key's quota lets it go on at once.
    await t.http.patch(`/api/v1/api-keys/${key.id}`).set(asAdmin(t)).send({ tokensPerDay: 1000 }).expect(200);
    llm.enqueue(MockReply.text('again', { usage: { prompt_tokens: 1, completion_tokens: 1 } }));
    await chat(key.secret).expect(200);
  });

  it('refuses a durable chat of a key at its quota with 429 before storing it, and ends one that reaches it later in error', async () => {
    const key = await member('durable-quota', { tokensPerDay: 0 });
    const refused = await t.http.post('/api/v1/chats').set(bearer(key.secret)).send({ agent: 'data_chat', message: 'hi' });
    expect(refused.status).toBe(429);
    expect(errorOf(refused).code).toBe('quota_exceeded');
    expect(await t.sql(`select 1 from chats where owner = 'durable-quota'`)).toEqual([]);

    // Admitted under the quota; the first step spends it, so the turn's next model call is refused.
    await t.http.patch(`/api/v1/api-keys/${key.id}`).set(asAdmin(t)).send({ tokensPerDay: 10 }).expect(200);
    llm.enqueue(MockReply.toolCall('list_objects', {}, { usage: { prompt_tokens: 20, completion_tokens: 1 } }));
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(key.secret))
      .send({ agent: 'data_chat', message: 'hi' })
      .expect(201);
    const chatRow = await waitForChat(t, bodyOf<ChatResponse>(created).id, hasStatus('waiting', 'error'), key.secret);
    expect(chatRow.status).toBe('error');
    expect(chatRow.lastError).toMatchObject({ code: 'quota_exceeded' });
    expect(llm.requests).toHaveLength(1);
  });

  it('refuses every key once the agent has spent its tokens of the day (QUOTA_TOKENS_PER_AGENT_DAY)', async () => {
    await createAgent(t, {
      name: 'budget_agent',
      label: 'Budget',
      role: 'Analyst',
      instructions: 'Answer.',
      tools: ['query_records'],
      allowedObjects: ['deal'],
    });
    const [first, second] = [await member('agent-user-1'), await member('agent-user-2')];
    llm.enqueue(MockReply.text('spent', { usage: { prompt_tokens: AGENT_QUOTA, completion_tokens: 1 } }));
    await chat(first.secret, 'budget_agent').expect(200);
    for (const key of [first, second]) {
      const res = await chat(key.secret, 'budget_agent');
      expect(res.status).toBe(429);
      expect(errorOf(res)).toMatchObject({ code: 'quota_exceeded', details: { scope: 'agent', quota: AGENT_QUOTA } });
    }
    expect(llm.requests).toHaveLength(1);
    // Other agents are not affected.
    llm.enqueue(MockReply.text('fine', { usage: { prompt_tokens: 1, completion_tokens: 1 } }));
    await chat(second.secret).expect(200);
  });

  it('refuses a bad groupBy, time or keyId with 400', async () => {
    const bad: Record<string, string>[] = [
      { groupBy: 'tool' },
      { from: 'yesterday' },
      { to: '2026-02-30' },
      { keyId: 'not-a-uuid' },
    ];
    for (const query of bad) {
      const res = await usage(t.adminKey, query);
      expect(res.status).toBe(400);
    }
  });
});
