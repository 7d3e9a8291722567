import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import type { ReadinessResponse } from '../../src/health/health.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { Scrape } from '../support/prometheus';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

const METRICS_TOKEN = 'scraper-token-0123456789';

async function scrape(t: TestApp, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await t.http.get('/metrics').set(headers).expect(200);
  expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return new Scrape(res.text);
}

describe('GET /metrics', () => {
  let t: TestApp;
  let llm: MockLlmServer;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true', CHAT_POLL_INTERVAL_MS: '200' } }));
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('is public without METRICS_TOKEN and parses as the Prometheus text format, process metrics included', async () => {
    const metrics = await scrape(t);
    for (const family of metrics.families.values()) expect(family.help).not.toBe('');
    expect(metrics.family('datacopilot_http_requests_total').type).toBe('counter');
    expect(metrics.family('datacopilot_llm_call_duration_seconds').type).toBe('histogram');
    expect(metrics.family('datacopilot_chats').type).toBe('gauge');
    // Counted from the registry's creation: a first scrape right after it may still read 0.
    expect(metrics.family('process_cpu_user_seconds_total').type).toBe('counter');
    expect(metrics.value('nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    // Every pool, each by state.
    for (const pool of ['orm', 'data', 'reader']) {
      expect(metrics.samples('datacopilot_pg_pool_connections', { pool }).map((s) => s.labels?.state)).toEqual(
        expect.arrayContaining(['in_use', 'idle', 'waiting']),
      );
    }
  });

  it('moves the counters of one durable chat with one tool round: requests, model calls, tokens, tools, chats', async () => {
    const before = await scrape(t);
    llm.enqueue(
      MockReply.toolCall(
        'aggregate_data',
        { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] },
        { usage: { prompt_tokens: 120, completion_tokens: 15 } },
      ),
      MockReply.text('There are 2000 deals.', { usage: { prompt_tokens: 180, completion_tokens: 7 } }),
    );
    const created = await t.http
      .post('/api/v1/chats')
      .set(bearer(t.adminKey))
      .send({ agent: 'data_chat', message: 'How many deals?' })
      .expect(201);
    const id = bodyOf<ChatResponse>(created).id;
    await waitForChat(t, id, hasStatus('waiting'));
    await t.http.get('/no/such/page/for-metrics').expect(404);

    const after = await scrape(t);
    const moved = (name: string, labels: Record<string, string> = {}) => after.value(name, labels) - before.value(name, labels);
    const observed = (name: string, labels: Record<string, string> = {}) =>
      after.count(name, labels) - before.count(name, labels);

    // HTTP: by route pattern, never by URL.
    expect(moved('datacopilot_http_requests_total', { method: 'POST', route: '/api/v1/chats', status: '201' })).toBe(1);
    expect(
      moved('datacopilot_http_requests_total', { method: 'GET', route: '/api/v1/chats/:id', status: '200' }),
    ).toBeGreaterThan(0);
    expect(moved('datacopilot_http_requests_total', { route: 'unmatched', status: '404' })).toBe(1);
    expect(observed('datacopilot_http_request_duration_seconds', { route: '/api/v1/chats', status: '201' })).toBe(1);
    const labels = after.labelValues();
    expect(labels.filter((value) => value.includes(id) || value.includes('for-metrics'))).toEqual([]);

    // Two model calls, both ok, with their tokens.
    const call = { agent: 'data_chat', model: 'mock-model' };
    expect(moved('datacopilot_llm_calls_total', { ...call, outcome: 'ok' })).toBe(2);
    expect(observed('datacopilot_llm_call_duration_seconds', { ...call, outcome: 'ok' })).toBe(2);
    expect(moved('datacopilot_llm_tokens_total', { ...call, kind: 'prompt' })).toBe(300);
    expect(moved('datacopilot_llm_tokens_total', { ...call, kind: 'completion' })).toBe(22);
    expect(after.value('datacopilot_llm_calls_in_flight')).toBe(0);

    // One tool call.
    expect(moved('datacopilot_tool_calls_total', { tool: 'aggregate_data', outcome: 'ok' })).toBe(1);
    expect(observed('datacopilot_tool_call_duration_seconds', { tool: 'aggregate_data', outcome: 'ok' })).toBe(1);

    // The worker: one claim, nothing running now.
    expect(observed('datacopilot_chat_claim_lag_seconds')).toBe(1);
    expect(after.value('datacopilot_chat_worker_chats_in_flight')).toBe(0);

    // Chats by status, as the table holds them.
    const rows = await t.sql<{ status: string; n: number }>(`select status, count(*)::int as n from chats group by status`);
    for (const status of ['waiting', 'pending', 'running', 'requires_action', 'error']) {
      expect(after.value('datacopilot_chats', { status })).toBe(rows.find((r) => r.status === status)?.n ?? 0);
    }
    expect(after.value('datacopilot_chats', { status: 'waiting' })).toBeGreaterThan(
      before.value('datacopilot_chats', { status: 'waiting' }),
    );
  });

  it('counts a failed model call by its error code', async () => {
    const before = await scrape(t);
    llm.enqueue(MockReply.httpError(400, { message: 'bad' }));
    await t.http
      .post('/api/v1/ai/agents/data_chat/chat')
      .set(bearer(t.adminKey))
      .send({ messages: [{ role: 'user', content: 'x' }] })
      .expect(502);
    const after = await scrape(t);
    const labels = { agent: 'data_chat', model: 'mock-model', outcome: 'llm_bad_request' };
    expect(after.value('datacopilot_llm_calls_total', labels) - before.value('datacopilot_llm_calls_total', labels)).toBe(1);
  });
});

describe('an app with METRICS_TOKEN and no chat worker', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({ env: { METRICS_TOKEN, CHAT_WORKER_ENABLED: 'false' } });
  });
  afterAll(() => t.close());

  it('answers 401 without the token, with another token or with an API key', async () => {
    for (const headers of [{}, bearer('scraper-token-0123456788'), bearer(t.adminKey), { Authorization: METRICS_TOKEN }]) {
      const res = await t.http.get('/metrics').set(headers).expect(401);
      expect(errorOf(res).code).toBe('unauthorized');
    }
  });

  it('answers the metrics for Authorization: Bearer <METRICS_TOKEN>', async () => {
    const metrics = await scrape(t, bearer(METRICS_TOKEN));
    expect(metrics.value('datacopilot_http_requests_total', { route: '/metrics', status: '401' })).toBe(4);
  });

  it('is ready without a chat worker when CHAT_WORKER_ENABLED=false', async () => {
    const res = await t.http.get('/health/ready').expect(200);
    expect(bodyOf<ReadinessResponse>(res)).toEqual({
      status: 'ok',
      checks: { database: 'ok', migrations: 'ok', worker: 'disabled', jobQueue: 'ok', readReplica: 'disabled' },
    });
  });
});
