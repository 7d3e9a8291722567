import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ElicitRequestSchema,
  type CallToolResult,
  type ElicitRequestFormParams,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuditListResponse } from '../../src/audit/audit.dto';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import { MAX_WAITING_CONFIRMATIONS_PER_KEY } from '../../src/mcp/mcp-confirmations.service';
import { PROPOSAL_META_KEY } from '../../src/mcp/mcp.mapper';
import type { ToolErrorContent } from '../../src/tools/tool.types';
import { eventually, listen } from '../support/chat-helpers';
import { createAgent, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { bodyOf } from '../support/responses';
import { bearer, startTestApp, type TestApp } from '../support/test-app';

const SECRET = 'approval-secret-shared-by-every-replica-0123456789';
const WRITE_TOOLS = ['create_record', 'update_record', 'delete_record', 'update_records'];
const ACCEPT = 'application/json, text/event-stream';

/** What the client's person does with a confirmation: the elicitation's result, after anything `before` does. */
type Answer = (request: ElicitRequestFormParams, requestId: string | number) => Promise<ElicitResult> | ElicitResult;

const approve: Answer = () => ({ action: 'accept', content: { decision: 'approve' } });

/**
 * Write tools over MCP: listed only on an agent's path to a client that declared elicitation; each call asks
 * the client to confirm the exact change, and only an approval writes it, once, under If-Match, on any replica.
 */
describe('MCP writes confirmed by elicitation (official SDK client over Streamable HTTP)', () => {
  let t: TestApp;
  let baseUrl: string;
  let alice: CreatedApiKeyResponse;
  let bob: CreatedApiKeyResponse;
  const clients: Client[] = [];

  const admin = () => bearer(t.adminKey);
  const item = async (sku: string) =>
    (await t.sql<{ id: string; qty: number | null }>(`select id::text, qty::int as qty from data.item where sku = $1`, [sku]))[0];
  const changesOf = async (id: string) =>
    Number((await t.sql<{ n: string }>(`select count(*) as n from record_changes where record_id::text = $1`, [id]))[0]?.n ?? 0);

  /** A connected client of `key` on `path`; with `answer`, it declares form elicitation and answers with it. */
  async function connect(
    path: string,
    key: string,
    answer?: Answer,
    fetchFn?: (url: string | URL, init?: RequestInit) => Promise<Response>,
  ): Promise<{ client: Client; transport: StreamableHTTPClientTransport; asked: ElicitRequestFormParams[] }> {
    const asked: ElicitRequestFormParams[] = [];
    const client = new Client(
      { name: 'mcp-writes-e2e', version: '1.0.0' },
      answer ? { capabilities: { elicitation: { form: {} } } } : {},
    );
    if (answer) {
      client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
        const params = request.params as ElicitRequestFormParams;
        asked.push(params);
        return answer(params, extra.requestId);
      });
    }
    const transport = new StreamableHTTPClientTransport(new URL(path, baseUrl), {
      requestInit: { headers: bearer(key) },
      ...(fetchFn ? { fetch: fetchFn } : {}),
    });
    clients.push(client);
    await client.connect(transport);
    return { client, transport, asked };
  }

  const update = (client: Client, id: string, qty: number) =>
    client.callTool({
      name: 'update_record',
      arguments: { objectName: 'item', recordId: id, values: { qty } },
    }) as Promise<CallToolResult>;

  /** A raw JSON-RPC POST, as a client other than the SDK's could send it. */
  const post = (path: string, key: string, body: unknown, sessionId?: string) =>
    fetch(new URL(path, baseUrl), {
      method: 'POST',
      headers: {
        ...bearer(key),
        'content-type': 'application/json',
        accept: ACCEPT,
        ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
      },
      body: JSON.stringify(body),
    });

  async function auditOf(toolCallId: string) {
    const res = await t.http.get(`/api/v1/audit?kind=tool&limit=200`).set(admin()).expect(200);
    return bodyOf<AuditListResponse>(res)
      .entries.filter((e) => e.toolCallId === toolCallId)
      .sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || Number(a.id) - Number(b.id));
  }

  /** The tool call id of the newest MCP proposal of `tool` spent with a decision. */
  async function lastProposal(tool = 'update_record'): Promise<string> {
    const [row] = await t.sql<{ tool_call_id: string }>(
      `select t.tool_call_id from approval_tokens t where t.scope like 'mcp:%' order by t.spent_at desc limit 1`,
    );
    expect(row.tool_call_id).toMatch(/^mcp_/);
    await eventually(async () => (await auditOf(row.tool_call_id)).some((e) => e.tool === tool && !e.action));
    return row.tool_call_id;
  }

  beforeAll(async () => {
    t = await startTestApp({ env: { APPROVAL_SECRET: SECRET } });
    baseUrl = await listen(t);
    await createObject(t, 'item', [fieldSpec('sku', 'text', { required: true, unique: true }), fieldSpec('qty', 'integer')]);
    for (let i = 0; i < 9; i++) {
      await t.http
        .post('/api/v1/objects/item/records')
        .set(admin())
        .send({ sku: `m-${i}`, qty: i })
        .expect(201);
    }
    alice = await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice' });
    bob = await createApiKey(t, { name: 'bob', role: 'member', subject: 'bob' });
    await createAgent(t, {
      name: 'writer',
      label: 'Writer',
      instructions: 'You keep the items up to date.',
      tools: ['query_records', 'get_record', ...WRITE_TOOLS],
      writes: { item: ['create', 'update', 'delete'] },
    });
    await createAgent(t, {
      name: 'updater',
      label: 'Updater',
      instructions: 'You change quantities.',
      tools: ['get_record', ...WRITE_TOOLS],
      writes: { item: ['update'] },
    });
  });
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await t?.close();
  });

  it("lists an agent's write tools to a client that can confirm them (those its writes allow), never on /mcp", async () => {
    const { client } = await connect('/mcp/agents/writer', alice.secret, approve);
    expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(
      ['get_record', 'query_records', ...WRITE_TOOLS].sort(),
    );
    expect(client.getInstructions()).toMatch(/changed through create_record, update_record, delete_record, update_records/);
    const { client: updater } = await connect('/mcp/agents/updater', alice.secret, approve);
    expect((await updater.listTools()).tools.map((tool) => tool.name).sort()).toEqual([
      'get_record',
      'update_record',
      'update_records',
    ]);
    const { client: all } = await connect('/mcp', alice.secret, approve);
    const names = (await all.listTools()).tools.map((tool) => tool.name);
    expect(names).toContain('query_records');
    expect(names.filter((name) => WRITE_TOOLS.includes(name))).toEqual([]);
  });

  it('asks to confirm the diff of update_record; an approval writes it once as the key, audited with the call id', async () => {
    const target = await item('m-1');
    const { client, asked } = await connect('/mcp/agents/writer', alice.secret, approve);
    const result = await update(client, target.id, 1001);
    expect(asked).toHaveLength(1);
    const [request] = asked;
    expect(request.message).toContain(`Record ${target.id}:\n  qty: 1 → 1001`);
    expect(request.message).toContain('"item"');
    expect(request.requestedSchema.required).toEqual(['decision']);
    const proposal = (request._meta as Record<string, { expiresAt: string; changes: unknown[]; token?: string }>)[
      PROPOSAL_META_KEY
    ];
    expect(proposal).toMatchObject({
      objectName: 'item',
      operation: 'update',
      changes: [{ id: target.id, before: { qty: 1 }, after: { qty: 1001 } }],
    });
    expect(proposal.token).toBeUndefined();
    expect(request.message).toContain(proposal.expiresAt);

    expect(result.isError).toBe(false);
    expect(result.structuredContent).toMatchObject({ status: 'written', operation: 'update', records: [{ id: target.id }] });
    const record = await t.http.get(`/api/v1/objects/item/records/${target.id}`).set(bearer(alice.secret)).expect(200);
    expect(bodyOf<{ qty: number }>(record).qty).toBe(1001);
    expect(await changesOf(target.id)).toBe(2); // created, then this one write

    const toolCallId = await lastProposal();
    await eventually(async () => (await auditOf(toolCallId)).length >= 3);
    expect((await auditOf(toolCallId)).map((e) => [e.tool, e.action ?? null, e.outcome, e.keyId])).toEqual([
      ['update_record', null, 'ok', alice.id],
      ['update_record', 'approval.approve', 'ok', alice.id],
      ['update_record', 'record.write', 'ok', alice.id],
    ]);
    expect(
      await t.sql(`select scope like 'mcp:%' as mcp, decision from approval_tokens where tool_call_id = $1`, [toolCallId]),
    ).toEqual([{ mcp: true, decision: 'approve' }]);
  });

  it('writes nothing when the person declines, or rejects with a reason; the result says so', async () => {
    const target = await item('m-2');
    const { client: declining } = await connect('/mcp/agents/writer', alice.secret, () => ({ action: 'decline' }));
    const declined = await update(declining, target.id, 2002);
    expect(declined.isError).toBe(true);
    expect((declined.structuredContent as unknown as ToolErrorContent).error.code).toBe('approval_rejected');

    const { client: rejecting } = await connect('/mcp/agents/writer', alice.secret, () => ({
      action: 'accept',
      content: { decision: 'reject', reason: 'not before the audit' },
    }));
    const rejected = await update(rejecting, target.id, 2003);
    expect(rejected.structuredContent).toMatchObject({
      error: { code: 'approval_rejected', details: { reason: 'not before the audit' } },
    });
    expect((await item('m-2')).qty).toBe(2);
    expect(await changesOf(target.id)).toBe(1);
  });

  it('writes nothing when the record changed between the proposal and the approval: the result is version_changed', async () => {
    const target = await item('m-3');
    const { client } = await connect('/mcp/agents/writer', alice.secret, async () => {
      await t.http.patch(`/api/v1/objects/item/records/${target.id}`).set(bearer(bob.secret)).send({ qty: 33 }).expect(200);
      return { action: 'accept', content: { decision: 'approve' } };
    });
    const result = await update(client, target.id, 3003);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      error: { code: 'version_changed', details: { records: [{ id: target.id, changed: true, current: { qty: 33 } }] } },
    });
    expect((await item('m-3')).qty).toBe(33);
  });

  it('takes the answer on another replica and writes once', async () => {
    const replica = await startTestApp({ database: t.database, env: { APPROVAL_SECRET: SECRET } });
    try {
      const replicaUrl = await listen(replica);
      const target = await item('m-4');
      const answered: string[] = [];
      // Every POST goes to the first replica except the client's answers, which go to the second.
      const split = (url: string | URL, init?: RequestInit) => {
        const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
        if (init?.method === 'POST' && body && !('method' in body)) {
          const there = new URL(new URL(url).pathname, replicaUrl);
          answered.push(there.origin);
          return fetch(there, init);
        }
        return fetch(url, init);
      };
      const { client } = await connect('/mcp/agents/writer', alice.secret, approve, split);
      const result = await update(client, target.id, 4004);
      expect(answered).toEqual([new URL(replicaUrl).origin]);
      expect(result.structuredContent).toMatchObject({ status: 'written' });
      expect((await item('m-4')).qty).toBe(4004);
      expect(await changesOf(target.id)).toBe(2);
      expect(await t.sql(`select count(*)::int as n from mcp_confirmations`)).toEqual([{ n: 0 }]);
    } finally {
      await replica.close();
    }
  });

  it('refuses a forged session id and one issued to another key with 404, doing nothing', async () => {
    const target = await item('m-5');
    const call = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 5005 } } },
    };
    const { transport: bobs } = await connect('/mcp/agents/writer', bob.secret, approve);
    const { transport: alices } = await connect('/mcp/agents/writer', alice.secret, approve);
    const [prefix, body] = alices.sessionId!.split('.');
    // Bob's key id in alice's session, under the signature of hers.
    const forgedBody = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), keyId: bob.id }),
    ).toString('base64url');
    for (const [key, sessionId] of [
      [alice.secret, 'forged'],
      [alice.secret, `${prefix}.${forgedBody}.${alices.sessionId!.split('.')[2]}`],
      [alice.secret, bobs.sessionId!],
      [bob.secret, alices.sessionId!],
    ]) {
      const res = await post('/mcp/agents/writer', key, call, sessionId);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    }
    // A session of another path is unknown there too.
    expect((await post('/mcp/agents/updater', alice.secret, call, alices.sessionId)).status).toBe(404);
    expect((await item('m-5')).qty).toBe(5);
  });

  it("ignores another key's answer to a confirmation: only the session that was asked decides", async () => {
    const target = await item('m-6');
    const { transport: bobs } = await connect('/mcp/agents/writer', bob.secret, approve);
    let alicesSession = '';
    const statuses: number[] = [];
    const { client, transport } = await connect('/mcp/agents/writer', alice.secret, async (_request, requestId) => {
      const approval = { jsonrpc: '2.0', id: requestId, result: { action: 'accept', content: { decision: 'approve' } } };
      // Bob answers with alice's session (refused), then with his own (nothing waits for it there).
      statuses.push((await post('/mcp/agents/writer', bob.secret, approval, alicesSession)).status);
      statuses.push((await post('/mcp/agents/writer', bob.secret, approval, bobs.sessionId)).status);
      return { action: 'decline' };
    });
    alicesSession = transport.sessionId!;
    const result = await update(client, target.id, 6006);
    expect(statuses).toEqual([404, 202]);
    expect(result.structuredContent).toMatchObject({ error: { code: 'approval_rejected' } });
    expect((await item('m-6')).qty).toBe(6);
  });

  it('answers an unknown confirmation id with 202 and nothing done', async () => {
    const { transport } = await connect('/mcp/agents/writer', alice.secret, approve);
    const res = await post(
      '/mcp/agents/writer',
      alice.secret,
      {
        jsonrpc: '2.0',
        id: 'confirm_00000000-0000-0000-0000-000000000000',
        result: { action: 'accept', content: { decision: 'approve' } },
      },
      transport.sessionId,
    );
    expect(res.status).toBe(202);
  });

  it(`keeps at most ${MAX_WAITING_CONFIRMATIONS_PER_KEY} confirmations of one key waiting; the next call is refused, nothing written`, async () => {
    const target = await item('m-7');
    const release: Array<() => void> = [];
    const { client } = await connect(
      '/mcp/agents/writer',
      alice.secret,
      () => new Promise<ElicitResult>((resolve) => release.push(() => resolve({ action: 'cancel' }))),
    );
    const waiting = Array.from({ length: MAX_WAITING_CONFIRMATIONS_PER_KEY }, (_, i) => update(client, target.id, 7000 + i));
    await eventually(() => release.length === MAX_WAITING_CONFIRMATIONS_PER_KEY, 10_000);
    const refused = await update(client, target.id, 7999);
    expect(refused.structuredContent).toMatchObject({ error: { code: 'too_many_confirmations' } });
    for (const answer of release) answer();
    for (const result of await Promise.all(waiting))
      expect(result.structuredContent).toMatchObject({ error: { code: 'approval_rejected' } });
    expect((await item('m-7')).qty).toBe(7);
  });

  it('ends the wait when the client cancels the call, on this replica or another: nothing written, the place freed', async () => {
    const replica = await startTestApp({ database: t.database, env: { APPROVAL_SECRET: SECRET } });
    try {
      const replicaUrl = await listen(replica);
      const target = await item('m-8');
      // Cancellations to the second replica when `elsewhere`, every other POST to the first.
      let elsewhere = false;
      const cancelledOn: string[] = [];
      const split = (url: string | URL, init?: RequestInit) => {
        const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
        if (body?.method === 'notifications/cancelled') {
          const there = elsewhere ? new URL(new URL(url).pathname, replicaUrl) : new URL(url);
          cancelledOn.push(there.origin);
          return fetch(there, init);
        }
        return fetch(url, init);
      };
      const { client, asked } = await connect(
        '/mcp/agents/writer',
        alice.secret,
        () => new Promise<ElicitResult>(() => undefined),
        split,
      );
      const waitingRows = async () => (await t.sql<{ n: number }>(`select count(*)::int as n from mcp_confirmations`))[0].n;
      const expired = async () => {
        const res = await t.http.get(`/api/v1/audit?kind=tool&limit=200`).set(admin()).expect(200);
        return bodyOf<AuditListResponse>(res).entries.filter(
          (e) => e.action === 'approval.expire' && e.toolCallId?.startsWith('mcp_'),
        ).length;
      };
      const expiredBefore = await expired();
      for (const [round, there] of [false, true].entries()) {
        elsewhere = there;
        const controller = new AbortController();
        const call = client.callTool(
          { name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 8080 + round } } },
          undefined,
          { signal: controller.signal },
        );
        await eventually(() => asked.length === round + 1);
        expect(await waitingRows()).toBe(1);
        controller.abort('the user pressed stop');
        await expect(call).rejects.toThrow();
        // The client stays connected: only the cancellation can end the wait before the proposal's 15 minutes.
        await eventually(async () => (await waitingRows()) === 0, 10_000);
        // Recorded as a proposal nobody decided.
        await eventually(async () => (await expired()) === expiredBefore + round + 1);
      }
      expect(cancelledOn).toEqual([new URL(baseUrl).origin, new URL(replicaUrl).origin]);
      expect((await item('m-8')).qty).toBe(8);
      expect(await changesOf(target.id)).toBe(1);
    } finally {
      await replica.close();
    }
  });

  it('ignores a cancellation of the call sent by another key, or from another session of the same key', async () => {
    const target = await item('m-8');
    const callIds: unknown[] = [];
    // Records the JSON-RPC id of alice's tool call, as a host would know it.
    const record = (url: string | URL, init?: RequestInit) => {
      const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
      if (body?.method === 'tools/call') callIds.push(body.id);
      return fetch(url, init);
    };
    const asking = await connect('/mcp/agents/writer', alice.secret, () => new Promise<ElicitResult>(() => undefined), record);
    const { transport: bobs } = await connect('/mcp/agents/writer', bob.secret, approve);
    const { transport: alicesOther } = await connect('/mcp/agents/writer', alice.secret, approve);
    const controller = new AbortController();
    const call = asking.client.callTool(
      { name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 8888 } } },
      undefined,
      { signal: controller.signal },
    );
    call.catch(() => undefined);
    await eventually(() => asking.asked.length === 1);
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: callIds[0], reason: 'not yours' } };
    const unanswered = async () =>
      (await t.sql<{ n: number }>(`select count(*)::int as n from mcp_confirmations where answer is null`))[0].n;
    expect((await post('/mcp/agents/writer', bob.secret, cancel, bobs.sessionId)).status).toBe(202);
    expect((await post('/mcp/agents/writer', alice.secret, cancel, alicesOther.sessionId)).status).toBe(202);
    expect((await post('/mcp/agents/writer', bob.secret, cancel, asking.transport.sessionId)).status).toBe(404);
    expect(await unanswered()).toBe(1);
    // Alice's own session cancels it.
    controller.abort('stop');
    await eventually(async () => (await t.sql<{ n: number }>(`select count(*)::int as n from mcp_confirmations`))[0].n === 0);
    expect((await item('m-8')).qty).toBe(8);
  });

  it('writes nothing when the client leaves while asked: the wait ends, recorded as expired', async () => {
    const target = await item('m-0');
    const { client, asked } = await connect('/mcp/agents/writer', alice.secret, () => new Promise<ElicitResult>(() => undefined));
    const call = update(client, target.id, 9);
    call.catch(() => undefined);
    await eventually(() => asked.length === 1);
    await client.close();
    const toolCallId = await (async () => {
      let id = '';
      await eventually(async () => {
        const res = await t.http.get(`/api/v1/audit?kind=tool&limit=200`).set(admin()).expect(200);
        id =
          bodyOf<AuditListResponse>(res).entries.find((e) => e.action === 'approval.expire' && e.toolCallId?.startsWith('mcp_'))
            ?.toolCallId ?? '';
        return id !== '';
      });
      return id;
    })();
    // The proposal's own entry goes through the audit log's buffer; the decision's is written at once.
    await eventually(async () => (await auditOf(toolCallId)).length >= 2);
    expect((await auditOf(toolCallId)).map((e) => e.action ?? null)).toEqual([null, 'approval.expire']);
    await eventually(async () => (await t.sql<{ n: number }>(`select count(*)::int as n from mcp_confirmations`))[0].n === 0);
    expect((await item('m-0')).qty).toBe(0);
    expect(await changesOf(target.id)).toBe(1);
  });
});

/** One item (qty 1) and an agent `writer` that may propose updates of items, made as the test admin. */
async function withItemAndWriter(t: TestApp): Promise<void> {
  await createObject(t, 'item', [fieldSpec('qty', 'integer', { label: 'Quantity' })]);
  await t.http.post('/api/v1/objects/item/records').set(bearer(t.adminKey)).send({ qty: 1 }).expect(201);
  await createAgent(t, {
    name: 'writer',
    label: 'Writer',
    instructions: 'You keep the items up to date.',
    tools: ['update_record'],
    writes: { item: ['update'] },
  });
}

describe('MCP writes confirmed by elicitation: expiry', () => {
  let t: TestApp;
  let alice: string;

  beforeAll(async () => {
    t = await startTestApp({ env: { APPROVAL_TTL_S: '1' } });
    await withItemAndWriter(t);
    alice = (await createApiKey(t, { name: 'alice', role: 'member' })).secret;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers a confirmation nobody answers in time as approval_expired, and writes nothing', async () => {
    const [target] = await t.sql<{ id: string }>(`select id::text from data.item`);
    const client = new Client({ name: 'mcp-writes-e2e', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, () => new Promise<ElicitResult>(() => undefined));
    await client.connect(
      new StreamableHTTPClientTransport(new URL('/mcp/agents/writer', await listen(t)), {
        requestInit: { headers: bearer(alice) },
      }),
    );
    try {
      const result = (await client.callTool({
        name: 'update_record',
        arguments: { objectName: 'item', recordId: target.id, values: { qty: 2 } },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ error: { code: 'approval_expired' } });
    } finally {
      await client.close();
    }
    expect(await t.sql(`select qty::int as qty from data.item`)).toEqual([{ qty: 1 }]);
    expect(await t.sql(`select count(*)::int as n from approval_tokens`)).toEqual([{ n: 0 }]);
  });
});

describe('MCP writes confirmed by elicitation: shutdown', () => {
  it('ends a waiting confirmation when the server stops: the call reads approval_expired and the app closes', async () => {
    const t = await startTestApp({});
    let closing: Promise<void> | undefined;
    try {
      await withItemAndWriter(t);
      const [target] = await t.sql<{ id: string }>(`select id::text from data.item`);
      const client = new Client({ name: 'mcp-writes-e2e', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
      let asked = 0;
      client.setRequestHandler(ElicitRequestSchema, () => {
        asked += 1;
        return new Promise<ElicitResult>(() => undefined);
      });
      await client.connect(
        new StreamableHTTPClientTransport(new URL('/mcp/agents/writer', await listen(t)), {
          requestInit: { headers: bearer(t.adminKey) },
        }),
      );
      const call = client.callTool({
        name: 'update_record',
        arguments: { objectName: 'item', recordId: target.id, values: { qty: 2 } },
      }) as Promise<CallToolResult>;
      await eventually(() => asked === 1);
      closing = t.close();
      expect((await call).structuredContent).toMatchObject({ error: { code: 'approval_expired' } });
      await client.close();
      await closing;
    } finally {
      if (!closing) await t.close();
    }
  });
});
