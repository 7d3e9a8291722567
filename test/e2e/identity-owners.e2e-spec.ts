import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { ChatListResponse, ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import type { ViewListResponse } from '../../src/views/view.dto';
import { MigrationPrincipalOwners } from '../../src/database/migrations/migration-20261206-principal-owners';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { OidcIssuer, TEST_AUDIENCE } from '../support/oidc-issuer';
import { bodyOf, errorOf, type RecordPage } from '../support/responses';
import { textOf, uiChat } from '../support/ui-chat';
import { bearer, type TestApp } from '../support/test-app';

/**
 * A user's chats are the user's by issuer and subject: two issuers' users with the same `sub`, and a key
 * whose subject is that `sub`, are three owners, on every route that reads or acts on a chat.
 */
describe('end-user identity: what a user owns is its own, by issuer and subject', () => {
  let first: OidcIssuer;
  let second: OidcIssuer;
  let t: TestApp;
  let llm: MockLlmServer;
  let url: string;
  /** A key acting for the subject both issuers' users have. */
  let samKey: CreatedApiKeyResponse;

  /** A fresh token of `issuer` for its user "sam" (each call asks the provider for a new one). */
  const sam = (issuer: OidcIssuer) => issuer.token('sam');
  const small = { usage: { prompt_tokens: 2, completion_tokens: 1 } };

  /** Starts a durable chat as `token` and waits until its turn ended. */
  async function chatOf(token: string, message: string, agent = 'data_chat'): Promise<ChatResponse> {
    const created = bodyOf<ChatResponse>(
      await t.http.post('/api/v1/chats').set(bearer(token)).send({ agent, message }).expect(201),
    );
    return waitForChat(t, created.id, hasStatus('waiting', 'requires_approval', 'error'), token);
  }

  const listed = async (token: string) =>
    bodyOf<ChatListResponse>(await t.http.get('/api/v1/chats').set(bearer(token)).expect(200)).chats.map((c) => c.id);

  /** Every route of a chat answers `token` 404 chat_not_found, as for a chat that does not exist. */
  async function expectNotFound(token: string, chatId: string): Promise<void> {
    const auth = bearer(token);
    const answers = [
      await t.http.get(`/api/v1/chats/${chatId}`).set(auth),
      await t.http.get(`/api/v1/chats/${chatId}/messages`).set(auth),
      await t.http.get(`/api/v1/chats/${chatId}/stream`).set(auth),
      await t.http.post(`/api/v1/chats/${chatId}/messages`).set(auth).send({ message: 'mine now?' }),
      await t.http.post(`/api/v1/chats/${chatId}/interrupt`).set(auth),
      await t.http.delete(`/api/v1/chats/${chatId}`).set(auth),
    ];
    expect(answers.map((res) => [res.status, errorOf(res).code])).toEqual(answers.map(() => [404, 'chat_not_found']));
    const token404 = await t.http.post('/api/v1/stream-tokens').set(auth).send({ chatId }).expect(404);
    expect(errorOf(token404).code).toBe('chat_not_found');
  }

  beforeAll(async () => {
    first = await OidcIssuer.start({ sam: { groups: ['clerks'] } });
    second = await OidcIssuer.start({ sam: { groups: ['clerks'] } });
    ({ t, llm } = await startAppWithMockLlm({
      env: {
        AUTH_OIDC_ISSUERS: JSON.stringify([
          { issuer: first.issuer, audience: TEST_AUDIENCE },
          { issuer: second.issuer, audience: TEST_AUDIENCE },
        ]),
        AUTH_FAILURES_PER_MINUTE: '0',
        APPROVAL_SECRET: 'approval-secret-shared-by-every-replica-0123456789',
        CHAT_POLL_INTERVAL_MS: '200',
      },
    }));
    url = await listen(t);
    await t.http
      .post('/api/v1/objects')
      .set(asAdmin(t))
      .send({
        name: 'item',
        label: 'Item',
        fields: [
          { name: 'sku', label: 'SKU', type: 'text', required: true, unique: true },
          { name: 'qty', label: 'Quantity', type: 'integer' },
        ],
      })
      .expect(201);
    await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku: 'a-1', qty: 1 }).expect(201);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'clerk', objects: { item: { read: true, update: true } } })
      .expect(201);
    // Notes are each someone's, by name: a row filter on `$subject`.
    await createObject(t, 'note', [fieldSpec('text', 'text'), fieldSpec('who', 'text')]);
    for (const [text, who] of [
      ['for sam', 'sam'],
      ['for someone else', 'kim'],
    ]) {
      await t.http.post('/api/v1/objects/note/records').set(asAdmin(t)).send({ text, who }).expect(201);
    }
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'own_notes', objects: { note: { read: true, rowFilter: { who: '$subject' } } } })
      .expect(201);
    await t.http
      .put('/api/v1/identity/mapping')
      .set(asAdmin(t))
      .send({ policies: { clerks: ['clerk', 'own_notes'] }, claim: 'groups' })
      .expect(200);
    await t.http
      .post('/api/v1/ai/agents')
      .set(asAdmin(t))
      .send({
        name: 'writer',
        label: 'Writer',
        instructions: 'You keep the items up to date.',
        tools: ['query_records', 'update_record'],
        writes: { item: ['update'] },
      })
      .expect(201);
    samKey = await createApiKey(t, { name: 'sam key', role: 'member', subject: 'sam' });
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
    await first?.close();
    await second?.close();
  });
  beforeEach(() => llm.reset());

  it('GET /me still says the mapped subject; the two users are two principals', async () => {
    for (const issuer of [first, second]) {
      expect(
        bodyOf(
          await t.http
            .get('/api/v1/me')
            .set(bearer(await sam(issuer)))
            .expect(200),
        ),
      ).toMatchObject({
        kind: 'user',
        issuer: issuer.issuer,
        subject: 'sam',
      });
    }
    const rows = await t.sql<{ issuer: string; owner: string }>(
      `select issuer, owner from api_keys where subject = 'sam' and kind = 'user' order by owner`,
    );
    expect(rows).toHaveLength(2);
    expect(new Set(rows.map((row) => row.owner)).size).toBe(2);
    expect(rows.map((row) => row.owner)).not.toContain('sam');
  });

  it('reads `$subject` in row filters as the mapped subject, the same for both issuers’ users', async () => {
    for (const issuer of [first, second]) {
      const page = bodyOf<RecordPage>(
        await t.http
          .get('/api/v1/objects/note/records')
          .set(bearer(await sam(issuer)))
          .expect(200),
      );
      expect(page.records.map((r) => r.text)).toEqual(['for sam']);
    }
  });

  it("keeps a user's chat from the same sub at another issuer and from the key of that subject, on every route", async () => {
    llm.enqueue(MockReply.text('Hello from the first issuer.', small));
    const chat = await chatOf(await sam(first), 'hi');
    expect(chat.status).toBe('waiting');
    llm.enqueue(MockReply.text('Hello to the key.', small));
    const keyChat = await chatOf(samKey.secret, 'hi');

    // Another token of the same user finds it, on the list and by id, with its messages.
    const again = await sam(first);
    expect(await listed(again)).toEqual([chat.id]);
    const messages = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${chat.id}/messages`).set(bearer(again)).expect(200),
    );
    expect(JSON.stringify(messages)).toContain('Hello from the first issuer.');

    // The same sub at the second issuer, and the key acting for "sam", see none of it; nor the user the key's.
    expect(await listed(await sam(second))).toEqual([]);
    expect(await listed(samKey.secret)).toEqual([keyChat.id]);
    await expectNotFound(await sam(second), chat.id);
    await expectNotFound(samKey.secret, chat.id);
    await expectNotFound(await sam(first), keyChat.id);

    // A second turn of the owner runs as its user (the turn's key still acts for the chat's owner).
    llm.enqueue(MockReply.text('Second answer.', small));
    await t.http.post(`/api/v1/chats/${chat.id}/messages`).set(bearer(again)).send({ message: 'more' }).expect(202);
    const done = await waitForChat(t, chat.id, (c) => c.status !== 'pending' && c.status !== 'running', again);
    expect(done).toMatchObject({ status: 'waiting', lastError: null });
  });

  it("tells a user's chat-list stream only of its own chats", async () => {
    const samOne = await sam(first);
    const samTwo = await sam(second);
    const watchTwo = await SseClient.open(url, '/api/v1/chats/watch', samTwo);
    const watchKey = await SseClient.open(url, '/api/v1/chats/watch', samKey.secret);
    try {
      await watchTwo.waitFor((events) => events.some((e) => e.event === 'ready'));
      await watchKey.waitFor((events) => events.some((e) => e.event === 'ready'));
      expect(watchTwo.of('ready')[0].data).toEqual({ subject: 'sam' });
      llm.enqueue(MockReply.text('one', small));
      await chatOf(samOne, 'first');
      // Chats made after it: once their events arrive, an event of the first user's chat would have arrived before.
      llm.enqueue(MockReply.text('two', small));
      const own = await chatOf(samTwo, 'second');
      llm.enqueue(MockReply.text('three', small));
      const keys = await chatOf(samKey.secret, 'third');
      await watchTwo.waitFor((events) => events.some((e) => e.event === 'created' && e.data.chatId === own.id));
      await watchKey.waitFor((events) => events.some((e) => e.event === 'created' && e.data.chatId === keys.id));
      const chatsSeen = (client: SseClient) => new Set(client.events.map((e) => e.data.chatId).filter(Boolean));
      expect([...chatsSeen(watchTwo)]).toEqual([own.id]);
      expect([...chatsSeen(watchKey)]).toEqual([keys.id]);
    } finally {
      watchTwo.close();
      watchKey.close();
    }
  });

  it('gives each useChat client id to its own owner: the same id at two issuers and on the key is three chats', async () => {
    const id = 'shared-client-id';
    const api = '/api/v1/ai/agents/data_chat/chats';
    const say = async (token: string, reply: string) => {
      llm.enqueue(MockReply.text(reply, small));
      const chat = uiChat(url, api, token, { id });
      await chat.sendMessage({ text: 'hello' });
      expect(chat.error).toBeUndefined();
      expect(textOf(chat.messages.at(-1))).toBe(reply);
    };
    await say(await sam(first), 'first issuer');
    await say(await sam(second), 'second issuer');
    await say(samKey.secret, 'key');
    const history = async (token: string) =>
      JSON.stringify(bodyOf(await t.http.get(`${api}/${id}/messages`).set(bearer(token)).expect(200)));
    expect(await history(await sam(first))).toContain('first issuer');
    expect(await history(await sam(first))).not.toContain('second issuer');
    expect(await history(await sam(second))).toContain('second issuer');
    expect(await history(await sam(second))).not.toContain('first issuer');
    expect(await history(samKey.secret)).not.toContain('issuer');
    const owners = await t.sql<{ n: string }>(`select count(distinct owner) as n from chats where client_id = $1`, [id]);
    expect(Number(owners[0].n)).toBe(3);
  });

  it("lets only the chat's own user approve its proposal: the same sub at another issuer and the key get 404", async () => {
    const [target] = await t.sql<{ id: string }>(`select id::text from data.item where sku = 'a-1'`);
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_own', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 7 } } },
      ]),
      MockReply.text('Updated.', small),
    );
    const owner = await sam(first);
    const chat = await chatOf(owner, 'Set a-1 to 7', 'writer');
    expect(chat.status).toBe('requires_approval');
    const [proposed] = chat.requiredAction!.proposals;
    const body = { toolCallId: 'call_own', decision: 'approve', token: proposed.token };
    const decide = (token: string) => t.http.post(`/api/v1/chats/${chat.id}/approvals`).set(bearer(token)).send(body);

    for (const other of [await sam(second), samKey.secret]) {
      expect(errorOf(await decide(other).expect(404)).code).toBe('chat_not_found');
    }
    expect((await t.sql<{ qty: number }>(`select qty::int as qty from data.item where sku = 'a-1'`))[0].qty).toBe(1);
    await decide(owner).expect(202);
    await waitForChat(t, chat.id, hasStatus('waiting'), owner);
    expect((await t.sql<{ qty: number }>(`select qty::int as qty from data.item where sku = 'a-1'`))[0].qty).toBe(7);
  });

  it("keeps a user's private view from the same sub at another issuer and from the key", async () => {
    const views = '/api/v1/objects/item/views';
    await t.http
      .post(views)
      .set(bearer(await sam(first)))
      .send({ name: 'my_items', label: 'My items' })
      .expect(201);
    const names = async (token: string) =>
      bodyOf<ViewListResponse>(await t.http.get(views).set(bearer(token)).expect(200)).views.map((v) => v.name);
    expect(await names(await sam(first))).toEqual(['my_items']);
    expect(await names(await sam(second))).toEqual([]);
    expect(await names(samKey.secret)).toEqual([]);
    await t.http
      .get(`${views}/my_items`)
      .set(bearer(await sam(second)))
      .expect(404);
  });

  it("refuses a key subject that would read as a user's owner", async () => {
    const res = await t.http
      .post('/api/v1/api-keys')
      .set(asAdmin(t))
      .send({ name: 'impostor', role: 'member', subject: `oidc:${first.issuer}#sam` })
      .expect(400);
    expect(errorOf(res).code).toBe('validation_failed');
    await t.http
      .patch(`/api/v1/api-keys/${samKey.id}`)
      .set(asAdmin(t))
      .send({ subject: `oidc:${second.issuer}#sam` })
      .expect(400);
    expect(await listed(samKey.secret)).not.toEqual([]);
  });

  describe('the migration to issuer-qualified owners', () => {
    const run = async (step: 'up' | 'down') => {
      const migration = new MigrationPrincipalOwners(undefined as never, undefined as never);
      migration[step]();
      for (const statement of migration.getQueries()) await t.sql(statement as string);
    };

    it("moves chats users started (and their logged events) to the users' owners; key chats stay", async () => {
      const userRow = async (issuer: OidcIssuer) =>
        (
          await t.sql<{ id: string }>(`select id from api_keys where kind = 'user' and issuer = $1 and subject = 'sam'`, [
            issuer.issuer,
          ])
        )[0].id;
      // Each user has its row; the first user and the key have chats.
      await t.http
        .get('/api/v1/me')
        .set(bearer(await sam(second)))
        .expect(200);
      llm.enqueue(MockReply.text('before the migration', small), MockReply.text('the key, before', small));
      await chatOf(await sam(first), 'hi');
      await chatOf(samKey.secret, 'hi');
      const [one, two] = [await userRow(first), await userRow(second)];
      const before = await t.sql<{ id: string; owner: string }>(`select id, owner from chats order by id`);

      await run('down');
      // As a release before this one stored them: every chat of "sam", whoever started it, owned by "sam".
      expect(new Set((await t.sql<{ owner: string }>(`select distinct owner from chats`)).map((r) => r.owner))).toEqual(
        new Set(['sam']),
      );
      // A chat a user started then, with a logged event, and a key's chat that happens to name a user row nowhere.
      const [legacy] = await t.sql<{ id: string }>(
        `insert into chats (id, agent, owner, owner_role, owner_key_id, turn_key_id, status, created_at, updated_at)
         values (gen_random_uuid(), 'data_chat', 'sam', 'member', $1, $1, 'waiting', now(), now()) returning id`,
        [two],
      );
      await t.sql(
        `insert into chat_events (chat_id, event)
         values ($1::uuid, jsonb_build_object('type', 'status', 'chatId', $2::text, 'owner', 'sam', 'status', 'waiting'))`,
        [legacy.id, legacy.id],
      );

      await run('up');
      expect(await t.sql(`select id, owner from chats where id <> $1 order by id`, [legacy.id])).toEqual(before);
      const owners = await t.sql<{ owner: string }>(`select owner from api_keys where id = $1`, [two]);
      expect(await t.sql(`select owner from chats where id = $1`, [legacy.id])).toEqual(owners);
      expect(await t.sql(`select event->>'owner' as owner from chat_events where chat_id = $1`, [legacy.id])).toEqual(owners);
      // The key's chats are the key's, the first user's its own, and the rewritten chat is found by its user.
      const keyChats = await t.sql<{ owner: string }>(`select distinct owner from chats where owner_key_id = $1`, [samKey.id]);
      expect(keyChats).toEqual([{ owner: 'sam' }]);
      expect(
        await t.sql(
          `select distinct c.owner = k.owner as same from chats c join api_keys k on k.id = c.owner_key_id where k.id = $1`,
          [one],
        ),
      ).toEqual([{ same: true }]);
      await t.http
        .get(`/api/v1/chats/${legacy.id}`)
        .set(bearer(await sam(second)))
        .expect(200);
      await t.http
        .get(`/api/v1/chats/${legacy.id}`)
        .set(bearer(await sam(first)))
        .expect(404);
    });
  });
});
