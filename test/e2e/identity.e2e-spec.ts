import { discoverOAuthServerInfo, extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import OpenAI, { APIError } from 'openai';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiKeyListResponse } from '../../src/auth/api-key.dto';
import type { ChangesResponse } from '../../src/changes/changes.dto';
import type { UserListResponse, UserResponse } from '../../src/auth/identity.dto';
import { parsedContent, sentMessages, startAppWithMockLlm } from '../support/agent-fixtures';
import { eventually, hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { asAdmin, createObject, fieldSpec } from '../support/fixtures';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { textOf, uiChat } from '../support/ui-chat';
import { OidcIssuer, TEST_AUDIENCE } from '../support/oidc-issuer';
import { bodyOf, errorOf, type RecordPage } from '../support/responses';
import { freePort } from '../support/free-port';
import { bearer, startTestApp, type TestApp } from '../support/test-app';

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
type Jose = typeof import('jose');
const jose = (): Promise<Jose> => import('jose');

const MAPPING = {
  subject: 'sub',
  attributes: { region: 'region' },
  role: { admin: ['copilot-admins'] },
  policies: { sales: ['regional'] },
  claim: 'groups',
};

describe('end-user identity: bearer JWTs of an OpenID Connect provider', () => {
  let idp: OidcIssuer;
  let t: TestApp;
  let llm: MockLlmServer;
  let url: string;
  const logs: string[] = [];

  const get = (path: string, token: string) => t.http.get(path).set(bearer(token));
  const regionsOf = (page: RecordPage) => [...new Set(page.records.map((r) => r.region as string))].sort();
  const userRow = async (subject: string) =>
    (await t.sql<{ id: string }>(`select id from api_keys where kind = 'user' and subject = $1`, [subject]))[0]?.id;

  beforeAll(async () => {
    idp = await OidcIssuer.start({
      alice: { groups: ['sales'], region: 'emea' },
      bob: { groups: ['copilot-admins'] },
      carol: { groups: ['sales', 'other'], region: 'amer' },
      dave: { groups: ['nobody'] },
      mallory: { groups: ['sales'], region: 'emea' },
      frank: { groups: ['sales'], region: 'amer' },
    });
    ({ t, llm } = await startAppWithMockLlm({
      env: {
        AUTH_OIDC_ISSUER: idp.issuer,
        AUTH_OIDC_AUDIENCE: TEST_AUDIENCE,
        AUTH_OIDC_JWKS_REFRESH_MS: '1000',
        AUTH_FAILURES_PER_MINUTE: '0',
        QUOTA_TOKENS_PER_KEY_DAY: '100',
        LOG_LEVEL: 'warn',
      },
      logDestination: { write: (chunk: string) => void logs.push(chunk) },
    }));
    url = await listen(t);
    await createObject(t, 'deal', [fieldSpec('title', 'text'), fieldSpec('region', 'text')]);
    for (const [title, region] of [
      ['Acme', 'emea'],
      ['Globex', 'amer'],
      ['Initech', 'emea'],
    ]) {
      await t.http.post('/api/v1/objects/deal/records').set(asAdmin(t)).send({ title, region }).expect(201);
    }
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'regional', objects: { deal: { read: true, rowFilter: { region: '$attr.region' } } } })
      .expect(201);
    await t.http.put('/api/v1/identity/mapping').set(asAdmin(t)).send(MAPPING).expect(200);
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
    await idp?.close();
  });

  describe('the mapping', () => {
    it('returns what the admin put, with defaults filled in', async () => {
      expect(bodyOf(await t.http.get('/api/v1/identity/mapping').set(asAdmin(t)).expect(200))).toEqual(MAPPING);
    });

    it('refuses an unknown policy, a bad attribute name and an unknown property, keeping the mapping', async () => {
      const put = (body: Record<string, unknown>) => t.http.put('/api/v1/identity/mapping').set(asAdmin(t)).send(body);
      expect(errorOf(await put({ policies: { sales: ['no_such_policy'] } }).expect(400)).code).toBe('invalid_policy');
      expect(errorOf(await put({ attributes: { 'bad name': 'x' } }).expect(400)).code).toBe('validation_failed');
      expect(errorOf(await put({ role: { owner: ['x'] } }).expect(400)).code).toBe('validation_failed');
      expect(bodyOf(await t.http.get('/api/v1/identity/mapping').set(asAdmin(t)).expect(200))).toEqual(MAPPING);
    });
  });

  describe('users', () => {
    it('GET /me tells a user who it is, from its token through the mapping', async () => {
      const me = bodyOf(await get('/api/v1/me', await idp.token('alice')).expect(200));
      expect(me).toEqual({
        kind: 'user',
        issuer: idp.issuer,
        subject: 'alice',
        role: 'member',
        policies: ['regional'],
        attributes: { region: 'emea' },
      });
    });

    it('GET /me tells an API key who it is too', async () => {
      expect(bodyOf(await get('/api/v1/me', t.adminKey).expect(200))).toEqual({
        kind: 'key',
        subject: 'admin',
        role: 'admin',
        policies: [],
        attributes: {},
      });
    });

    it('a user under a row-filter policy sees only its rows, on REST records and the change feed', async () => {
      const token = await idp.token('alice');
      const page = bodyOf<RecordPage>(await get('/api/v1/objects/deal/records', token).expect(200));
      expect(page.records.map((r) => r.title).sort()).toEqual(['Acme', 'Initech']);
      const changes = bodyOf<ChangesResponse>(await get('/api/v1/objects/deal/changes', token).expect(200));
      expect(changes.changes.map((c) => c.record?.title).sort()).toEqual(['Acme', 'Initech']);
    });

    it('a user in an admin group is an admin; a member may not use admin routes', async () => {
      const bob = await idp.token('bob');
      await get('/api/v1/identity/mapping', bob).expect(200);
      // What an admin user changes is audited under its own principal.
      await t.http.put('/api/v1/identity/mapping').set(bearer(bob)).send(MAPPING).expect(200);
      const audited = await t.sql(`select action from audit_log where kind = 'admin' and key_id = $1`, [await userRow('bob')]);
      expect(audited).toEqual([{ action: 'identity.mapping' }]);
      expect(bodyOf<{ role: string }>(await get('/api/v1/me', await idp.token('bob')).expect(200)).role).toBe('admin');
      expect(errorOf(await get('/api/v1/identity/mapping', await idp.token('alice')).expect(403)).code).toBe('forbidden');
    });

    it('a member whose groups bring no policy reads nothing', async () => {
      const res = await get('/api/v1/objects/deal/records', await idp.token('dave')).expect(404);
      expect(errorOf(res).code).toBe('object_not_found');
    });

    it("follows the user's claims: a new token with another region runs under it at once", async () => {
      expect(regionsOf(bodyOf(await get('/api/v1/objects/deal/records', await idp.token('carol')).expect(200)))).toEqual([
        'amer',
      ]);
      idp.claims.set('carol', { groups: ['sales'], region: 'emea' });
      const token = await idp.token('carol');
      expect(regionsOf(bodyOf(await get('/api/v1/objects/deal/records', token).expect(200)))).toEqual(['emea']);
      expect(bodyOf(await get('/api/v1/me', token).expect(200))).toMatchObject({ attributes: { region: 'emea' } });
    });

    it('keeps users out of the API key listing; a user row has no secret', async () => {
      await get('/api/v1/me', await idp.token('alice')).expect(200);
      const keys = bodyOf<ApiKeyListResponse>(await t.http.get('/api/v1/api-keys').set(asAdmin(t)).expect(200));
      expect(keys.apiKeys.map((k) => k.subject)).not.toContain('alice');
      const rows = await t.sql<{ secret_hash: string | null; issuer: string }>(
        `select secret_hash, issuer from api_keys where kind = 'user'`,
      );
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) expect(row).toEqual({ secret_hash: null, issuer: idp.issuer });
      const id = await userRow('alice');
      expect(errorOf(await t.http.patch(`/api/v1/api-keys/${id}`).set(asAdmin(t)).send({ policies: [] }).expect(404)).code).toBe(
        'api_key_not_found',
      );
      await t.http.delete(`/api/v1/api-keys/${id}`).set(asAdmin(t)).expect(404);
    });

    it("a user's stream token opens its event streams", async () => {
      const token = await idp.token('alice');
      const created = bodyOf<{ token: string }>(
        await t.http.post('/api/v1/stream-tokens').set(bearer(token)).send({}).expect(201),
      );
      const response = await new Promise<http.IncomingMessage>((resolve, reject) =>
        http.get(`${url}/api/v1/objects/deal/changes/stream?after=0&token=${created.token}`, resolve).on('error', reject),
      );
      response.destroy();
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toContain('text/event-stream');
    });
  });

  describe('the other doors', () => {
    it('the openai SDK on /v1 runs as the user; its usage is recorded and its quota applies', async () => {
      const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: await idp.token('mallory'), maxRetries: 0 });
      llm.reset();
      llm.enqueue(MockReply.text('hello', { usage: { prompt_tokens: 90, completion_tokens: 30 } }));
      const answer = await openai.chat.completions.create({ model: 'data_chat', messages: [{ role: 'user', content: 'hi' }] });
      expect(answer.choices[0].message.content).toBe('hello');
      const id = await userRow('mallory');
      const used = async () =>
        Number((await t.sql<{ total: string }>(`select sum(total_tokens) as total from usage where key_id = $1`, [id]))[0].total);
      // Usage rows are written in batches, shortly after the call.
      await eventually(async () => (await used()) === 120);
      // QUOTA_TOKENS_PER_KEY_DAY is 100: the user is past it.
      const refused = await openai.chat.completions
        .create({ model: 'data_chat', messages: [{ role: 'user', content: 'again' }] })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(refused).toBeInstanceOf(APIError);
      expect((refused as APIError).status).toBe(429);
      expect(llm.requests).toHaveLength(1);
      // An admin finds the user and gives it a quota of its own; it goes on at once.
      const users = bodyOf<UserListResponse>(await t.http.get('/api/v1/identity/users').set(asAdmin(t)).expect(200)).users;
      expect(users.find((u) => u.subject === 'mallory')).toMatchObject({
        id,
        issuer: idp.issuer,
        role: 'member',
        policies: ['regional'],
        tokensPerDay: null,
        revoked: false,
      });
      const updated = await t.http.patch(`/api/v1/identity/users/${id}`).set(asAdmin(t)).send({ tokensPerDay: 1000 }).expect(200);
      expect(bodyOf<UserResponse>(updated).tokensPerDay).toBe(1000);
      llm.enqueue(MockReply.text('again', { usage: { prompt_tokens: 1, completion_tokens: 1 } }));
      await openai.chat.completions.create({ model: 'data_chat', messages: [{ role: 'user', content: 'again' }] });
      const keyId = await userRow('alice');
      expect(
        errorOf(await t.http.patch(`/api/v1/identity/users/${t.adminKey}`).set(asAdmin(t)).send({ tokensPerDay: 1 }).expect(404))
          .code,
      ).toBe('user_not_found');
      await t.http.patch(`/api/v1/identity/users/${keyId}`).set(asAdmin(t)).send({ tokensPerDay: -1 }).expect(400);
      // The usage report shows the user its own usage, under its id.
      await eventually(async () => (await used()) === 122);
      const report = bodyOf<{ rows: Array<{ keyId: string; totalTokens: number }> }>(
        await get('/api/v1/usage?groupBy=key', await idp.token('mallory')).expect(200),
      );
      expect(report.rows).toEqual([expect.objectContaining({ keyId: id, totalTokens: 122 })]);
    });

    it('a durable chat runs as the user, under its policies, and belongs to it; so does a useChat turn', async () => {
      const token = await idp.token('frank');
      const small = { usage: { prompt_tokens: 2, completion_tokens: 1 } };
      llm.reset();
      llm.enqueue(MockReply.toolCall('query_records', { objectName: 'deal' }, small), MockReply.text('One deal.', small));
      const chat = bodyOf<{ id: string }>(
        await t.http.post('/api/v1/chats').set(bearer(token)).send({ agent: 'data_chat', message: 'my deals?' }).expect(201),
      );
      await waitForChat(t, chat.id, hasStatus('waiting'), token);
      const tool = sentMessages(llm, 1).find((m) => m.role === 'tool')!;
      expect(parsedContent<{ records: Array<{ region: string }> }>(tool).records.map((r) => r.region)).toEqual(['amer']);
      // Owned by frank: another user does not find it.
      await t.http
        .get(`/api/v1/chats/${chat.id}`)
        .set(bearer(await idp.token('carol')))
        .expect(404);

      llm.enqueue(MockReply.text('plain', small));
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(token))
        .send({
          id: 'c1',
          trigger: 'submit-message',
          stream: false,
          messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
        })
        .expect(200);
      expect(res.body).toMatchObject({ content: 'plain' });
    });

    it("the AI SDK's Chat (useChat's transport) runs a durable turn as the user, over its rows only", async () => {
      const token = await idp.token('frank');
      llm.reset();
      // Small usage: the users of this app have a daily token quota.
      const small = { usage: { prompt_tokens: 2, completion_tokens: 1 } };
      llm.enqueue(
        MockReply.toolCall('query_records', { objectName: 'deal' }, small),
        MockReply.text('You have one deal.', small),
      );
      const chat = uiChat(url, '/api/v1/ai/agents/data_chat/chats', token, { id: 'user-chat-1' });
      await chat.sendMessage({ text: 'Which deals are mine?' });
      expect(chat.error).toBeUndefined();
      expect(textOf(chat.messages[1])).toBe('You have one deal.');
      const tool = sentMessages(llm, 1).find((m) => m.role === 'tool')!;
      expect(parsedContent<{ records: Array<{ region: string }> }>(tool).records.map((r) => r.region)).toEqual(['amer']);
      // The chat is the user's: another user's Chat under the same id starts a chat of its own.
      const messages = await t.http
        .get('/api/v1/ai/agents/data_chat/chats/user-chat-1/messages')
        .set(bearer(await idp.token('carol')))
        .expect(404);
      expect(errorOf(messages).code).toBe('chat_not_found');
    });

    it('withholds earlier results from a user whose claims changed, as from a narrowed key', async () => {
      idp.claims.set('gina', { groups: ['sales'], region: 'emea' });
      const small = { usage: { prompt_tokens: 2, completion_tokens: 1 } };
      llm.reset();
      llm.enqueue(MockReply.toolCall('query_records', { objectName: 'deal' }, small), MockReply.text('Two deals.', small));
      const before = await idp.token('gina');
      const chat = bodyOf<{ id: string }>(
        await t.http.post('/api/v1/chats').set(bearer(before)).send({ agent: 'data_chat', message: 'my deals?' }).expect(201),
      );
      await waitForChat(t, chat.id, hasStatus('waiting'), before);
      const messages = async (token: string) =>
        JSON.stringify(bodyOf(await t.http.get(`/api/v1/chats/${chat.id}/messages`).set(bearer(token)).expect(200)));
      expect(await messages(before)).toContain('Initech');
      // Her region changes at the provider: her next token runs under the new access, and the chat's earlier result
      // (read under the old one) is withheld from it.
      idp.claims.set('gina', { groups: ['sales'], region: 'amer' });
      const after = await messages(await idp.token('gina'));
      expect(after).not.toContain('Initech');
      expect(after).toContain('"withheld":true');
    });

    it('the MCP SDK client with the user’s token sees only its rows', async () => {
      const token = await idp.token('alice');
      const client = new Client({ name: 'identity-e2e', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers: bearer(token) } }));
      try {
        const result = (await client.callTool({ name: 'query_records', arguments: { objectName: 'deal' } })) as CallToolResult;
        const { records } = result.structuredContent as { records: Array<{ region: string }> };
        expect(records.map((r) => r.region)).toEqual(['emea', 'emea']);
      } finally {
        await client.close();
      }
    });
  });

  describe('refused tokens', () => {
    const now = () => Math.floor(Date.now() / 1000);
    const cases: Array<[string, () => Promise<string>, string]> = [
      [
        'alg none',
        () =>
          Promise.resolve(
            `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ iss: idp.issuer, aud: TEST_AUDIENCE, sub: 'alice', exp: now() + 300 })}.`,
          ),
        'ERR_JOSE_ALG_NOT_ALLOWED',
      ],
      [
        'HS256 keyed with the public key',
        async () => {
          const { SignJWT } = await jose();
          const secret = new TextEncoder().encode(JSON.stringify(idp.keys[0].jwk));
          return new SignJWT({ iss: idp.issuer, aud: TEST_AUDIENCE, sub: 'alice' })
            .setProtectedHeader({ alg: 'HS256', kid: idp.keys[0].kid })
            .setExpirationTime('5m')
            .sign(secret);
        },
        'ERR_JOSE_ALG_NOT_ALLOWED',
      ],
      ['an unknown issuer', () => idp.forge({ iss: 'http://127.0.0.1:1' }), 'unknown issuer'],
      ['a wrong audience', () => idp.forge({ aud: 'https://other.app' }), 'ERR_JWT_CLAIM_VALIDATION_FAILED'],
      ['an expired token (past the 60 s leeway)', () => idp.forge({ exp: now() - 120 }), 'ERR_JWT_EXPIRED'],
      ['a token not yet valid (past the leeway)', () => idp.forge({ nbf: now() + 120 }), 'ERR_JWT_CLAIM_VALIDATION_FAILED'],
      ['no exp', () => idp.forge({ exp: undefined }), 'ERR_JWT_CLAIM_VALIDATION_FAILED'],
      ['no subject claim', () => idp.forge({ sub: undefined }), 'no usable subject claim'],
      [
        'an unknown kid',
        async () => idp.forge({}, { key: { ...(await strangerKey()), kid: 'stranger' } }),
        'ERR_JWKS_NO_MATCHING_KEY',
      ],
      [
        "another key's signature under the issuer's kid",
        async () => idp.forge({}, { key: { ...(await strangerKey()), kid: idp.keys[0].kid } }),
        'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
      ],
    ];

    it.each(cases)('refuses %s with 401 invalid_token, the reason in the log only', async (_case, make, reason) => {
      logs.length = 0;
      const res = await get('/api/v1/me', await make()).expect(401);
      expect(res.body).toEqual({ code: 'invalid_token', error: 'Invalid bearer token' });
      const refusals = logs
        .join('')
        .split('\n')
        .filter((line) => line.includes('refused a bearer token'));
      expect(refusals.join('\n')).toContain(reason);
    });

    it('accepts a token expired within the 60 s leeway', async () => {
      await get('/api/v1/me', await idp.forge({ sub: 'alice', exp: now() - 30, groups: ['sales'], region: 'emea' })).expect(200);
    });
  });

  describe('key rotation', () => {
    it('fetches the JWKS again for a new kid; tokens of the previous key still pass while it is published', async () => {
      const before = await idp.token('alice');
      await get('/api/v1/me', before).expect(200);
      await idp.rotate('key-2');
      // AUTH_OIDC_JWKS_REFRESH_MS is 1 s here: the keys were fetched longer ago than that.
      await sleep(1_100);
      const after = await idp.token('alice');
      expect(JSON.parse(Buffer.from(after.split('.')[0], 'base64url').toString())).toMatchObject({ kid: 'key-2' });
      await get('/api/v1/me', after).expect(200);
      await get('/api/v1/me', await idp.forge({ sub: 'alice', groups: ['sales'] }, { key: idp.keys[1] })).expect(200);
    });
  });

  describe('revocation', () => {
    it("stops the user's next request, its open event stream, its chat turn and its later tokens", async () => {
      const token = await idp.token('alice');
      const form = {
        name: 'show_form',
        description: 'Show a form to the user and return what they entered.',
        inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
      };
      llm.reset();
      llm.enqueue(MockReply.toolCalls([{ id: 'form_1', name: 'show_form', arguments: { title: 'x' } }]));
      const chat = bodyOf<{ id: string }>(
        await t.http
          .post('/api/v1/chats')
          .set(bearer(token))
          .send({ agent: 'data_chat', message: 'form please', dynamicTools: [form] })
          .expect(201),
      );
      await waitForChat(t, chat.id, hasStatus('requires_action'), token);
      const stream = await SseClient.open(url, '/api/v1/objects/deal/changes/stream', token);
      try {
        await t.http
          .post('/api/v1/identity/revocations')
          .set(asAdmin(t))
          .send({ issuer: idp.issuer, subject: 'alice' })
          .expect(204);
        await stream.waitForEnd();
      } finally {
        stream.close();
      }
      expect(errorOf(await get('/api/v1/me', token).expect(401)).code).toBe('invalid_token');
      expect(errorOf(await get('/api/v1/me', await idp.token('alice')).expect(401)).code).toBe('invalid_token');
      const chatRow = async () =>
        (
          await t.sql<{ status: string; last_error: { code: string } | null }>(
            `select status, last_error from chats where id = $1`,
            [chat.id],
          )
        )[0];
      await eventually(async () => (await chatRow()).status === 'error');
      expect((await chatRow()).last_error).toMatchObject({ code: 'key_revoked' });
      expect(llm.requests).toHaveLength(1);
      // Others go on.
      await get('/api/v1/me', await idp.token('bob')).expect(200);
    });

    it('refuses a user revoked before its first token, and a revocation for an issuer not configured', async () => {
      await t.http.post('/api/v1/identity/revocations').set(asAdmin(t)).send({ issuer: idp.issuer, subject: 'erin' }).expect(204);
      expect(errorOf(await get('/api/v1/me', await idp.token('erin')).expect(401)).code).toBe('invalid_token');
      const res = await t.http
        .post('/api/v1/identity/revocations')
        .set(asAdmin(t))
        .send({ issuer: 'https://elsewhere.example.com', subject: 'erin' })
        .expect(400);
      expect(errorOf(res).code).toBe('validation_failed');
      expect(errorOf(await get('/api/v1/identity/mapping', await idp.token('alice')).expect(401)).code).toBe('invalid_token');
    });

    it('lifts a revocation: refused while revoked, its next token accepted after; audited like the revocation', async () => {
      const revocations = () => t.http.post('/api/v1/identity/revocations').set(asAdmin(t));
      const lift = () => t.http.delete('/api/v1/identity/revocations').set(asAdmin(t));
      await get('/api/v1/me', await idp.token('frank')).expect(200);
      await revocations().send({ issuer: idp.issuer, subject: 'frank' }).expect(204);
      const refused = await idp.token('frank');
      expect(errorOf(await get('/api/v1/me', refused).expect(401)).code).toBe('invalid_token');
      // Members may not lift it.
      expect(
        errorOf(
          await t.http
            .delete('/api/v1/identity/revocations')
            .set(bearer(await idp.token('carol')))
            .send({ issuer: idp.issuer, subject: 'frank' })
            .expect(403),
        ).code,
      ).toBe('forbidden');
      await lift().send({ issuer: idp.issuer, subject: 'frank' }).expect(204);
      const me = bodyOf<{ subject: string }>(await get('/api/v1/me', await idp.token('frank')).expect(200));
      expect(me.subject).toBe('frank');
      // A token issued while revoked is a valid token too: only the revocation refused it.
      await get('/api/v1/me', refused).expect(200);
      const page = bodyOf<RecordPage>(await get('/api/v1/objects/deal/records', refused).expect(200));
      expect(regionsOf(page)).toEqual(['amer']);
      // Lifting what is not revoked (any more), or a user never seen, is 404 user_not_found.
      expect(errorOf(await lift().send({ issuer: idp.issuer, subject: 'frank' }).expect(404)).code).toBe('user_not_found');
      expect(errorOf(await lift().send({ issuer: idp.issuer, subject: 'nobody-ever' }).expect(404)).code).toBe('user_not_found');
      expect(errorOf(await lift().send({ issuer: idp.issuer }).expect(400)).code).toBe('validation_failed');
      // The query string works as well: a user revoked ahead (erin) is lifted and its first token accepted.
      await t.http
        .delete('/api/v1/identity/revocations')
        .query({ issuer: idp.issuer, subject: 'erin' })
        .set(asAdmin(t))
        .expect(204);
      await get('/api/v1/me', await idp.token('erin')).expect(200);
      const id = await userRow('frank');
      const audited = await t.sql<{ action: string }>(
        `select action from audit_log where kind = 'admin' and target = $1 order by id`,
        [id],
      );
      expect(audited.map((row) => row.action)).toEqual(['identity.revoke', 'identity.revoke.lift']);
    });
  });
});

async function strangerKey() {
  const { generateKeyPair } = await jose();
  return { privateKey: (await generateKeyPair('RS256')).privateKey, jwk: { kty: 'RSA', kid: 'stranger' } };
}

describe('end-user identity: several issuers (AUTH_OIDC_ISSUERS)', () => {
  let first: OidcIssuer;
  let second: OidcIssuer;
  let deadIssuer: string;
  let t: TestApp;

  beforeAll(async () => {
    first = await OidcIssuer.start({ sam: { groups: ['copilot-admins'] } });
    second = await OidcIssuer.start({ sam: {} });
    deadIssuer = `http://127.0.0.1:${await freePort()}`;
    t = await startTestApp({
      env: {
        AUTH_OIDC_ISSUERS: JSON.stringify([
          { issuer: first.issuer, audience: TEST_AUDIENCE },
          { issuer: second.issuer, audience: TEST_AUDIENCE, jwksUrl: `${second.issuer}/jwks` },
          { issuer: deadIssuer, audience: TEST_AUDIENCE },
        ]),
        AUTH_FAILURES_PER_MINUTE: '0',
      },
    });
    await t.http
      .put('/api/v1/identity/mapping')
      .set(asAdmin(t))
      .send({ role: { admin: ['copilot-admins'] } })
      .expect(200);
  });
  afterAll(async () => {
    await t?.close();
    await first?.close();
    await second?.close();
  });

  it('keeps the same subject of two issuers apart: two users, each with its own role', async () => {
    const one = bodyOf<{ issuer: string; role: string }>(
      await t.http
        .get('/api/v1/me')
        .set(bearer(await first.token('sam')))
        .expect(200),
    );
    const two = bodyOf<{ issuer: string; role: string }>(
      await t.http
        .get('/api/v1/me')
        .set(bearer(await second.token('sam')))
        .expect(200),
    );
    expect([one, two]).toMatchObject([
      { issuer: first.issuer, role: 'admin' },
      { issuer: second.issuer, role: 'member' },
    ]);
    const rows = await t.sql(`select issuer from api_keys where kind = 'user' and subject = 'sam' order by issuer`);
    expect(rows).toHaveLength(2);
  });

  it('does not fetch the keys again for an unknown kid within AUTH_OIDC_JWKS_REFRESH_MS (60 s by default)', async () => {
    await t.http
      .get('/api/v1/me')
      .set(bearer(await second.token('sam')))
      .expect(200);
    await second.rotate('key-2');
    const res = await t.http
      .get('/api/v1/me')
      .set(bearer(await second.token('sam')))
      .expect(401);
    expect(errorOf(res).code).toBe('invalid_token');
  });

  describe('MCP clients finding where their user signs in', () => {
    let url: string;
    beforeAll(async () => {
      url = await listen(t);
    });
    const post = (path: string, headers: Record<string, string> = {}) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });

    it('answers a 401 from /mcp with Bearer and the resource metadata, which lists the issuers; the SDK finds the provider from it', async () => {
      for (const headers of [{}, bearer('not-a-key'), bearer(await first.forge({ sub: 'sam', aud: 'someone-else' }))]) {
        const response = await post('/mcp', headers);
        expect(response.status).toBe(401);
        expect(response.headers.get('www-authenticate')).toBe(
          `Bearer resource_metadata="${url}/.well-known/oauth-protected-resource/mcp"`,
        );
      }
      const { resourceMetadataUrl } = extractWWWAuthenticateParams(await post('/mcp'));
      const found = await discoverOAuthServerInfo(new URL('/mcp', url), { resourceMetadataUrl });
      expect(found.resourceMetadata).toEqual({
        resource: `${url}/mcp`,
        authorization_servers: [first.issuer, second.issuer, deadIssuer],
        bearer_methods_supported: ['header'],
        resource_name: 'Data copilot',
      });
      // The provider's own discovery document, read through the first authorization server listed.
      expect(found.authorizationServerUrl).toBe(first.issuer);
      expect(found.authorizationServerMetadata).toMatchObject({ issuer: first.issuer, token_endpoint: `${first.issuer}/token` });
    });

    it("points an agent's endpoint at its own metadata, and serves the server's too", async () => {
      const response = await post('/mcp/agents/deal_desk?x=1');
      expect(response.status).toBe(401);
      const { resourceMetadataUrl } = extractWWWAuthenticateParams(response);
      expect(resourceMetadataUrl?.href).toBe(`${url}/.well-known/oauth-protected-resource/mcp/agents/deal_desk`);
      const agent = (await (await fetch(resourceMetadataUrl!)).json()) as { resource: string };
      expect(agent.resource).toBe(`${url}/mcp/agents/deal_desk`);
      const server = (await (await fetch(`${url}/.well-known/oauth-protected-resource`)).json()) as { resource: string };
      expect(server.resource).toBe(url);
      // Other routes keep the plain challenge.
      const rest = await fetch(`${url}/api/v1/me`);
      expect([rest.status, rest.headers.get('www-authenticate')]).toEqual([401, 'Bearer']);
    });
  });

  it('answers 503 identity_provider_unavailable with Retry-After when an issuer cannot be reached', async () => {
    const token = await first.forge({ iss: deadIssuer, sub: 'sam' });
    const res = await t.http.get('/api/v1/me').set(bearer(token)).expect(503);
    expect(errorOf(res).code).toBe('identity_provider_unavailable');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    // The other issuers are not affected.
    await t.http
      .get('/api/v1/me')
      .set(bearer(await first.token('sam')))
      .expect(200);
  });
});
