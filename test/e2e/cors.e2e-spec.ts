import type { Response } from 'supertest';
import type { ChatResponse } from '../../src/chats/durable/chat.dto';
import { startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, SseClient, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

const APP_ORIGIN = 'https://app.example.com';
const DEV_ORIGIN = 'http://localhost:5173';
const OTHER_ORIGIN = 'https://evil.example.net';

/** The access-control-* headers of a response (names lower-cased, as Node gives them). */
function corsHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('access-control-')));
}

/** The comma-separated values of a header, lower-cased. */
function listOf(value: string | string[] | undefined): string[] {
  return [value ?? '']
    .flat()
    .join(',')
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .filter(Boolean);
}

/** Reads a streamed body to its end as text (supertest would try to parse it). */
function asText(res: Response, callback: (error: Error | null, body: string) => void): void {
  let data = '';
  res.on('data', (chunk: Buffer) => (data += chunk.toString()));
  res.on('end', () => callback(null, data));
}

describe('CORS', () => {
  describe('with CORS_ORIGINS listing origins', () => {
    let t: TestApp;
    let llm: MockLlmServer;
    let baseUrl: string;

    const preflight = (path: string, origin: string) =>
      t.http
        .options(path)
        .set('Origin', origin)
        .set('Access-Control-Request-Method', 'POST')
        .set('Access-Control-Request-Headers', 'authorization, content-type');

    beforeAll(async () => {
      ({ t, llm } = await startAppWithMockLlm({
        env: { CORS_ORIGINS: `${APP_ORIGIN}, ${DEV_ORIGIN}`, CHAT_POLL_INTERVAL_MS: '200', SSE_KEEPALIVE_MS: '1000' },
      }));
      baseUrl = await listen(t);
    });
    afterAll(async () => {
      await t.close();
      await llm.close();
    });
    beforeEach(() => llm.reset());

    it('answers a preflight from an allowed origin with 204, the methods and headers, without an API key', async () => {
      const res = await preflight('/api/v1/chats', APP_ORIGIN).expect(204);
      expect(res.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
      expect(listOf(res.headers['access-control-allow-methods'])).toEqual(
        expect.arrayContaining(['get', 'post', 'put', 'patch', 'delete']),
      );
      expect(listOf(res.headers['access-control-allow-headers'])).toEqual(
        expect.arrayContaining(['authorization', 'content-type', 'last-event-id', 'x-request-id']),
      );
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
      expect(listOf(res.headers.vary)).toContain('origin');
      expect(res.text).toBe('');
    });

    it('answers preflights on any route: parameterised, unknown, and outside /api', async () => {
      for (const path of ['/api/v1/objects/deal/records/abc', '/api/v1/no-such-route', '/health']) {
        const res = await preflight(path, DEV_ORIGIN).expect(204);
        expect(res.headers['access-control-allow-origin']).toBe(DEV_ORIGIN);
      }
    });

    it('sends no access-control-* header to an origin that is not listed, preflight or not', async () => {
      const pre = await preflight('/api/v1/chats', OTHER_ORIGIN);
      expect(pre.status).toBe(404);
      expect(corsHeaders(pre.headers)).toEqual({});

      const get = await t.http.get('/api/v1/objects').set(bearer(t.adminKey)).set('Origin', OTHER_ORIGIN).expect(200);
      expect(corsHeaders(get.headers)).toEqual({});
      // A listed origin differing only by its port or scheme is another origin.
      const port = await t.http.get('/api/v1/objects').set(bearer(t.adminKey)).set('Origin', 'https://app.example.com:8443');
      expect(corsHeaders(port.headers)).toEqual({});
    });

    it('sends none to a request without Origin (same-origin pages, curl)', async () => {
      const res = await t.http.get('/api/v1/objects').set(bearer(t.adminKey)).expect(200);
      expect(corsHeaders(res.headers)).toEqual({});
    });

    it('lets an allowed page read successful and failed responses, with x-request-id exposed', async () => {
      const ok = await t.http.get('/api/v1/objects').set(bearer(t.adminKey)).set('Origin', APP_ORIGIN).expect(200);
      expect(ok.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
      expect(listOf(ok.headers['access-control-expose-headers'])).toContain('x-request-id');
      // Other origins may read it: the resource policy allows them.
      expect(ok.headers['cross-origin-resource-policy']).toBe('cross-origin');

      const unauthorized = await t.http.get('/api/v1/objects').set('Origin', APP_ORIGIN).expect(401);
      expect(errorOf(unauthorized).code).toBe('unauthorized');
      expect(unauthorized.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
      expect(listOf(unauthorized.headers['access-control-expose-headers'])).toContain('x-request-id');
      expect(unauthorized.headers['x-request-id']).toEqual(expect.any(String));

      const missing = await t.http.get('/api/v1/objects/nope').set(bearer(t.adminKey)).set('Origin', APP_ORIGIN).expect(404);
      expect(errorOf(missing).code).toBe('object_not_found');
      expect(missing.headers['access-control-allow-origin']).toBe(APP_ORIGIN);

      const noRoute = await t.http.get('/api/v1/no-such-route').set(bearer(t.adminKey)).set('Origin', APP_ORIGIN).expect(404);
      expect(errorOf(noRoute).code).toBe('route_not_found');
      expect(noRoute.headers['access-control-allow-origin']).toBe(APP_ORIGIN);

      const invalid = await t.http
        .post('/api/v1/chats')
        .set(bearer(t.adminKey))
        .set('Origin', APP_ORIGIN)
        .send({ agent: 'data_chat' })
        .expect(400);
      expect(errorOf(invalid).code).toBe('validation_failed');
      expect(invalid.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
    });

    it('puts the CORS headers and x-request-id on the event streams of durable chats', async () => {
      llm.enqueue(MockReply.text('Hello there.'));
      const created = await t.http
        .post('/api/v1/chats')
        .set(bearer(t.adminKey))
        .send({ agent: 'data_chat', message: 'Hi' })
        .expect(201);
      const id = bodyOf<ChatResponse>(created).id;
      await waitForChat(t, id, hasStatus('waiting'));

      for (const path of [`/api/v1/chats/${id}/stream`, '/api/v1/chats/watch']) {
        const stream = await SseClient.open(baseUrl, path, t.adminKey, { origin: APP_ORIGIN, 'x-request-id': `trace-${id}` });
        try {
          expect(stream.headers['content-type']).toContain('text/event-stream');
          expect(stream.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
          expect(listOf(stream.headers['access-control-expose-headers'])).toContain('x-request-id');
          expect(stream.headers['x-request-id']).toBe(`trace-${id}`);
        } finally {
          stream.close();
        }
      }

      const other = await SseClient.open(baseUrl, '/api/v1/chats/watch', t.adminKey, { origin: OTHER_ORIGIN });
      try {
        expect(corsHeaders(other.headers)).toEqual({});
        expect(other.headers['x-request-id']).toEqual(expect.any(String));
      } finally {
        other.close();
      }
    });

    it('puts them on the streamed stateless chat too', async () => {
      llm.enqueue(MockReply.text('Streamed hello.'));
      const res = await t.http
        .post('/api/v1/ai/agents/data_chat/chat')
        .set(bearer(t.adminKey))
        .set('Origin', DEV_ORIGIN)
        .send({ messages: [{ role: 'user', content: 'Hi' }], stream: true })
        .buffer(true)
        .parse(asText)
        .expect(200);
      expect(res.headers['content-type']).toContain('text/event-stream');
      expect(res.body as string).toContain('"delta":" hello."');
      expect(res.headers['access-control-allow-origin']).toBe(DEV_ORIGIN);
      expect(res.headers['x-request-id']).toEqual(expect.any(String));
    });
  });

  describe('with CORS_ORIGINS=*', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await startTestApp({ env: { CORS_ORIGINS: '*' } });
    });
    afterAll(() => t.close());

    it('allows any origin, on preflights and on responses', async () => {
      const pre = await t.http
        .options('/api/v1/objects')
        .set('Origin', OTHER_ORIGIN)
        .set('Access-Control-Request-Method', 'DELETE')
        .expect(204);
      expect(pre.headers['access-control-allow-origin']).toBe('*');
      expect(listOf(pre.headers['access-control-allow-methods'])).toContain('delete');

      const res = await t.http.get('/api/v1/objects').set('Origin', OTHER_ORIGIN).expect(401);
      expect(res.headers['access-control-allow-origin']).toBe('*');
      expect(listOf(res.headers['access-control-expose-headers'])).toContain('x-request-id');
    });
  });

  describe('without CORS_ORIGINS', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await startTestApp();
    });
    afterAll(() => t.close());

    it('allows no cross-origin access: no access-control-* header anywhere, preflights unanswered', async () => {
      const pre = await t.http.options('/api/v1/objects').set('Origin', APP_ORIGIN).set('Access-Control-Request-Method', 'GET');
      expect(pre.status).toBe(404);
      expect(corsHeaders(pre.headers)).toEqual({});

      const res = await t.http.get('/api/v1/objects').set(bearer(t.adminKey)).set('Origin', APP_ORIGIN).expect(200);
      expect(corsHeaders(res.headers)).toEqual({});
    });
  });
});
