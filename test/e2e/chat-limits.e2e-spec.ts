import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import { sentMessages, startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply, RecordedRequest } from '../support/mock-llm.server';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';

const FAST = { CHAT_POLL_INTERVAL_MS: '200', CHAT_HEARTBEAT_INTERVAL_MS: '100' };

/** A new member key on `t`. */
async function memberKey(t: TestApp, name: string): Promise<CreatedApiKeyResponse> {
  return bodyOf<CreatedApiKeyResponse>(
    await t.http.post('/api/v1/api-keys').set(bearer(t.adminKey)).send({ name, role: 'member' }).expect(201),
  );
}

/** A gate the model's answers wait behind, so a test decides when the worker's slots free up. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** Queues `count` answers that each wait for `opened`. */
function enqueueGated(llm: MockLlmServer, count: number, opened: Promise<void>): void {
  for (let i = 0; i < count; i++) {
    llm.enqueue(async () => {
      await opened;
      return MockReply.text('ok', { delayMs: 10 });
    });
  }
}

/** The user message a model request answers: which chat the worker was running. */
function askedBy(llm: MockLlmServer, request: RecordedRequest): string {
  return String(
    sentMessages(llm, request.index)
      .filter((m) => m.role === 'user')
      .at(-1)?.content,
  );
}

describe("one member cannot starve everyone's durable chats (finding 6)", () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let alice: string;
  let aliceSubject: string;
  let bob: string;
  const aliceChats: string[] = [];

  const create = (key: string, message: string) =>
    t.http.post('/api/v1/chats').set(bearer(key)).send({ agent: 'data_chat', message });

  beforeAll(async () => {
    // One worker slot and at most 6 chats in flight per key make the queue and the cap easy to fill.
    ({ t, llm } = await startAppWithMockLlm({
      env: { ...FAST, CHAT_WORKER_CONCURRENCY: '1', CHAT_MAX_IN_FLIGHT_PER_KEY: '6' },
    }));
    ({ secret: alice, subject: aliceSubject } = await memberKey(t, 'alice'));
    bob = (await memberKey(t, 'bob')).secret;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it("claims another key's first chat before the first key's backlog, and refuses chats beyond the cap with 429 and Retry-After", async () => {
    const answers = gate();
    enqueueGated(llm, 7, answers.opened);
    for (let i = 1; i <= 6; i++) aliceChats.push(idOf(await create(alice, `alice ${i}`).expect(201)));
    // The only slot runs alice 1; alice 2..6 are pending, and the 7th is over the cap.
    await llm.waitForRequests(1);
    const refused = await create(alice, 'alice 7').expect(429);
    expect(refused.headers['retry-after']).toBe('5');
    expect(refused.body).toMatchObject({ code: 'too_many_chats', details: { inFlight: 6, limit: 6 } });
    // The cap is per key: bob's chat is accepted, and comes next although alice's backlog is older.
    const bobChat = idOf(await create(bob, 'bob 1').expect(201));
    expect((await waitForChat(t, aliceChats[1], () => true, alice)).status).toBe('pending');

    answers.open();
    await waitForChat(t, bobChat, hasStatus('waiting'), bob);
    for (const id of aliceChats) await waitForChat(t, id, hasStatus('waiting'), alice);
    expect(llm.requests.map((request) => askedBy(llm, request))).toEqual([
      'alice 1',
      'bob 1',
      'alice 2',
      'alice 3',
      'alice 4',
      'alice 5',
      'alice 6',
    ]);
    const [{ n }] = await t.sql<{ n: string }>(`select count(*) as n from chats where owner = $1`, [aliceSubject]);
    expect(Number(n)).toBe(6);
  });

  it('counts new messages against the same cap, and frees a slot when a chat is answered', async () => {
    llm.reset();
    const answers = gate();
    enqueueGated(llm, 6, answers.opened);
    // Five waiting chats take a new turn: one runs, four wait for the slot.
    for (const id of aliceChats.slice(0, 5)) {
      await t.http.post(`/api/v1/chats/${id}/messages`).set(bearer(alice)).send({ message: 'again' }).expect(202);
    }
    await llm.waitForRequests(1);
    aliceChats.push(idOf(await create(alice, 'alice 7').expect(201)));
    const refused = await t.http
      .post(`/api/v1/chats/${aliceChats[5]}/messages`)
      .set(bearer(alice))
      .send({ message: 'one more' })
      .expect(429);
    expect(refused.headers['retry-after']).toBe('5');
    expect(errorOf(refused).code).toBe('too_many_chats');
    expect((await waitForChat(t, aliceChats[5], () => true, alice)).status).toBe('waiting');

    answers.open();
    for (const id of aliceChats) await waitForChat(t, id, hasStatus('waiting'), alice);
    llm.enqueue(MockReply.text('ok'));
    await t.http.post(`/api/v1/chats/${aliceChats[5]}/messages`).set(bearer(alice)).send({ message: 'one more' }).expect(202);
    await waitForChat(t, aliceChats[5], hasStatus('waiting'), alice);
  });
});
