import { parse } from 'csv-parse/sync';
import { request as httpRequest } from 'node:http';
import { eventually, listen } from '../support/chat-helpers';
import { errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey } from '../support/fixtures';

const ROWS = 200_000;
/** A small export: one column of the 2,000 rows with qty 0 (all of them ann's). */
const SMALL = `?fields=sku&where=${encodeURIComponent('{"qty":0}')}`;
/** Far beyond any test: the one limit a describe block is about is the only one that can end an export. */
const NEVER = { EXPORT_STALL_TIMEOUT_MS: '3600000', EXPORT_MAX_DURATION_MS: '86400000' };

/** An export response as it arrived; `ended` resolves once it closed, with whether it was complete. */
interface OpenExport {
  status: number;
  body: string;
  retryAfter?: string;
  ended: Promise<boolean>;
  /** Closes the client's socket, as a closed browser tab does. */
  destroy(): void;
  /** Reads on until the response closes: the whole body, and whether it was complete. */
  finish(): Promise<{ body: string; complete: boolean }>;
}

/**
 * Starts an export and reads its first chunk, then stops reading (a 200), or reads the whole error
 * (anything else). A stopped reader fills the socket's buffers and the server then waits for it.
 */
function startExport(baseUrl: string, key: string, query = ''): Promise<OpenExport> {
  const req = httpRequest(`${baseUrl}/api/v1/objects/ledger/records/export.csv${query}`, { headers: bearer(key), agent: false });
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      req.off('error', reject);
      req.on('error', () => undefined);
      res.on('error', () => undefined);
      const ended = new Promise<boolean>((done) => res.on('close', () => done(res.complete)));
      const opened = (body: string): OpenExport => ({
        status: res.statusCode ?? 0,
        body,
        retryAfter: res.headers['retry-after'],
        ended,
        destroy: () => req.destroy(),
        finish: async () => {
          let rest = body;
          res.on('data', (chunk: string) => (rest += chunk));
          res.resume();
          const complete = await ended;
          return { body: rest, complete };
        },
      });
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let body = '';
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve(opened(body)));
        return;
      }
      res.once('data', (chunk: string) => {
        res.pause();
        resolve(opened(chunk));
      });
    });
    req.end();
  });
}

/** Data pool connections inside a transaction: an export's, while it streams. */
async function openTransactions(t: TestApp): Promise<number> {
  const [row] = await t.sql<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity
      where datname = current_database() and application_name = 'data-copilot:data' and xact_start is not null`,
  );
  return row.n;
}

/** Resolves once no data pool connection is inside a transaction (polled), or fails. */
async function noOpenTransaction(t: TestApp): Promise<void> {
  await eventually(async () => (await openTransactions(t)) === 0, 10_000);
}

describe('CSV export at scale: batches, caps, disconnects and time limits', () => {
  let t: TestApp;
  let ann: string;
  let bob: string;
  let cy: string;

  beforeAll(async () => {
    t = await startTestApp();
    await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .send({
        name: 'ledger',
        label: 'Ledger',
        fields: [
          { name: 'sku', label: 'SKU', type: 'text' },
          { name: 'qty', label: 'Quantity', type: 'integer' },
          { name: 'owner', label: 'Owner', type: 'text' },
          { name: 'note', label: 'Note', type: 'textarea' },
        ],
      })
      .expect(201);
    // Notes with commas, quotes and a line break on one row in seven.
    await t.sql(
      `insert into data.ledger (sku, qty, owner, note)
       select 'sku-' || g, g % 100, case when g % 2 = 0 then 'ann' else 'bob' end,
              case when g % 7 = 0 then 'note ' || g || ', with "quotes"' || chr(10) || 'and a second line' end
       from generate_series(1, $1::int) g`,
      [ROWS],
    );
    await t.http
      .post('/api/v1/policies')
      .set(bearer(t.adminKey))
      .send({ name: 'own-ledger', objects: { ledger: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['note'] } } })
      .expect(201);
    ann = (await createApiKey(t, { name: 'ann', role: 'member', subject: 'ann', policies: ['own-ledger'] })).secret;
    bob = (await createApiKey(t, { name: 'bob', role: 'member' })).secret;
    cy = (await createApiKey(t, { name: 'cy', role: 'member' })).secret;
  });
  afterAll(() => t.close());

  const exportText = async (key: string, query: string) => {
    const res = await t.http
      .get(`/api/v1/objects/ledger/records/export.csv${query}`)
      .set(bearer(key))
      .buffer(true)
      .parse((stream, done) => {
        let text = '';
        stream.setEncoding('utf8');
        stream.on('data', (chunk: string) => (text += chunk));
        stream.on('end', () => done(null, text));
      })
      .expect(200);
    return String(res.body);
  };

  it('streams an export of many batches whole, in order, as the same query in SQL lists it', async () => {
    const where = encodeURIComponent(JSON.stringify({ qty: { $lt: 15 } }));
    const orderBy = encodeURIComponent(JSON.stringify([{ field: 'qty', order: 'desc' }]));
    const rows: string[][] = parse(await exportText(bob, `?where=${where}&orderBy=${orderBy}&fields=sku,qty,note`));
    const expected = await t.sql<{ sku: string; qty_text: string; note: string }>(
      `select sku, qty::text as qty_text, coalesce(note, '') as note from data.ledger where qty < 15 order by qty desc, id`,
    );
    expect(expected.length).toBe(30_000);
    expect(rows[0]).toEqual(['sku', 'qty', 'note']);
    expect(rows.slice(1)).toEqual(expected.map((r) => [r.sku, r.qty_text, r.note]));
  });

  it("keeps to the caller's row filter and hidden fields in every batch", async () => {
    const rows: string[][] = parse(await exportText(ann, `?where=${encodeURIComponent('{"qty":{"$lt":20}}')}`));
    expect(rows[0]).toEqual(['id', 'created_at', 'updated_at', 'sku', 'qty', 'owner']);
    const expected = await t.sql<{ sku: string }>(`select sku from data.ledger where owner = 'ann' and qty < 20 order by id`);
    expect(expected.length).toBe(20_000);
    expect(rows.slice(1).map((r) => r[3])).toEqual(expected.map((r) => r.sku));
    expect(new Set(rows.slice(1).map((r) => r[5]))).toEqual(new Set(['ann']));
  });

  describe('with EXPORT_CONCURRENCY=2 and one export per key', () => {
    let replica: TestApp;
    let baseUrl: string;

    beforeAll(async () => {
      replica = await startTestApp({ database: t.database, env: { ...NEVER, EXPORT_CONCURRENCY: '2', EXPORT_MAX_PER_KEY: '1' } });
      baseUrl = await listen(replica);
    });
    afterAll(() => replica.close());

    it("refuses a key's second export and a third key's with 429 too_many_exports, and frees the slots as exports end", async () => {
      const first = await startExport(baseUrl, bob);
      expect(first.status).toBe(200);
      const again = await startExport(baseUrl, bob);
      expect(again.status).toBe(429);
      expect(Number(again.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(again.body)).toMatchObject({
        code: 'too_many_exports',
        details: { scope: 'key', running: 1, limit: 1 },
      });

      const second = await startExport(baseUrl, cy);
      expect(second.status).toBe(200);
      const third = await startExport(baseUrl, ann);
      expect(third.status).toBe(429);
      expect(JSON.parse(third.body)).toMatchObject({
        code: 'too_many_exports',
        details: { scope: 'server', running: 2, limit: 2 },
      });
      // The other routes are not held up by the exports.
      await replica.http.get('/api/v1/objects/ledger/records?limit=1').set(bearer(ann)).expect(200);

      first.destroy();
      second.destroy();
      expect(await first.ended).toBe(false);
      await noOpenTransaction(t);
      await eventually(async () => {
        const next = await startExport(baseUrl, ann, SMALL);
        if (next.status !== 200) return false;
        const { body, complete } = await next.finish();
        expect(complete).toBe(true);
        expect(parse(body)).toHaveLength(2001);
        return true;
      });
    });
  });

  describe('with a data pool of one connection', () => {
    let replica: TestApp;
    let baseUrl: string;

    beforeAll(async () => {
      replica = await startTestApp({
        database: t.database,
        env: { ...NEVER, DATA_POOL_SIZE: '1', DB_ACQUIRE_TIMEOUT_MS: '500' },
      });
      baseUrl = await listen(replica);
    });
    afterAll(() => replica.close());

    it('ends the transaction and frees the connection as soon as the client disconnects mid-export', async () => {
      const held = await startExport(baseUrl, bob);
      expect(held.status).toBe(200);
      expect(held.body.startsWith('id,created_at,updated_at,sku,qty,owner,note\n')).toBe(true);
      // The export holds the only connection, inside its transaction, while its client does not read.
      expect(await openTransactions(t)).toBe(1);
      const busy = await replica.http.get('/api/v1/objects/ledger/records?limit=1').set(bearer(cy));
      expect([busy.status, errorOf(busy).code]).toEqual([503, 'database_busy']);

      held.destroy();
      expect(await held.ended).toBe(false);
      await noOpenTransaction(t);
      await replica.http.get('/api/v1/objects/ledger/records?limit=1').set(bearer(cy)).expect(200);
      // Its slot is free again too.
      const next = await startExport(baseUrl, bob, SMALL);
      expect(next.status).toBe(200);
      const { body, complete } = await next.finish();
      expect(complete).toBe(true);
      expect(parse(body)).toHaveLength(2001);
    });
  });

  it('cuts a running export short when the server stops, which then stops at once', async () => {
    const replica = await startTestApp({ database: t.database, env: NEVER });
    const held = await startExport(await listen(replica), bob);
    expect(held.status).toBe(200);
    await replica.close();
    const { complete } = await held.finish();
    expect(complete).toBe(false);
    await noOpenTransaction(t);
  });

  describe('with EXPORT_STALL_TIMEOUT_MS=1000', () => {
    let replica: TestApp;
    let baseUrl: string;

    beforeAll(async () => {
      replica = await startTestApp({
        database: t.database,
        env: { ...NEVER, EXPORT_STALL_TIMEOUT_MS: '1000', DATA_POOL_SIZE: '1' },
      });
      baseUrl = await listen(replica);
    });
    afterAll(() => replica.close());

    it('cuts short an export whose client stops reading, rolling its transaction back', async () => {
      const stalled = await startExport(baseUrl, bob);
      expect(stalled.status).toBe(200);
      // The client reads nothing more: the server gives up on it and ends the transaction.
      await noOpenTransaction(t);
      // What the client still had to read ends without the response's last chunk.
      const { body, complete } = await stalled.finish();
      expect(complete).toBe(false);
      expect(body.split('\n').length).toBeLessThan(ROWS);
      await replica.http.get('/api/v1/objects/ledger/records?limit=1').set(bearer(cy)).expect(200);
    });
  });

  describe('with EXPORT_MAX_DURATION_MS=5000', () => {
    let replica: TestApp;
    let baseUrl: string;

    beforeAll(async () => {
      replica = await startTestApp({
        database: t.database,
        // Time enough for the response to start on a busy machine; the reader then stops reading.
        env: { ...NEVER, EXPORT_MAX_DURATION_MS: '5000', DATA_POOL_SIZE: '1' },
      });
      baseUrl = await listen(replica);
    });
    afterAll(() => replica.close());

    it('cuts short an export still streaming when its time is up, rolling its transaction back', async () => {
      const slow = await startExport(baseUrl, bob);
      expect(slow.status).toBe(200);
      expect(await openTransactions(t)).toBe(1);
      await noOpenTransaction(t);
      const { body, complete } = await slow.finish();
      expect(complete).toBe(false);
      expect(body.split('\n').length).toBeLessThan(ROWS);
      await replica.http.get('/api/v1/objects/ledger/records?limit=1').set(bearer(cy)).expect(200);
    });
  });
});
