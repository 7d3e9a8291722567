import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_RESPONSE_BODY_BYTES, postOnce } from './webhook-sender';

describe('postOnce', () => {
  let server: http.Server;
  let port: number;
  const seen: { host?: string; body: string }[] = [];
  let answer: (res: http.ServerResponse) => void = (res) => res.writeHead(204).end();

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ host: req.headers.host, body: Buffer.concat(chunks).toString('utf8') });
        answer(res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => {
    seen.length = 0;
    answer = (res) => res.writeHead(204).end();
  });

  const target = (host: string) => ({ url: new URL(`http://${host}:${port}/in`), address: '127.0.0.1', family: 4 as const });

  it('connects to the pinned address, whatever the host name would resolve to, and keeps the Host header', async () => {
    const result = await postOnce(target('hooks.example.invalid'), { 'webhook-id': 'x' }, '{"a":1}', 2_000);
    expect(result).toMatchObject({ ok: true, status: 204 });
    expect(seen).toEqual([{ host: `hooks.example.invalid:${port}`, body: '{"a":1}' }]);
  });

  it('does not follow a redirect: a 3xx is a failed attempt', async () => {
    answer = (res) => res.writeHead(302, { location: 'http://169.254.169.254/latest' }).end();
    const result = await postOnce(target('hooks.example.invalid'), {}, '{}', 2_000);
    expect(result).toMatchObject({ ok: false, status: 302 });
    expect(result.error).toContain('redirects are not followed');
    expect(seen).toHaveLength(1);
  });

  it('keeps at most 1 KB of the response body', async () => {
    answer = (res) => res.writeHead(500).end('x'.repeat(10_000));
    const result = await postOnce(target('localhost'), {}, '{}', 2_000);
    expect(result).toMatchObject({ ok: false, status: 500 });
    expect(result.body).toHaveLength(MAX_RESPONSE_BODY_BYTES);
  });

  it('ends an attempt that gets no answer in time', async () => {
    answer = () => undefined; // never answers
    const result = await postOnce(target('localhost'), {}, '{}', 200);
    expect(result.ok).toBe(false);
    expect(result.status).toBeUndefined();
    expect(result.error).toContain('No response within 200 ms');
  });

  it('reports a refused connection', async () => {
    const closed = { url: new URL('http://localhost:9/in'), address: '127.0.0.1', family: 4 as const };
    const result = await postOnce(closed, {}, '{}', 2_000);
    expect(result).toMatchObject({ ok: false });
    expect(result.error).toContain('ECONNREFUSED');
  });
});
