import OpenAI from 'openai';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatMessageResponse, ChatMessagesResponse, ReceiptReplayResponse } from '../../src/chats/durable/chat.dto';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import type { Grounding } from '../../src/runtime/grounding';
import { parsedContent, sentMessages, startAppWithMockLlm, type SentMessage } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { asAdmin, createAgent, createApiKey } from '../support/fixtures';
import { BY_OWNER, createOwnerDeals } from '../support/owner-deals';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf, idOf, rawText } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { textOf, uiChat } from '../support/ui-chat';

const ANSWER = 'pat leads with {{r1.1.total}} ({{r1.1.n}} deals, {{r1.1.total|compact}}); sam follows with {{r1.2.total}}.';
const SHOWN = 'pat leads with $2,500,000.50 (3 deals, $2.5M); sam follows with $1,250,000.';

/** The deltas of the text of a UI message stream's body. */
const textDeltas = (body: string) =>
  body
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)) as { type: string; delta?: string })
    .filter((chunk) => chunk.type === 'text-delta')
    .map((chunk) => chunk.delta!);

/** Splits a text into chunks of `size` characters: a reference arrives in pieces. */
const chunks = (text: string, size: number) =>
  Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));

describe('Figures by reference', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let member: CreatedApiKeyResponse;

  const ask = (question: string, agent = 'data_chat', key = t.adminKey) =>
    t.http
      .post(`/api/v1/ai/agents/${agent}/chat`)
      .set(bearer(key))
      .send({ messages: [{ role: 'user', content: question }] })
      .expect(200)
      .then((res) => bodyOf<StatelessChatResponse>(res));
  const byOwner = (id = 'call_owners') => MockReply.toolCalls([{ id, name: 'aggregate_data', arguments: BY_OWNER }]);
  const messagesOf = async (id: string, key = t.adminKey) =>
    bodyOf<ChatMessagesResponse>(await t.http.get(`/api/v1/chats/${id}/messages`).set(bearer(key)).expect(200)).messages;
  const lastAnswer = (messages: ChatMessageResponse[]) => messages.filter((m) => m.role === 'assistant').at(-1)!;
  const textPart = (message: ChatMessageResponse) =>
    (message.parts as Array<{ type: string; text?: string }>).flatMap((p) => (p.type === 'text' ? [p.text!] : [])).join('');
  async function durableChat(message: string, key = t.adminKey): Promise<string> {
    const id = idOf(await t.http.post('/api/v1/chats').set(bearer(key)).send({ agent: 'data_chat', message }).expect(201));
    await waitForChat(t, id, hasStatus('waiting', 'error'), key);
    return id;
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { CHAT_POLL_INTERVAL_MS: '200' } }));
    baseUrl = await listen(t);
    await createOwnerDeals(t);
    const dataChat = bodyOf<Record<string, unknown>>(await t.http.get('/api/v1/ai/agents/data_chat').set(asAdmin(t)).expect(200));
    const spec = { ...dataChat };
    for (const key of ['createdAt', 'updatedAt', 'version']) delete spec[key];
    await createAgent(t, { ...spec, name: 'strict_chat', grounding: 'retry' });
    await createAgent(t, { ...spec, name: 'german_chat', locale: 'de-DE' });
    member = await createApiKey(t, { name: 'pat', role: 'member', subject: 'pat', policies: ['own-deals'] });
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  it('gives every row of a data result a ref the model reads, fills references in for the column and keeps a receipt of each', async () => {
    llm.enqueue(byOwner(), MockReply.text(ANSWER));
    const answer = await ask('Who won the most?');

    // What the model read: the result named r1, its rows r1.1 and r1.2.
    const tool = sentMessages(llm, 1).find((m) => m.role === 'tool')!;
    const result = parsedContent<{ resultRef: string; rows: Array<{ ref: string; owner: string }> }>(tool);
    expect(result.resultRef).toBe('r1');
    expect(result.rows.map((r) => [r.ref, r.owner])).toEqual([
      ['r1.1', 'pat'],
      ['r1.2', 'sam'],
    ]);
    // What the client got: the figures, never the references.
    expect(answer.content).toBe(SHOWN);
    expect(answer.toolCalls[0].result).toMatchObject({ resultRef: 'r1', rows: [{ ref: 'r1.1' }, { ref: 'r1.2' }] });
    expect(answer.grounding!.receipts).toEqual([
      {
        ref: 'r1.1.total',
        text: '$2,500,000.50',
        toolCallId: 'call_owners',
        tool: 'aggregate_data',
        row: 1,
        column: 'total',
        value: 2_500_000.5,
      },
      { ref: 'r1.1.n', text: '3', toolCallId: 'call_owners', tool: 'aggregate_data', row: 1, column: 'n', value: 3 },
      {
        ref: 'r1.1.total',
        text: '$2.5M',
        toolCallId: 'call_owners',
        tool: 'aggregate_data',
        row: 1,
        column: 'total',
        value: 2_500_000.5,
      },
      {
        ref: 'r1.2.total',
        text: '$1,250,000',
        toolCallId: 'call_owners',
        tool: 'aggregate_data',
        row: 2,
        column: 'total',
        value: 1_250_000,
      },
    ]);
    // "pat leads" is a claim in words too (a rank), which the result's order supports.
    expect(answer.grounding!.summary).toEqual({ referenced: 4, typed: 1, supported: 5, unsupported: 0 });
    expect(answer.grounding!.unsupported).toEqual([]);
  });

  it("writes a referenced figure in the agent's locale", async () => {
    llm.enqueue(byOwner(), MockReply.text('pat: {{r1.1.total}}, {{r1.1.total|compact}}, sam: {{r1.2.total|int}}'));
    const answer = await ask('Wer führt?', 'german_chat');
    expect(answer.content.replace(/\u00a0/g, ' ')).toBe('pat: 2.500.000,50 $, 2,5 Mio. $, sam: 1.250.000 $');
  });

  it('never streams half a reference: the UI message stream shows each figure whole, as the JSON answer does', async () => {
    llm.enqueue(byOwner(), MockReply.text(chunks(ANSWER, 3)));
    const res = await t.http
      .post('/api/v1/ai/agents/data_chat/chat')
      .set(bearer(t.adminKey))
      .send({ messages: [{ role: 'user', content: 'Who won the most?' }], stream: true })
      .buffer(true)
      .parse(rawText)
      .expect(200);
    const deltas = textDeltas(res.body as string);
    expect(deltas.join('')).toBe(SHOWN);
    expect(deltas.some((d) => d.includes('{') || d.includes('}') || /r1\./.test(d))).toBe(false);
  });

  it('shows a reference that does not resolve as [figure unavailable], flags it, and names it in the correction', async () => {
    llm.enqueue(
      byOwner(),
      MockReply.text('pat leads with {{r1.1.total}}; sam has {{r1.7.total}} and {{r4.1.total}}.'),
      MockReply.text('pat leads with {{r1.1.total}}.'),
    );
    const answer = await ask('Who won the most?', 'strict_chat');

    expect(answer.content).toBe('pat leads with $2,500,000.50.');
    // The correction the model received names the two references it must fix.
    const correction = sentMessages(llm, 2).at(-1)!;
    expect(correction.role).toBe('user');
    expect(correction.content).toContain('"{{r1.7.total}}"');
    expect(correction.content).toContain('"{{r4.1.total}}"');
    // The first answer, as the model read it back, showed no raw reference either.
    expect(sentMessages(llm, 2).at(-2)!.content).toBe(
      'pat leads with $2,500,000.50; sam has [figure unavailable] and [figure unavailable].',
    );
  });

  it('flags a reference whose row is not the one its clause names as other_row', async () => {
    llm.enqueue(byOwner(), MockReply.text('sam leads with {{r1.1.total}}, and {{r9}} is a typo.'));
    const answer = await ask('Who won the most?');
    expect(answer.content).toBe('sam leads with $2,500,000.50, and [figure unavailable] is a typo.');
    expect(answer.grounding!.unsupported).toEqual([
      // Twice wrong: sam does not lead (the rank in words), and the figure is pat's.
      { text: 'sam leads with', reason: 'other_row' },
      { text: '$2,500,000.50', reason: 'other_row', ref: '{{r1.1.total}}' },
      { text: '[figure unavailable]', reason: 'bad_reference', ref: '{{r9}}' },
    ]);
    expect(answer.grounding!.summary).toEqual({ referenced: 2, typed: 1, supported: 0, unsupported: 3 });
  });

  it('numbers results across the turns of a durable chat, resolves a reference to an earlier turn, and stores what was shown with its receipts', async () => {
    llm.enqueue(byOwner('call_t1'), MockReply.text('pat leads with {{r1.1.total}}.'));
    const id = await durableChat('Who won the most?');
    // calculate computes only with this turn's results: the second turn reads the owners again (r2), then r3.
    llm.enqueue(
      byOwner('call_t2'),
      MockReply.toolCalls([{ id: 'call_t3', name: 'calculate', arguments: { expression: '2500000.5 - 1250000' } }]),
      MockReply.text('pat ({{r1.1.total}}) is {{r3}} ahead of sam ({{r2.2.total}}).'),
    );
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(t.adminKey)).send({ message: 'By how much?' }).expect(202);
    await waitForChat(t, id, hasStatus('waiting', 'error'));

    const sent = sentMessages(llm, 4);
    const resultOf = (callId: string) =>
      parsedContent<{ resultRef: string; ref?: string }>(sent.find((m: SentMessage) => m.tool_call_id === callId)!);
    expect(resultOf('call_t1').resultRef).toBe('r1');
    expect(resultOf('call_t2').resultRef).toBe('r2');
    expect(resultOf('call_t3')).toMatchObject({ resultRef: 'r3', ref: 'r3' });
    const answer = lastAnswer(await messagesOf(id));
    expect(textPart(answer)).toBe('pat ($2,500,000.50) is $1,250,000.50 ahead of sam ($1,250,000).');
    const grounding = (answer.metadata as { grounding: Grounding }).grounding;
    expect(grounding.receipts!.map((r) => [r.ref, r.toolCallId, r.text])).toEqual([
      ['r1.1.total', 'call_t1', '$2,500,000.50'],
      ['r3', 'call_t3', '$1,250,000.50'],
      ['r2.2.total', 'call_t2', '$1,250,000'],
    ]);
    expect(grounding.unsupported).toEqual([]);
    // The model's next turn reads the answer as it was shown.
    expect(
      sentMessages(llm, 2)
        .filter((m) => m.role === 'assistant')
        .at(-1)!.content,
    ).toBe('pat leads with $2,500,000.50.');
  });

  it("streams a durable chat's text with references filled in (message_part deltas)", async () => {
    llm.enqueue(byOwner('call_s1'), MockReply.text(chunks(ANSWER, 4), { chunkDelayMs: 5 }));
    const id = idOf(
      await t.http.post('/api/v1/chats').set(bearer(t.adminKey)).send({ agent: 'data_chat', message: 'Who?' }).expect(201),
    );
    const stream = await SseClient.open(baseUrl, `/api/v1/chats/${id}/stream?until=idle`, t.adminKey);
    await stream.waitForEnd();
    const deltas = stream.events.filter((e) => e.event === 'message_part').map((e) => e.data.delta!);
    expect(deltas.join('')).toBe(SHOWN);
    expect(deltas.some((d) => /[{}]/.test(d))).toBe(false);
  });

  it('replays a receipt: the same call under the current access says which referenced figures changed', async () => {
    llm.enqueue(byOwner('call_replay'), MockReply.text(ANSWER));
    const id = await durableChat('Who won the most?');
    const replay = () =>
      t.http.post(`/api/v1/chats/${id}/receipts/replay`).set(bearer(t.adminKey)).send({ toolCallId: 'call_replay' });

    expect(bodyOf<ReceiptReplayResponse>(await replay().expect(200))).toMatchObject({ changed: [], unchanged: 4 });
    const [sams] = await t.sql<{ id: string }>(`select id from data.deal where owner = 'sam' and amount = 350000`);
    await t.http.patch(`/api/v1/objects/deal/records/${sams.id}`).set(asAdmin(t)).send({ amount: 360_000 }).expect(200);

    const after = bodyOf<ReceiptReplayResponse>(await replay().expect(200));
    expect(after).toMatchObject({
      toolCallId: 'call_replay',
      changed: [{ ref: 'r1.2.total', then: 1_250_000, now: 1_260_000 }],
      unchanged: 3,
    });
    expect(Date.parse(after.ranAt)).not.toBeNaN();
    await t.http.patch(`/api/v1/objects/deal/records/${sams.id}`).set(asAdmin(t)).send({ amount: 350_000 }).expect(200);

    // A call that is no data result, or is not there, is not found.
    expect(
      errorOf(
        await t.http.post(`/api/v1/chats/${id}/receipts/replay`).set(bearer(t.adminKey)).send({ toolCallId: 'nope' }).expect(404),
      ).code,
    ).toBe('receipt_not_found');
    await t.http.post(`/api/v1/chats/${id}/receipts/replay`).set(bearer(t.adminKey)).send({}).expect(400);
  });

  it("says which access shaped an answer (row filter, hidden fields) and replays nothing once the key's policy narrows", async () => {
    llm.enqueue(byOwner('call_member'), MockReply.text('You won {{r1.1.total}} over {{r1.1.n}} deals; your margin is hidden.'));
    const id = await durableChat('What did I win, and my margin?', member.secret);
    const answer = lastAnswer(await messagesOf(id, member.secret));
    expect(textPart(answer)).toBe('You won $2,500,000.50 over 3 deals; your margin is hidden.');
    const grounding = (answer.metadata as { grounding: Grounding }).grounding;
    expect(grounding.caveats).toEqual([
      { object: 'deal', kind: 'row_filter' },
      { object: 'deal', kind: 'hidden_fields', fields: ['margin'] },
    ]);
    const replay = () =>
      t.http.post(`/api/v1/chats/${id}/receipts/replay`).set(bearer(member.secret)).send({ toolCallId: 'call_member' });
    expect(bodyOf<ReceiptReplayResponse>(await replay().expect(200))).toMatchObject({ changed: [], unchanged: 2 });

    await t.http
      .put('/api/v1/policies/own-deals')
      .set(asAdmin(t))
      .send({ objects: { deal: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['margin', 'amount'] } } })
      .expect(200);
    expect(errorOf(await replay().expect(404)).code).toBe('receipt_not_found');

    // The next turn runs under the narrower access: the earlier result is withheld but keeps its number, so the
    // new one is r2, and a reference to the withheld one shows nothing of it.
    const COUNT = { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] };
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_member_2', name: 'aggregate_data', arguments: COUNT }]),
      MockReply.text('Earlier you won {{r1.1.total}}; you have {{r2.1.n}} deals.'),
    );
    await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(member.secret)).send({ message: 'And now?' }).expect(202);
    await waitForChat(t, id, hasStatus('waiting', 'error'), member.secret);
    const sent = sentMessages(llm, 3);
    expect(sent.find((m) => m.tool_call_id === 'call_member')!.content).toBe('result withheld: produced under other access (r1)');
    expect(parsedContent<{ resultRef: string }>(sent.find((m) => m.tool_call_id === 'call_member_2')!).resultRef).toBe('r2');
    const next = lastAnswer(await messagesOf(id, member.secret));
    expect(textPart(next)).toBe('Earlier you won [figure unavailable]; you have 3 deals.');
    const nextGrounding = (next.metadata as { grounding: Grounding }).grounding;
    expect(nextGrounding.unsupported).toEqual([{ text: '[figure unavailable]', reason: 'bad_reference', ref: '{{r1.1.total}}' }]);
    expect(JSON.stringify(nextGrounding)).not.toContain('2500000');
  });

  it('fills references in on /v1, whole and streamed, through the openai SDK', async () => {
    const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: t.adminKey, maxRetries: 0 });
    llm.enqueue(byOwner('call_v1'), MockReply.text(ANSWER));
    const completion = await openai.chat.completions.create({
      model: 'data_chat',
      messages: [{ role: 'user', content: 'Who?' }],
    });
    expect(completion.choices[0].message.content).toBe(SHOWN);

    llm.enqueue(byOwner('call_v2'), MockReply.text(chunks(ANSWER, 5)));
    const stream = await openai.chat.completions.create({
      model: 'data_chat',
      messages: [{ role: 'user', content: 'Who?' }],
      stream: true,
    });
    const deltas: string[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) deltas.push(chunk.choices[0].delta.content);
    expect(deltas.join('')).toBe(SHOWN);
    expect(deltas.some((d) => /[{}]/.test(d))).toBe(false);
  });

  it("fills references in for the AI SDK's Chat on a durable useChat chat, whose receipts replay by the client's chat id", async () => {
    llm.enqueue(byOwner('call_ui'), MockReply.text(chunks(ANSWER, 2)));
    const clientId = `refs-${Date.now().toString(36)}`;
    const chat = uiChat(baseUrl, '/api/v1/ai/agents/data_chat/chats', t.adminKey, { id: clientId });
    await chat.sendMessage({ text: 'Who?' });
    expect(chat.error).toBeUndefined();
    expect(textOf(chat.messages.at(-1))).toBe(SHOWN);

    const replay = (agent: string, id: string, toolCallId = 'call_ui') =>
      t.http.post(`/api/v1/ai/agents/${agent}/chats/${id}/receipts/replay`).set(bearer(t.adminKey)).send({ toolCallId });
    expect(bodyOf<ReceiptReplayResponse>(await replay('data_chat', clientId).expect(200))).toMatchObject({
      toolCallId: 'call_ui',
      changed: [],
      unchanged: 4,
    });
    // Another agent's door, another owner's key, an unknown call: nothing to replay.
    expect(errorOf(await replay('strict_chat', clientId).expect(404)).code).toBe('chat_not_found');
    expect(
      errorOf(
        await t.http
          .post(`/api/v1/ai/agents/data_chat/chats/${clientId}/receipts/replay`)
          .set(bearer(member.secret))
          .send({ toolCallId: 'call_ui' })
          .expect(404),
      ).code,
    ).toBe('chat_not_found');
    expect(errorOf(await replay('data_chat', clientId, 'nope').expect(404)).code).toBe('receipt_not_found');
    expect(errorOf(await replay('data_chat', 'a.b').expect(400)).code).toBe('validation_failed');
  });
});
