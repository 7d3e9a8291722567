import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiKeyListResponse } from '../../src/auth/api-key.dto';
import type { ObjectListResponse, ObjectResponse } from '../../src/metadata/metadata.dto';
import { match } from '../support/matchers';
import { bodyOf, errorOf, idOf, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TEST_ADMIN_KEY, TestApp } from '../support/test-app';
import { createApiKey, createObject, fieldSpec } from '../support/fixtures';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe('auth and API keys', () => {
  let t: TestApp;
  let memberKey: string;

  /** Creates a key through the API as the test admin and returns the whole 201 body. */
  async function createKey(role: 'admin' | 'member', name = `${role} key`) {
    return await createApiKey(t, { name, role });
  }

  beforeAll(async () => {
    t = await startTestApp();
    memberKey = (await createKey('member', 'analyst')).secret;
    await createObject(t, 'note', [fieldSpec('title', 'text')]);
  });
  afterAll(() => t.close());

  describe('authentication', () => {
    it('answers 401 unauthorized without an Authorization header', async () => {
      const res = await t.http.get('/api/v1/objects').expect(401);
      expect(res.body).toEqual({ error: match.any(String), code: 'unauthorized' });
    });

    it.each([
      ['a Basic scheme', `Basic ${Buffer.from(`admin:${TEST_ADMIN_KEY}`).toString('base64')}`],
      ['a bare Bearer', 'Bearer'],
      ['a Bearer with two tokens', `Bearer ${TEST_ADMIN_KEY} extra`],
      ['a Token scheme carrying a valid key', `Token ${TEST_ADMIN_KEY}`],
      ['the key without a scheme', TEST_ADMIN_KEY],
    ])('answers 401 for a malformed header (%s)', async (_case, header) => {
      const res = await t.http.get('/api/v1/objects').set('Authorization', header).expect(401);
      expect(errorOf(res).code).toBe('unauthorized');
    });

    it('answers 401 for an unknown key', async () => {
      const res = await t.http.get('/api/v1/objects').set(bearer('dck_this-key-was-never-issued-to-anyone')).expect(401);
      expect(errorOf(res).code).toBe('unauthorized');
    });

    it('answers 401 for a key that differs from a real one only in case', async () => {
      await t.http.get('/api/v1/objects').set(bearer(TEST_ADMIN_KEY.toUpperCase())).expect(401);
    });

    it('accepts the scheme name in any case', async () => {
      await t.http.get('/api/v1/objects').set('Authorization', `bearer ${TEST_ADMIN_KEY}`).expect(200);
    });

    it('needs a key on every API route family', async () => {
      for (const path of ['/api/v1/objects', '/api/v1/objects/note', '/api/v1/objects/note/records', '/api/v1/api-keys']) {
        const res = await t.http.get(path);
        expect({ path, status: res.status, code: errorOf(res).code }).toEqual({ path, status: 401, code: 'unauthorized' });
      }
      const post = await t.http.post('/api/v1/objects/note/records').send({ title: 'sneaky' }).expect(401);
      expect(errorOf(post).code).toBe('unauthorized');
      const [{ count }] = await t.sql<{ count: string }>(`select count(*) from data.note where title = 'sneaky'`);
      expect(Number(count)).toBe(0);
    });
  });

  describe('POST /api/v1/api-keys', () => {
    it('creates a key whose secret is returned once and works right away', async () => {
      const created = await createKey('member', 'laptop');

      expect(created).toEqual({
        id: match.stringMatching(/^[0-9a-f-]{36}$/),
        name: 'laptop',
        role: 'member',
        subject: match.any(String),
        policies: [],
        attributes: {},
        tokensPerDay: null,
        prefix: created.secret.slice(0, 8),
        revoked: false,
        createdAt: match.any(String),
        secret: match.any(String),
      });
      expect(created.secret.length).toBeGreaterThanOrEqual(32);
      expect(Number.isNaN(Date.parse(created.createdAt))).toBe(false);
      await t.http.get('/api/v1/objects').set(bearer(created.secret)).expect(200);
    });

    it('issues a different secret for every key', async () => {
      const a = await createKey('member');
      const b = await createKey('member');
      expect(a.secret).not.toBe(b.secret);
      expect(a.id).not.toBe(b.id);
    });

    it('keeps a caller-chosen subject', async () => {
      expect((await createApiKey(t, { name: 'bot', role: 'member', subject: 'svc:reporting' })).subject).toBe('svc:reporting');
    });

    it.each([
      ['an unknown role', { name: 'x', role: 'owner' }],
      ['a missing role', { name: 'x' }],
      ['a missing name', { role: 'member' }],
      ['an empty name', { name: '', role: 'member' }],
      ['a numeric name', { name: 5, role: 'member' }],
      ['a role of the wrong type', { name: 'x', role: ['admin'] }],
      ['an unknown property', { name: 'x', role: 'member', expiresAt: '2030-01-01' }],
      ['a secret chosen by the caller', { name: 'x', role: 'admin', secret: 'my-own-secret-0123456789' }],
      ['a NUL character in the name', { name: 'lap\u0000top', role: 'member' }],
    ])('refuses %s with 400 validation_failed and creates nothing', async (_case, body) => {
      const before = await t.sql<{ count: string }>('select count(*) from api_keys');
      const res = await t.http.post('/api/v1/api-keys').set(bearer(t.adminKey)).send(body).expect(400);
      expect(res.body).toMatchObject({ code: 'validation_failed', error: match.any(String) });
      const after = await t.sql<{ count: string }>('select count(*) from api_keys');
      expect(after[0].count).toBe(before[0].count);
    });

    it('refuses malformed JSON with 400 invalid_json', async () => {
      const res = await t.http
        .post('/api/v1/api-keys')
        .set(bearer(t.adminKey))
        .set('content-type', 'application/json')
        .send('{"name": "x", role:')
        .expect(400);
      expect(errorOf(res).code).toBe('invalid_json');
    });
  });

  describe('GET /api/v1/api-keys', () => {
    it('lists keys without their secrets or hashes', async () => {
      const created = await createKey('member', 'listed key');

      const res = await t.http.get('/api/v1/api-keys').set(bearer(t.adminKey)).expect(200);

      const listed = bodyOf<ApiKeyListResponse>(res).apiKeys.find((k: { id: string }) => k.id === created.id);
      expect(listed).toEqual({
        id: created.id,
        name: 'listed key',
        role: 'member',
        subject: created.subject,
        policies: [],
        attributes: {},
        tokensPerDay: null,
        prefix: created.prefix,
        revoked: false,
        createdAt: created.createdAt,
      });
      const text = JSON.stringify(res.body);
      expect(text).not.toContain(created.secret);
      expect(text).not.toContain(TEST_ADMIN_KEY);
      expect(text).not.toContain(sha256(created.secret));
      for (const key of bodyOf<ApiKeyListResponse>(res).apiKeys)
        expect(Object.keys(key).sort()).toEqual([
          'attributes',
          'createdAt',
          'id',
          'name',
          'policies',
          'prefix',
          'revoked',
          'role',
          'subject',
          'tokensPerDay',
        ]);
    });

    it('includes the ADMIN_API_KEY admin key', async () => {
      const res = await t.http.get('/api/v1/api-keys').set(bearer(t.adminKey)).expect(200);
      expect(bodyOf<ApiKeyListResponse>(res).apiKeys).toEqual(
        expect.arrayContaining([expect.objectContaining({ role: 'admin', prefix: TEST_ADMIN_KEY.slice(0, 8), revoked: false })]),
      );
    });
  });

  describe('DELETE /api/v1/api-keys/:id', () => {
    it('revokes a key: 204, then the key is 401 and listed as revoked', async () => {
      const created = await createKey('member', 'to revoke');
      await t.http.get('/api/v1/objects').set(bearer(created.secret)).expect(200);

      await t.http.delete(`/api/v1/api-keys/${created.id}`).set(bearer(t.adminKey)).expect(204);

      const res = await t.http.get('/api/v1/objects').set(bearer(created.secret)).expect(401);
      expect(errorOf(res).code).toBe('unauthorized');
      const list = await t.http.get('/api/v1/api-keys').set(bearer(t.adminKey)).expect(200);
      expect(bodyOf<ApiKeyListResponse>(list).apiKeys.find((k: { id: string }) => k.id === created.id)).toMatchObject({
        revoked: true,
      });
    });

    it('answers 404 api_key_not_found for an unknown, a malformed or an already revoked id', async () => {
      const created = await createKey('member');
      await t.http.delete(`/api/v1/api-keys/${created.id}`).set(bearer(t.adminKey)).expect(204);

      for (const id of ['7d1c4c36-1b7a-4d5e-9a60-3a1f2b9c8e01', 'not-a-uuid', created.id]) {
        const res = await t.http.delete(`/api/v1/api-keys/${id}`).set(bearer(t.adminKey));
        expect({ id, status: res.status, code: errorOf(res).code }).toEqual({ id, status: 404, code: 'api_key_not_found' });
      }
    });

    it('revokes an admin key while another admin key remains', async () => {
      const second = await createKey('admin', 'second admin');
      await t.http.get('/api/v1/api-keys').set(bearer(second.secret)).expect(200);

      await t.http.delete(`/api/v1/api-keys/${second.id}`).set(bearer(t.adminKey)).expect(204);

      await t.http.get('/api/v1/api-keys').set(bearer(second.secret)).expect(401);
      await t.http.get('/api/v1/api-keys').set(bearer(t.adminKey)).expect(200);
    });

    it('refuses with 409 last_admin_key to revoke the last active admin key', async () => {
      const list = await t.http.get('/api/v1/api-keys').set(bearer(t.adminKey)).expect(200);
      const admins = bodyOf<ApiKeyListResponse>(list).apiKeys.filter((k) => k.role === 'admin' && !k.revoked);
      const own = admins.find((k) => k.prefix === TEST_ADMIN_KEY.slice(0, 8))!;
      for (const other of admins.filter((k) => k.id !== own.id)) {
        await t.http.delete(`/api/v1/api-keys/${other.id}`).set(bearer(t.adminKey)).expect(204);
      }

      const res = await t.http.delete(`/api/v1/api-keys/${own.id}`).set(bearer(t.adminKey)).expect(409);

      expect(errorOf(res).code).toBe('last_admin_key');
      await t.http.get('/api/v1/api-keys').set(bearer(t.adminKey)).expect(200);
      const [row] = await t.sql<{ revoked: boolean }>('select revoked from api_keys where id = $1', [own.id]);
      expect(row.revoked).toBe(false);
    });
  });

  describe('member keys', () => {
    it('can read objects and read and write records', async () => {
      const list = await t.http.get('/api/v1/objects').set(bearer(memberKey)).expect(200);
      expect(bodyOf<ObjectListResponse>(list).objects.map((o: { name: string }) => o.name)).toContain('note');
      await t.http.get('/api/v1/objects/note').set(bearer(memberKey)).expect(200);

      const created = await t.http
        .post('/api/v1/objects/note/records')
        .set(bearer(memberKey))
        .send({ title: 'by member' })
        .expect(201);
      await t.http
        .get(`/api/v1/objects/note/records/${idOf(created)}`)
        .set(bearer(memberKey))
        .expect(200);
      const records = await t.http.get('/api/v1/objects/note/records').set(bearer(memberKey)).expect(200);
      expect(bodyOf<RecordPage>(records).records.map((r) => r.title)).toContain('by member');
      await t.http
        .post('/api/v1/objects/note/aggregate')
        .set(bearer(memberKey))
        .send({ aggregations: [{ function: 'count', alias: 'n' }] })
        .expect(200);
    });

    it.each([
      ['POST', '/api/v1/objects', { name: 'member_object', label: 'M' }],
      ['PATCH', '/api/v1/objects/note', { label: 'Hijacked' }],
      ['DELETE', '/api/v1/objects/note', undefined],
      ['POST', '/api/v1/objects/note/fields', { name: 'extra', label: 'Extra', type: 'text' }],
      ['PATCH', '/api/v1/objects/note/fields/title', { label: 'Hijacked' }],
      ['DELETE', '/api/v1/objects/note/fields/title', undefined],
    ])('gets 403 forbidden on %s %s and changes nothing', async (method, path, body) => {
      const req = t.http[method.toLowerCase() as 'post' | 'patch' | 'delete'](path).set(bearer(memberKey));
      const res = await (body ? req.send(body) : req).expect(403);

      expect(errorOf(res).code).toBe('forbidden');
      const note = await t.http.get('/api/v1/objects/note').set(bearer(t.adminKey)).expect(200);
      expect(note.body).toMatchObject({ label: 'Note', fields: [expect.objectContaining({ name: 'title', label: 'Title' })] });
      expect(bodyOf<ObjectResponse>(note).fields).toHaveLength(1);
      const tables = await t.sql(
        `select table_name from information_schema.tables where table_schema = 'data' and table_name = 'member_object'`,
      );
      expect(tables).toEqual([]);
    });

    it('gets 403 forbidden on every /api/v1/api-keys route', async () => {
      const victim = await createKey('member');
      const responses = [
        await t.http.get('/api/v1/api-keys').set(bearer(memberKey)),
        await t.http.post('/api/v1/api-keys').set(bearer(memberKey)).send({ name: 'escalate', role: 'admin' }),
        await t.http.delete(`/api/v1/api-keys/${victim.id}`).set(bearer(memberKey)),
      ];
      expect(responses.map((r) => [r.status, errorOf(r).code])).toEqual([
        [403, 'forbidden'],
        [403, 'forbidden'],
        [403, 'forbidden'],
      ]);
      const [{ count }] = await t.sql<{ count: string }>(`select count(*) from api_keys where name = 'escalate'`);
      expect(Number(count)).toBe(0);
      await t.http.get('/api/v1/objects').set(bearer(victim.secret)).expect(200);
    });
  });

  describe('storage', () => {
    it('stores only the SHA-256 hash of each secret, never the secret', async () => {
      const created = await createKey('member', 'hash check');

      const rows = await t.sql<{ secret_hash: string; prefix: string; all: string }>(
        'select secret_hash, prefix, row_to_json(k)::text as all from api_keys k where id = $1',
        [created.id],
      );
      expect(rows).toHaveLength(1);
      expect(rows[0].secret_hash).toBe(sha256(created.secret));
      expect(rows[0].all).not.toContain(created.secret);

      const everything = await t.sql<{ all: string }>('select row_to_json(k)::text as all from api_keys k');
      for (const row of everything) {
        expect(row.all).not.toContain(TEST_ADMIN_KEY);
        expect(row.all).not.toContain(memberKey);
      }
      const admin = await t.sql('select 1 from api_keys where secret_hash = $1 and role = $2', [sha256(TEST_ADMIN_KEY), 'admin']);
      expect(admin).toHaveLength(1);
    });
  });

  describe('ADMIN_API_KEY at start', () => {
    it('makes the given secret an admin key, and restores it when it was revoked', async () => {
      const otherSecret = 'second-env-admin-key-0123456789';
      const replica = await startTestApp({ database: t.database, env: { ADMIN_API_KEY: otherSecret } });
      try {
        // The replica's start created an admin key with exactly that secret, visible to every replica.
        await t.http
          .post('/api/v1/api-keys')
          .set(bearer(otherSecret))
          .send({ name: 'made by env admin', role: 'member' })
          .expect(201);
        const list = await t.http.get('/api/v1/api-keys').set(bearer(otherSecret)).expect(200);
        const envKey = bodyOf<ApiKeyListResponse>(list).apiKeys.find(
          (k: { prefix: string; revoked: boolean }) => k.prefix === otherSecret.slice(0, 8) && !k.revoked,
        );
        expect(envKey).toMatchObject({ role: 'admin' });

        await t.http.delete(`/api/v1/api-keys/${envKey!.id}`).set(bearer(t.adminKey)).expect(204);
        await t.http.get('/api/v1/objects').set(bearer(otherSecret)).expect(401);
      } finally {
        await replica.close();
      }

      const restarted = await startTestApp({ database: t.database, env: { ADMIN_API_KEY: otherSecret } });
      try {
        await restarted.http.get('/api/v1/api-keys').set(bearer(otherSecret)).expect(200);
        const rows = await t.sql('select 1 from api_keys where secret_hash = $1', [sha256(otherSecret)]);
        expect(rows).toHaveLength(1);
      } finally {
        await restarted.close();
      }
    });
  });
});

describe('generated admin key (no key exists and ADMIN_API_KEY is unset)', () => {
  let t: TestApp;
  const logged: string[] = [];
  let writeSpy: jest.SpyInstance;

  beforeAll(async () => {
    // Logs on (LOG_LEVEL=info) only while starting, captured instead of printed.
    writeSpy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      logged.push(String(chunk));
      return true;
    });
    try {
      t = await startTestApp({ env: { ADMIN_API_KEY: '', LOG_LEVEL: 'info' } });
    } finally {
      writeSpy.mockRestore();
    }
    t.app.useLogger(false);
    t.app.getHttpAdapter().getInstance().log.level = 'silent';
  });
  afterAll(() => t.close());

  const keyFile = () => join(t.config.dataDir, 'admin-api-key');

  it('writes the secret to DATA_DIR/admin-api-key with mode 0600', async () => {
    const info = await stat(keyFile());
    expect(info.mode & 0o777).toBe(0o600);
    const secret = (await readFile(keyFile(), 'utf8')).trim();
    expect(secret.length).toBeGreaterThanOrEqual(32);
  });

  it('makes the written secret a working admin key', async () => {
    const secret = (await readFile(keyFile(), 'utf8')).trim();

    await t.http.post('/api/v1/api-keys').set(bearer(secret)).send({ name: 'from file', role: 'member' }).expect(201);
    const list = await t.http.get('/api/v1/api-keys').set(bearer(secret)).expect(200);
    expect(bodyOf<ApiKeyListResponse>(list).apiKeys).toEqual(
      expect.arrayContaining([expect.objectContaining({ role: 'admin', prefix: secret.slice(0, 8) })]),
    );
    // TEST_ADMIN_KEY was not configured for this app, so it is not a key here.
    await t.http.get('/api/v1/objects').set(bearer(TEST_ADMIN_KEY)).expect(401);
  });

  it('logs the path of the file but never the secret', async () => {
    const secret = (await readFile(keyFile(), 'utf8')).trim();
    const output = logged.join('');
    expect(output).toContain(keyFile());
    expect(output).not.toContain(secret);
  });

  it('stores the generated secret only as a hash', async () => {
    const secret = (await readFile(keyFile(), 'utf8')).trim();
    const rows = await t.sql<{ secret_hash: string; all: string }>(
      'select secret_hash, row_to_json(k)::text as all from api_keys k',
    );
    expect(rows.map((r) => r.secret_hash)).toContain(sha256(secret));
    for (const row of rows) expect(row.all).not.toContain(secret);
  });

  it('does not generate another key on a restart once keys exist', async () => {
    const before = await t.sql<{ count: string }>('select count(*) from api_keys');
    const restarted = await startTestApp({ database: t.database, env: { ADMIN_API_KEY: '' } });
    try {
      const after = await t.sql<{ count: string }>('select count(*) from api_keys');
      expect(after[0].count).toBe(before[0].count);
      await expect(stat(join(restarted.config.dataDir, 'admin-api-key'))).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      await restarted.close();
    }
  });
});
