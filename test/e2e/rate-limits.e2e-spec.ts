import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey } from '../support/fixtures';

const PER_MINUTE = 5;
const AUTH_FAILURES = 3;

describe('rate limits per API key, failed-authentication throttling and security headers', () => {
  let t: TestApp;
  let member: CreatedApiKeyResponse;

  beforeAll(async () => {
    t = await startTestApp({
      env: { RATE_LIMIT_PER_MINUTE: String(PER_MINUTE), AUTH_FAILURES_PER_MINUTE: String(AUTH_FAILURES) },
    });
    member = await createApiKey(t, { name: 'm', role: 'member' });
  });
  afterAll(() => t.close());

  it('counts a member key’s requests with RateLimit-* headers, then answers 429 rate_limited with Retry-After', async () => {
    for (let i = 1; i <= PER_MINUTE; i++) {
      const res = await t.http.get('/api/v1/objects').set(bearer(member.secret)).expect(200);
      expect(res.headers['ratelimit-limit']).toBe(String(PER_MINUTE));
      expect(res.headers['ratelimit-remaining']).toBe(String(PER_MINUTE - i));
      expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThan(0);
    }
    const limited = await t.http.get('/api/v1/objects').set(bearer(member.secret));
    expect(limited.status).toBe(429);
    expect(errorOf(limited)).toMatchObject({ code: 'rate_limited' });
    expect(limited.headers['ratelimit-remaining']).toBe('0');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited.headers['x-request-id']).toBeDefined();
    // Every keyed door counts: under /v1 the refusal takes OpenAI's shape.
    const openai = await t.http.get('/v1/models').set(bearer(member.secret));
    expect(openai.status).toBe(429);
    expect(bodyOf<{ error: { type: string; code: string } }>(openai).error).toMatchObject({
      type: 'rate_limit_error',
      code: 'rate_limited',
    });
  });

  it('does not limit admin keys, health or requests without a key', async () => {
    for (let i = 0; i < PER_MINUTE * 2; i++) {
      const res = await t.http.get('/api/v1/objects').set(bearer(t.adminKey)).expect(200);
      expect(res.headers['ratelimit-limit']).toBeUndefined();
      await t.http.get('/health').expect(200);
    }
    const anonymous = await t.http.get('/api/v1/objects');
    expect(anonymous.status).toBe(401);
  });

  it("sends security headers (helmet's defaults) on answers and refusals alike", async () => {
    const expected = {
      'content-security-policy':
        "default-src 'self';base-uri 'self';font-src 'self' https: data:;form-action 'self';frame-ancestors 'self';" +
        "img-src 'self' data:;object-src 'none';script-src 'self';script-src-attr 'none';" +
        "style-src 'self' https: 'unsafe-inline';upgrade-insecure-requests",
      'cross-origin-opener-policy': 'same-origin',
      'cross-origin-resource-policy': 'same-origin',
      'origin-agent-cluster': '?1',
      'referrer-policy': 'no-referrer',
      'strict-transport-security': 'max-age=31536000; includeSubDomains',
      'x-content-type-options': 'nosniff',
      'x-dns-prefetch-control': 'off',
      'x-download-options': 'noopen',
      'x-frame-options': 'SAMEORIGIN',
      'x-permitted-cross-domain-policies': 'none',
      'x-xss-protection': '0',
    };
    const ok = await t.http.get('/health').expect(200);
    // Without a key: a wrong one would count towards the throttling of the last test.
    const refused = await t.http.get('/api/v1/objects');
    expect(refused.status).toBe(401);
    for (const res of [ok, refused]) {
      expect(res.headers).toMatchObject(expected);
      expect(res.headers['x-powered-by']).toBeUndefined();
      expect(res.headers['x-request-id']).toBeDefined();
    }
    const docs = await t.http.get('/docs').redirects(1);
    expect(docs.status).toBe(200);
  });

  // Last: it blocks every credential of the test's own address for the rest of the minute.
  it('throttles an address after repeated failed authentications, except for keys it verified lately', async () => {
    const fresh = await createApiKey(t, { name: 'fresh', role: 'member' });
    for (let i = 0; i < AUTH_FAILURES; i++) {
      const res = await t.http.get('/api/v1/objects').set(bearer(`wrong-key-${i}`));
      expect(res.status).toBe(401);
    }
    const throttled = await t.http.get('/api/v1/objects').set(bearer('wrong-key-again'));
    expect(throttled.status).toBe(429);
    expect(errorOf(throttled).code).toBe('rate_limited');
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    // A key the server has not verified lately waits too: guessing stays closed.
    expect((await t.http.get('/api/v1/objects').set(bearer(fresh.secret))).status).toBe(429);
    // A key it verified lately still works from that address: clients behind one proxy are not locked out by another.
    expect((await t.http.get('/api/v1/objects').set(bearer(t.adminKey))).status).toBe(200);
    // Requests without a credential guess nothing and are not throttled.
    expect((await t.http.get('/api/v1/objects')).status).toBe(401);
  });
});
