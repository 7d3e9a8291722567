import OpenAI, { APIError } from 'openai';
import type { ChatCompletion, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { AuditListResponse } from '../../src/audit/audit.dto';
import { sentMessages, sentToolNames, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { eventually, listen } from '../support/chat-helpers';
import { asAdmin, createAgent, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf } from '../support/responses';
import type { TestApp } from '../support/test-app';

const WRITE_TOOLS = ['create_record', 'update_record', 'delete_record', 'update_records'];

/** The arguments of an approve_write call, as a client reads them. */
interface ProposalCall {
  tool: string;
  arguments: Record<string, unknown>;
  objectName: string;
  operation: string;
  changes: Array<{ id: string | null; etag: string | null; before: Record<string, unknown>; after: Record<string, unknown> }>;
  token: string;
  expiresAt: string;
}

type AssistantMessage = ChatCompletion['choices'][number]['message'];

/** The approve_write calls of an answer, parsed. */
function proposalsOf(message: AssistantMessage): Array<{ id: string; args: ProposalCall }> {
  return (message.tool_calls ?? []).map((call) => {
    if (call.type !== 'function') throw new Error('not a function call');
    expect(call.function.name).toBe('approve_write');
    return { id: call.id, args: JSON.parse(call.function.arguments) as ProposalCall };
  });
}

/** The assistant message as a client sends it back, with the approve_write calls' arguments replaced. */
function echoed(
  message: AssistantMessage,
  change: (args: ProposalCall) => ProposalCall = (args) => args,
): ChatCompletionMessageParam {
  return {
    role: 'assistant',
    content: message.content,
    tool_calls: (message.tool_calls ?? []).map((call) => {
      if (call.type !== 'function') throw new Error('not a function call');
      const args = change(JSON.parse(call.function.arguments) as ProposalCall);
      return { ...call, function: { ...call.function, arguments: JSON.stringify(args) } };
    }),
  };
}

function answer(toolCallId: string, body: Record<string, unknown> | string): ChatCompletionMessageParam {
  return { role: 'tool', tool_call_id: toolCallId, content: typeof body === 'string' ? body : JSON.stringify(body) };
}

/** What the model read for a call, parsed ("Tool call failed: " prefixes an error). */
function resultRead(messages: SentMessage[], toolCallId: string): Record<string, unknown> {
  const message = messages.find((m) => m.role === 'tool' && m.tool_call_id === toolCallId);
  if (!message) throw new Error(`the model read no result of ${toolCallId}`);
  return JSON.parse((message.content ?? '').replace(/^Tool call failed: /, '')) as Record<string, unknown>;
}

/**
 * Writes with approval over the OpenAI-compatible API, with the `openai` SDK: a write proposal comes back as an
 * `approve_write` tool call, and only the client's answer with the proposal's token, from a key that may write,
 * writes anything. The client sends the whole conversation every time: a decision already taken is shown again,
 * never taken twice.
 */
describe('OpenAI-compatible API: writes with approval', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: CreatedApiKeyResponse;
  let aliceAi: OpenAI;
  let bobAi: OpenAI;
  let baseURL: string;

  const item = async (sku: string) =>
    (await t.sql<{ id: string; qty: number | null }>(`select id::text, qty::int as qty from data.item where sku = $1`, [sku]))[0];
  const changesOf = async (id: string) =>
    Number((await t.sql<{ n: string }>(`select count(*) as n from record_changes where record_id = $1::uuid`, [id]))[0].n);
  const spentTokens = async () => Number((await t.sql<{ n: string }>(`select count(*) as n from approval_tokens`))[0].n);

  /** A fresh item (so that tests do not share records) and alice's proposal to set its qty: the paused answer. */
  async function proposal(sku: string, qty: number, id = `call_${sku}`) {
    const created = await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku, qty: 1 }).expect(201);
    const recordId = bodyOf<{ id: string }>(created).id;
    llm.enqueue(
      MockReply.toolCalls([{ id, name: 'update_record', arguments: { objectName: 'item', recordId, values: { qty } } }]),
    );
    const question: ChatCompletionMessageParam = { role: 'user', content: `Set ${sku} to ${qty}` };
    const completion = await aliceAi.chat.completions.create({ model: 'writer', messages: [question] });
    return { recordId, question, completion, message: completion.choices[0].message, id };
  }

  async function refusedWith(status: number, code: string, request: Promise<unknown>): Promise<void> {
    const error = await request.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(status);
    expect((error as APIError).code).toBe(code);
  }

  async function auditOf(toolCallId: string) {
    const res = await t.http.get('/api/v1/audit?kind=tool&limit=200').set(asAdmin(t)).expect(200);
    return bodyOf<AuditListResponse>(res).entries.filter((e) => e.toolCallId === toolCallId);
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { APPROVAL_SECRET: 'openai-compat-approvals-secret-0123456789' } }));
    await createObject(t, 'item', [fieldSpec('sku', 'text', { required: true, unique: true }), fieldSpec('qty', 'integer')]);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'item-reader', objects: { item: { read: true } } })
      .expect(201);
    await createAgent(t, {
      name: 'writer',
      label: 'Writer',
      instructions: 'You keep the items up to date.',
      tools: ['query_records', 'get_record', ...WRITE_TOOLS],
      writes: { item: ['update'] },
    });
    alice = await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice' });
    const bob = await createApiKey(t, { name: 'bob', role: 'member', subject: 'bob' });
    baseURL = `${await listen(t)}/v1`;
    aliceAi = new OpenAI({ baseURL, apiKey: alice.secret, maxRetries: 0 });
    bobAi = new OpenAI({ baseURL, apiKey: bob.secret, maxRetries: 0 });
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });
  beforeEach(() => llm.reset());

  it('returns a write proposal as an approve_write call; the answer approve writes it once, however often the conversation is sent again', async () => {
    const { recordId, question, completion, message, id } = await proposal('a-1', 42);
    expect(sentToolNames(llm, 0)).toEqual(['query_records', 'get_record', ...WRITE_TOOLS]);
    expect(completion.choices[0].finish_reason).toBe('tool_calls');
    const [{ id: callId, args }] = proposalsOf(message);
    const etag = (await t.http.get(`/api/v1/objects/item/records/${recordId}`).set(asAdmin(t)).expect(200)).headers.etag;
    expect(callId).toBe(id);
    expect(args).toMatchObject({
      tool: 'update_record',
      arguments: { objectName: 'item', recordId, values: { qty: 42 } },
      objectName: 'item',
      operation: 'update',
      changes: [{ id: recordId, etag, before: { qty: 1 }, after: { qty: 42 } }],
    });
    expect((await item('a-1')).qty).toBe(1);

    llm.enqueue(MockReply.text('Done: a-1 now has 42.'));
    const approved = [question, echoed(message), answer(id, { decision: 'approve', token: args.token })];
    const done = await aliceAi.chat.completions.create({ model: 'writer', messages: approved });
    expect(done.choices[0].message.content).toBe('Done: a-1 now has 42.');
    expect((await item('a-1')).qty).toBe(42);
    // The model reads its own write call and what came of it; never the token.
    const seen = sentMessages(llm, 1);
    const call = seen.find((m) => m.role === 'assistant' && m.tool_calls)!.tool_calls![0];
    expect(call.function).toEqual({
      name: 'update_record',
      arguments: JSON.stringify({ objectName: 'item', recordId, values: { qty: 42 } }),
    });
    expect(resultRead(seen, id)).toMatchObject({
      status: 'written',
      operation: 'update',
      records: [{ id: recordId }],
      approvedBy: 'alice',
    });
    expect(JSON.stringify(llm.requests[1].body)).not.toContain(args.token);
    // A tool call's own entry is written in a batch, a little later than the decision's and the write's.
    await eventually(async () => (await auditOf(id)).length >= 3);
    const audit = await auditOf(id);
    expect(audit.map((e) => [e.action ?? null, e.outcome, e.keyId]).sort()).toEqual(
      [
        [null, 'ok', alice.id],
        ['approval.approve', 'ok', alice.id],
        ['record.write', 'ok', alice.id],
      ].sort(),
    );

    // The next turn sends the same answer again: nothing is written again, the model reads the same outcome.
    const changes = await changesOf(recordId);
    llm.enqueue(MockReply.text('You are welcome.'));
    await aliceAi.chat.completions.create({
      model: 'writer',
      messages: [
        ...approved,
        { role: 'assistant', content: done.choices[0].message.content },
        { role: 'user', content: 'Thanks' },
      ],
    });
    expect(await changesOf(recordId)).toBe(changes);
    expect(resultRead(sentMessages(llm, 2), id)).toMatchObject({ status: 'written', records: [{ id: recordId }] });
    expect((await auditOf(id)).filter((e) => e.action === 'record.write')).toHaveLength(1);
  });

  it('streams the proposal as tool call chunks; a rejection and its reason reach the model, nothing written', async () => {
    const created = await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 's-1', qty: 1 }).expect(201);
    const recordId = bodyOf<{ id: string }>(created).id;
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_s', name: 'update_record', arguments: { objectName: 'item', recordId, values: { qty: 7 } } },
      ]),
    );
    const question: ChatCompletionMessageParam = { role: 'user', content: 'Set s-1 to 7' };
    const stream = await aliceAi.chat.completions.create({ model: 'writer', messages: [question], stream: true });
    let name = '';
    let argsText = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += delta.function?.name ?? '';
        argsText += delta.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(name).toBe('approve_write');
    const args = JSON.parse(argsText) as ProposalCall;
    expect(args.changes).toEqual([expect.objectContaining({ id: recordId, before: { qty: 1 }, after: { qty: 7 } })]);

    llm.enqueue(MockReply.text('Fine, it stays at 1.'));
    const message: AssistantMessage = {
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [{ id: 'call_s', type: 'function', function: { name, arguments: argsText } }],
    };
    await aliceAi.chat.completions.create({
      model: 'writer',
      messages: [
        question,
        echoed(message),
        answer('call_s', { decision: 'reject', token: args.token, reason: 'Stock was counted today' }),
      ],
    });
    expect((await item('s-1')).qty).toBe(1);
    expect(resultRead(sentMessages(llm, 1), 'call_s')).toMatchObject({
      error: { code: 'approval_rejected', details: { reason: 'Stock was counted today' } },
    });
  });

  it('refuses altered proposals, forged tokens, another key and a key that may no longer write: nothing written', async () => {
    const { recordId, question, message, id } = await proposal('f-1', 300);
    const [{ args }] = proposalsOf(message);
    const spent = await spentTokens();
    const send = (ai: OpenAI, assistant: ChatCompletionMessageParam, reply: Record<string, unknown> | string) =>
      ai.chat.completions.create({ model: 'writer', messages: [question, assistant, answer(id, reply)] });
    const approve = { decision: 'approve', token: args.token };
    const altered = (change: (a: ProposalCall) => void) =>
      echoed(message, (a) => {
        const copy = JSON.parse(JSON.stringify(a)) as ProposalCall;
        change(copy);
        return copy;
      });

    // What is written, what is shown, the arguments, the tool, the operation: each signed.
    const alterations: Array<(a: ProposalCall) => void> = [
      (a) => (a.changes[0].after = { qty: 999 }),
      (a) => (a.changes[0].before = { qty: 300 }),
      (a) => (a.arguments.values = { qty: 999 }),
      (a) => (a.tool = 'delete_record'),
      (a) => (a.operation = 'delete'),
    ];
    for (const alteration of alterations) {
      await refusedWith(403, 'approval_invalid', send(aliceAi, altered(alteration), approve));
    }
    // A token of the right form with another signature, or another expiry.
    const [version, expiry, mac] = args.token.split('.');
    await refusedWith(
      403,
      'approval_invalid',
      send(aliceAi, echoed(message), { ...approve, token: `${version}.${expiry}.${'A'.repeat(mac.length)}` }),
    );
    await refusedWith(
      403,
      'approval_invalid',
      send(aliceAi, echoed(message), { ...approve, token: `${version}.${Number(expiry) + 1}.${mac}` }),
    );
    // Another key sending alice's conversation: the token binds the key it was shown to.
    await refusedWith(403, 'approval_invalid', send(bobAi, echoed(message), approve));
    // An answer that is not a decision, and a client tool named like the server's.
    await refusedWith(400, 'invalid_message', send(aliceAi, echoed(message), 'yes, go ahead'));
    await refusedWith(400, 'invalid_message', send(aliceAi, echoed(message), { decision: 'approve' }));
    await refusedWith(
      400,
      'validation_failed',
      aliceAi.chat.completions.create({
        model: 'writer',
        messages: [question],
        tools: [{ type: 'function', function: { name: 'approve_write', parameters: { type: 'object', properties: {} } } }],
      }),
    );
    // Alice's key put under a read-only policy: it may not make the write it was shown.
    await t.http
      .patch(`/api/v1/api-keys/${alice.id}`)
      .set(asAdmin(t))
      .send({ policies: ['item-reader'] })
      .expect(200);
    try {
      await refusedWith(403, 'approval_invalid', send(aliceAi, echoed(message), approve));
    } finally {
      await t.http.patch(`/api/v1/api-keys/${alice.id}`).set(asAdmin(t)).send({ policies: [] }).expect(200);
    }
    expect((await item('f-1')).qty).toBe(1);
    expect(await changesOf(recordId)).toBe(1);
    expect(await spentTokens()).toBe(spent);
    expect(llm.requests).toHaveLength(1);

    // No false alarm: the genuine answer, with the arguments' keys in another order, still writes.
    llm.enqueue(MockReply.text('Done.'));
    const reordered = echoed(message, (a) => ({
      ...a,
      arguments: { values: a.arguments.values, recordId: a.arguments.recordId, objectName: a.arguments.objectName },
    }));
    await send(aliceAi, reordered, approve);
    expect((await item('f-1')).qty).toBe(300);
  });

  it('refuses a proposal handed back with its expiry moved, or with another token in it: 403, nothing written; the unaltered one approves', async () => {
    const { recordId, question, message, id } = await proposal('x-1', 400);
    const [{ args }] = proposalsOf(message);
    const spent = await spentTokens();
    const approve = { decision: 'approve', token: args.token };
    const send = (assistant: ChatCompletionMessageParam) =>
      aliceAi.chat.completions.create({ model: 'writer', messages: [question, assistant, answer(id, approve)] });
    const shown = Date.parse(args.expiresAt);
    expect(shown).toBe(Number(args.token.split('.')[1]));

    const alterations: Array<Partial<ProposalCall>> = [
      { expiresAt: new Date(shown + 7 * 24 * 3600_000).toISOString() },
      { expiresAt: new Date(shown - 60_000).toISOString() },
      { token: `${args.token.split('.').slice(0, 2).join('.')}.${'B'.repeat(43)}` },
    ];
    for (const alteration of alterations) {
      await refusedWith(403, 'approval_invalid', send(echoed(message, (a) => ({ ...a, ...alteration }))));
    }
    expect((await item('x-1')).qty).toBe(1);
    expect(await changesOf(recordId)).toBe(1);
    expect(await spentTokens()).toBe(spent);
    expect(llm.requests).toHaveLength(1);

    llm.enqueue(MockReply.text('Done.'));
    await send(echoed(message));
    expect((await item('x-1')).qty).toBe(400);
  });

  it('writes nothing when the record changed after the proposal: the model reads version_changed with the current values', async () => {
    const { recordId, question, message, id } = await proposal('v-1', 400);
    const [{ args }] = proposalsOf(message);
    await t.http.patch(`/api/v1/objects/item/records/${recordId}`).set(asAdmin(t)).send({ qty: 5 }).expect(200);
    llm.enqueue(MockReply.text('Someone changed it.'));
    await aliceAi.chat.completions.create({
      model: 'writer',
      messages: [question, echoed(message), answer(id, { decision: 'approve', token: args.token })],
    });
    expect((await item('v-1')).qty).toBe(5);
    expect(resultRead(sentMessages(llm, 1), id)).toMatchObject({
      error: { code: 'version_changed', details: { records: [{ id: recordId, changed: true, current: { qty: 5 } }] } },
    });
  });

  it('refuses an approval from a key at its token quota with 429 before deciding anything: nothing written, the token still good', async () => {
    const carol = await createApiKey(t, { name: 'carol', role: 'member', subject: 'carol', tokensPerDay: 100 });
    const carolAi = new OpenAI({ baseURL, apiKey: carol.secret, maxRetries: 0 });
    const created = await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 'q-1', qty: 1 }).expect(201);
    const recordId = bodyOf<{ id: string }>(created).id;
    // The proposal's own model call takes the key past its quota.
    llm.enqueue(
      MockReply.toolCalls(
        [{ id: 'call_quota', name: 'update_record', arguments: { objectName: 'item', recordId, values: { qty: 9 } } }],
        { usage: { prompt_tokens: 90, completion_tokens: 30 } },
      ),
    );
    const question: ChatCompletionMessageParam = { role: 'user', content: 'Set q-1 to 9' };
    const completion = await carolAi.chat.completions.create({ model: 'writer', messages: [question] });
    const message = completion.choices[0].message;
    const [{ args }] = proposalsOf(message);
    const approved = [question, echoed(message), answer('call_quota', { decision: 'approve', token: args.token })];
    const spent = await spentTokens();
    const changes = await changesOf(recordId);

    await refusedWith(429, 'quota_exceeded', carolAi.chat.completions.create({ model: 'writer', messages: approved }));
    expect((await item('q-1')).qty).toBe(1);
    expect(await changesOf(recordId)).toBe(changes);
    expect(await spentTokens()).toBe(spent);
    expect((await auditOf('call_quota')).filter((e) => e.action)).toEqual([]);
    expect(llm.requests).toHaveLength(1);

    // With room again, the same answer decides: the write is made once, and the model reads it.
    await t.http.patch(`/api/v1/api-keys/${carol.id}`).set(asAdmin(t)).send({ tokensPerDay: 1000 }).expect(200);
    llm.enqueue(MockReply.text('Done.'));
    await carolAi.chat.completions.create({ model: 'writer', messages: approved });
    expect((await item('q-1')).qty).toBe(9);
    expect(resultRead(sentMessages(llm, 1), 'call_quota')).toMatchObject({ status: 'written', records: [{ id: recordId }] });
  });

  it('writes once when the same answer arrives twice at once', async () => {
    const { recordId, question, message, id } = await proposal('c-1', 11);
    const [{ args }] = proposalsOf(message);
    llm.enqueue(MockReply.text('Done.'), MockReply.text('Done.'));
    const messages = [question, echoed(message), answer(id, { decision: 'approve', token: args.token })];
    await Promise.all([0, 1].map(() => aliceAi.chat.completions.create({ model: 'writer', messages })));
    expect((await item('c-1')).qty).toBe(11);
    expect(await changesOf(recordId)).toBe(2);
    expect(resultRead(sentMessages(llm, 1), id)).toMatchObject({ status: 'written' });
    expect(resultRead(sentMessages(llm, 2), id)).toMatchObject({ status: 'written' });
  });

  it('offers no write tool to the stateless chat route: a call made anyway writes nothing', async () => {
    const { recordId } = { recordId: (await item('a-1')).id };
    llm.enqueue(
      MockReply.toolCall('update_record', { objectName: 'item', recordId, values: { qty: 1000 } }),
      MockReply.text('No.'),
    );
    await t.http
      .post('/api/v1/ai/agents/writer/chat')
      .set({ Authorization: `Bearer ${alice.secret}` })
      .send({ messages: [{ role: 'user', content: 'Set a-1 to 1000' }] })
      .expect(200);
    expect(sentToolNames(llm, 0)).toEqual(['query_records', 'get_record']);
    expect((await item('a-1')).qty).toBe(42);
  });
});

describe('OpenAI-compatible API: an answer after the proposal expired', () => {
  let t: TestApp;
  let llm: MockLlmServer;

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { APPROVAL_TTL_S: '1' } }));
    await createObject(t, 'item', [fieldSpec('sku', 'text'), fieldSpec('qty', 'integer')]);
    await createAgent(t, {
      name: 'writer',
      label: 'Writer',
      instructions: 'x',
      tools: ['update_record'],
      writes: { item: ['update'] },
    });
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });

  it('writes nothing; the model reads approval_expired, once audited however often it is sent', async () => {
    const created = await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 'e-1', qty: 1 }).expect(201);
    const recordId = bodyOf<{ id: string }>(created).id;
    const ai = new OpenAI({ baseURL: `${await listen(t)}/v1`, apiKey: t.adminKey, maxRetries: 0 });
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_e', name: 'update_record', arguments: { objectName: 'item', recordId, values: { qty: 2 } } },
      ]),
    );
    const question: ChatCompletionMessageParam = { role: 'user', content: 'Set e-1 to 2' };
    const { message } = (await ai.chat.completions.create({ model: 'writer', messages: [question] })).choices[0];
    const [{ args }] = proposalsOf(message);
    await sleep(1100);
    const messages = [question, echoed(message), answer('call_e', { decision: 'approve', token: args.token })];
    for (const round of [1, 2]) {
      llm.enqueue(MockReply.text('It expired.'));
      await ai.chat.completions.create({ model: 'writer', messages });
      expect(resultRead(sentMessages(llm, round), 'call_e')).toMatchObject({ error: { code: 'approval_expired' } });
    }
    const rows = await t.sql<{ qty: number }>(`select qty::int as qty from data.item where id = $1::uuid`, [recordId]);
    expect(rows[0].qty).toBe(1);
    const audit = bodyOf<AuditListResponse>(await t.http.get('/api/v1/audit?kind=tool&limit=50').set(asAdmin(t)).expect(200));
    expect(audit.entries.filter((e) => e.toolCallId === 'call_e' && e.action === 'approval.expire')).toHaveLength(1);
  });
});
