import { EntityManager } from '@mikro-orm/postgresql';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PoolClient } from 'pg';
import type { AggregateResponse } from '../../src/records/records.dto';
import { ORM_POOL_SIZE } from '../../src/database/orm.config';
import { MAX_INDEXED_TEXT_BYTES } from '../../src/metadata/object-metadata.types';
import type { ExecuteToolResponse } from '../../src/tools/tools.dto';
import { listen } from '../support/chat-helpers';
import { bodyOf, errorOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createObject, memberSecret } from '../support/fixtures';

/** 199 "a" and a "b": never found in a text of "a"s, after comparing almost the whole operand at every position. */
const SLOW_NEEDLE = `${'a'.repeat(199)}b`;
const slowWhere = (field: string) => JSON.stringify({ [field]: { $contains: SLOW_NEEDLE } });

/** An object `big_note` whose `body` holds `rows` texts of 100,000 "a"s: a $contains of SLOW_NEEDLE spends tens of ms on each. */
async function seedBigNotes(t: TestApp, rows: number): Promise<void> {
  await createObject(t, 'big_note', [{ name: 'body', label: 'Body', type: 'textarea' }], { label: 'big_note' });
  await t.sql(`insert into data.big_note (body) select repeat('a', 100000) from generate_series(1, $1::int)`, [rows]);
}

/** Statements on `big_note` that the server is running right now (this one aside). */
async function runningBigNoteQueries(t: TestApp): Promise<number> {
  const [row] = await t.sql<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like '%"big_note"%'`,
  );
  return row.n;
}

/** The running `big_note` statements, read until there are `expected` (or about 10 s passed). */
function waitForRunningBigNoteQueries(t: TestApp, expected: number): Promise<number> {
  return pollUntil(
    () => runningBigNoteQueries(t),
    (n) => n === expected,
  );
}

/** Polls `read` until `done` holds or about `boundMs` passed; returns the last value read. */
async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, boundMs = 10_000): Promise<T> {
  let value = await read();
  for (let waited = 0; !done(value) && waited < boundMs; waited += 50) {
    await sleep(50);
    value = await read();
  }
  return value;
}

interface Abandonable {
  /** Closes the request's socket, as a browser tab that is closed. */
  destroy(): void;
  /** Resolves once the request ended, answered or not. */
  settled: Promise<void>;
  /** The answer, once it came in whole (undefined until then, and for ever if the request was destroyed first). */
  answer?: { status: number; body: string };
}

/** A GET (or, with a body, a JSON POST) the test can abandon. */
function abandonableRequest(baseUrl: string, path: string, key: string, body?: unknown): Abandonable {
  const headers = { ...bearer(key), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
  const req = httpRequest(`${baseUrl}${path}`, { method: body === undefined ? 'GET' : 'POST', headers, agent: false });
  const request: Abandonable = { destroy: () => req.destroy(), settled: Promise.resolve() };
  request.settled = new Promise<void>((resolve) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => (request.answer = { status: res.statusCode ?? 0, body: text }));
      res.on('close', resolve);
    });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
  });
  req.end(body === undefined ? undefined : JSON.stringify(body));
  return request;
}

function abandonableGet(baseUrl: string, path: string, key: string): Abandonable {
  return abandonableRequest(baseUrl, path, key);
}

describe('data limits', () => {
  describe('slow REST data queries are bounded and cancelled when the client leaves (finding 1)', () => {
    describe('abandoned queries', () => {
      const ABANDONED = 4;
      let t: TestApp;
      let baseUrl: string;
      let alice: string;
      let bob: string;

      beforeAll(async () => {
        // A timeout far beyond the test: only the cancellation can end these queries in time. Alice's
        // share of the pool (half) is ABANDONED connections.
        t = await startTestApp({
          env: { QUERY_TIMEOUT_MS: '600000', DATA_POOL_SIZE: String(2 * ABANDONED), TOOL_TIMEOUT_MS: '1000' },
        });
        baseUrl = await listen(t);
        [alice, bob] = [await memberSecret(t, 'alice'), await memberSecret(t, 'bob')];
        // Tens of seconds per query: far longer than the bounded wait for them to end below.
        await seedBigNotes(t, 1000);
        await createObject(t, 'memo', [{ name: 'title', label: 'Title', type: 'text' }], { label: 'memo' });
        await t.http.post('/api/v1/objects/memo/records').set(bearer(bob)).send({ title: 'Quarterly review' }).expect(201);
      });
      afterAll(() => t.close());

      it('answers /health and another member while the queries run, and ends them once their clients left', async () => {
        const where = encodeURIComponent(slowWhere('body'));
        const clients = Array.from({ length: ABANDONED }, () =>
          abandonableGet(baseUrl, `/api/v1/objects/big_note/records?where=${where}`, alice),
        );
        expect(await waitForRunningBigNoteQueries(t, ABANDONED)).toBe(ABANDONED);

        expect((await t.http.get('/health').expect(200)).body).toEqual({ status: 'ok' });
        const memos = await t.http.get('/api/v1/objects/memo/records').set(bearer(bob)).expect(200);
        expect(bodyOf<{ total: number }>(memos).total).toBe(1);
        // Still running: the answers above did not wait for them.
        expect(await runningBigNoteQueries(t)).toBe(ABANDONED);

        for (const client of clients) client.destroy();
        await Promise.all(clients.map((client) => client.settled));
        expect(await waitForRunningBigNoteQueries(t, 0)).toBe(0);
        // The pool is whole again: every connection that ran an abandoned query was replaced.
        await t.http.get('/api/v1/objects/memo/records').set(bearer(bob)).expect(200);
      });

      it('ends the statement of a data tool call that timed out, through the same cancellation', async () => {
        const call = t.http
          .post('/api/v1/ai/tools/query_records/execute')
          .set(bearer(alice))
          .send({ arguments: { objectName: 'big_note', where: JSON.parse(slowWhere('body')) as unknown, fields: ['id'] } })
          .then((res) => res);
        expect(await waitForRunningBigNoteQueries(t, 1)).toBe(1);
        const res = await call;
        expect(res.status).toBe(200);
        expect(bodyOf<ExecuteToolResponse>(res)).toMatchObject({ isError: true, result: { error: { code: 'tool_timeout' } } });
        expect(await waitForRunningBigNoteQueries(t, 0)).toBe(0);
      });
    });

    describe('with a short QUERY_TIMEOUT_MS', () => {
      let t: TestApp;
      let alice: string;

      beforeAll(async () => {
        t = await startTestApp({ env: { QUERY_TIMEOUT_MS: '3000' } });
        alice = await memberSecret(t, 'alice');
        // Several times longer than QUERY_TIMEOUT_MS to scan; the abandoned queries above need far more.
        await seedBigNotes(t, 300);
      });
      afterAll(() => t.close());

      it('answers a records query that outlasts QUERY_TIMEOUT_MS with 503 query_timeout', async () => {
        const res = await t.http
          .get('/api/v1/objects/big_note/records')
          .query({ where: slowWhere('body') })
          .set(bearer(alice));
        expect(res.status).toBe(503);
        expect(errorOf(res)).toMatchObject({ code: 'query_timeout', details: { statementTimeoutMs: 3000 } });
        // The error reaches the client a moment before the server marks its session idle.
        expect(await waitForRunningBigNoteQueries(t, 0)).toBe(0);
      });

      it('answers an aggregate that outlasts it the same way', async () => {
        const res = await t.http
          .post('/api/v1/objects/big_note/aggregate')
          .set(bearer(alice))
          .send({ where: JSON.parse(slowWhere('body')) as unknown, aggregations: [{ function: 'count', alias: 'n' }] });
        expect(res.status).toBe(503);
        expect(errorOf(res).code).toBe('query_timeout');
      });
    });

    describe('with a pool of one connection', () => {
      let t: TestApp;
      let baseUrl: string;
      let alice: string;

      beforeAll(async () => {
        t = await startTestApp({ env: { QUERY_TIMEOUT_MS: '600000', DATA_POOL_SIZE: '1', DB_ACQUIRE_TIMEOUT_MS: '200' } });
        baseUrl = await listen(t);
        alice = await memberSecret(t, 'alice');
        await seedBigNotes(t, 1000);
      });
      afterAll(() => t.close());

      it('answers 503 database_busy with Retry-After while the pool stays taken, and /health 200 meanwhile', async () => {
        const holder = abandonableGet(
          baseUrl,
          `/api/v1/objects/big_note/records?where=${encodeURIComponent(slowWhere('body'))}`,
          alice,
        );
        expect(await waitForRunningBigNoteQueries(t, 1)).toBe(1);

        const busy = await t.http.get('/api/v1/objects/big_note/records').query({ limit: 1 }).set(bearer(alice));
        expect(busy.status).toBe(503);
        expect(errorOf(busy).code).toBe('database_busy');
        expect(Number(busy.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        await t.http.get('/health').expect(200);
        expect(await runningBigNoteQueries(t)).toBe(1);

        holder.destroy();
        await holder.settled;
        expect(await waitForRunningBigNoteQueries(t, 0)).toBe(0);
        // Free again once the statement ended.
        await t.http.get('/api/v1/objects/big_note/records').query({ limit: 1, fields: 'id' }).set(bearer(alice)).expect(200);
      });
    });

    describe('one member cannot starve another: a key holds at most its share of each data pool', () => {
      /** Abandoned slow searches of one member: far more than the pool's 4 connections. */
      const SLOW = 22;
      /** Alice's share: half of DATA_POOL_SIZE (DATA_POOL_KEY_SHARE's default). */
      const SHARE = 2;
      let t: TestApp;
      let baseUrl: string;
      let alice: string;
      let bob: string;

      beforeAll(async () => {
        // Statements end only when their clients leave; waits for a connection end after DB_ACQUIRE_TIMEOUT_MS (2 s).
        t = await startTestApp({ env: { QUERY_TIMEOUT_MS: '600000', TOOL_TIMEOUT_MS: '600000', DATA_POOL_SIZE: '4' } });
        baseUrl = await listen(t);
        [alice, bob] = [await memberSecret(t, 'alice'), await memberSecret(t, 'bob')];
        await seedBigNotes(t, 1000);
        await createObject(t, 'memo', [{ name: 'title', label: 'Title', type: 'text' }], { label: 'memo' });
        await t.http.post('/api/v1/objects/memo/records').set(bearer(bob)).send({ title: 'Quarterly review' }).expect(201);
      });
      afterAll(() => t.close());

      /** Waits for the answers of all but `running` of `requests`; those answered. */
      async function answeredAllBut(requests: Abandonable[], running: number): Promise<Array<{ status: number; body: string }>> {
        const answers = () => requests.flatMap((request) => (request.answer ? [request.answer] : []));
        await pollUntil(
          () => Promise.resolve(answers().length),
          (n) => n >= requests.length - running,
        );
        return answers();
      }

      async function abandon(requests: Abandonable[]): Promise<void> {
        for (const request of requests) request.destroy();
        await Promise.all(requests.map((request) => request.settled));
        expect(await waitForRunningBigNoteQueries(t, 0)).toBe(0);
      }

      it("answers another member's records page at once while one member's slow searches queue or get 503 database_busy", async () => {
        const where = encodeURIComponent(slowWhere('body'));
        const slow = Array.from({ length: SLOW }, () =>
          abandonableGet(baseUrl, `/api/v1/objects/big_note/records?where=${where}`, alice),
        );
        // Alice's searches run on her share of the pool, no more.
        expect(await waitForRunningBigNoteQueries(t, SHARE)).toBe(SHARE);

        const started = performance.now();
        const memos = await t.http.get('/api/v1/objects/memo/records').set(bearer(bob));
        const tookMs = performance.now() - started;
        expect(memos.status).toBe(200);
        expect(bodyOf<{ total: number }>(memos).total).toBe(1);
        expect(tookMs).toBeLessThan(1000);

        // Her excess waited for a connection of her own, then got her own 503; the searches she holds still run.
        const answers = await answeredAllBut(slow, SHARE);
        expect(answers).toHaveLength(SLOW - SHARE);
        for (const answer of answers) {
          expect(answer.status).toBe(503);
          expect((JSON.parse(answer.body) as { code: string }).code).toBe('database_busy');
        }
        expect(await runningBigNoteQueries(t)).toBe(SHARE);

        await abandon(slow);
        await t.http.get('/api/v1/objects/big_note/records').query({ limit: 1, fields: 'id' }).set(bearer(alice)).expect(200);
      });

      it("answers another member's data tool call at once while one member's slow tool calls hold her share of the reader pool", async () => {
        const slowCall = {
          arguments: { objectName: 'big_note', where: JSON.parse(slowWhere('body')) as unknown, fields: ['id'] },
        };
        const slow = Array.from({ length: SLOW }, () =>
          abandonableRequest(baseUrl, '/api/v1/ai/tools/query_records/execute', alice, slowCall),
        );
        expect(await waitForRunningBigNoteQueries(t, SHARE)).toBe(SHARE);

        const started = performance.now();
        const memos = await t.http
          .post('/api/v1/ai/tools/query_records/execute')
          .set(bearer(bob))
          .send({ arguments: { objectName: 'memo' } });
        const tookMs = performance.now() - started;
        expect(memos.status).toBe(200);
        expect(bodyOf<ExecuteToolResponse>(memos)).toMatchObject({ isError: false, result: { total: 1 } });
        expect(tookMs).toBeLessThan(1000);

        const answers = await answeredAllBut(slow, SHARE);
        expect(answers).toHaveLength(SLOW - SHARE);
        for (const answer of answers) {
          expect(JSON.parse(answer.body)).toMatchObject({ isError: true, result: { error: { code: 'database_busy' } } });
        }
        expect(await runningBigNoteQueries(t)).toBe(SHARE);

        await abandon(slow);
      });
    });

    describe('/health on its own connection', () => {
      let t: TestApp;
      beforeAll(async () => {
        t = await startTestApp();
      });
      afterAll(() => t.close());

      it('answers 503 while a migration of this build is missing from the database, and 200 once it is back', async () => {
        await t.http.get('/health').expect(200);
        const [last] = await t.sql<{ id: number; name: string; executed_at: Date }>(
          'select id, name, executed_at from mikro_orm_migrations order by id desc limit 1',
        );
        await t.sql('delete from mikro_orm_migrations where id = $1', [last.id]);
        const res = await t.http.get('/health').expect(503);
        expect(errorOf(res).code).toBe('database_unavailable');
        await t.sql('insert into mikro_orm_migrations (id, name, executed_at) values ($1, $2, $3)', [
          last.id,
          last.name,
          last.executed_at,
        ]);
        await t.http.get('/health').expect(200);
      });
    });

    describe('pattern operands', () => {
      let t: TestApp;
      let alice: string;

      beforeAll(async () => {
        t = await startTestApp();
        alice = await memberSecret(t, 'alice');
        await createObject(t, 'note', [{ name: 'body', label: 'Body', type: 'textarea' }], { label: 'note' });
      });
      afterAll(() => t.close());

      it.each(['$contains', '$notContains', '$startsWith', '$endsWith'])(
        'refuses a %s operand over 200 characters with 400 naming the field and the limit',
        async (operator) => {
          const where = JSON.stringify({ body: { [operator]: 'x'.repeat(201) } });
          const res = await t.http.get('/api/v1/objects/note/records').query({ where }).set(bearer(alice)).expect(400);
          expect(errorOf(res)).toMatchObject({
            code: 'invalid_value',
            details: { field: 'body', operator, maxLength: 200 },
          });
          expect(errorOf(res).error).toContain('"body"');
          expect(errorOf(res).error).toContain('200 characters');
          await t.http
            .get('/api/v1/objects/note/records')
            .query({ where: JSON.stringify({ body: { [operator]: 'x'.repeat(200) } }) })
            .set(bearer(alice))
            .expect(200);
        },
      );

      it('refuses it in aggregates and in the data tools too', async () => {
        const where = { body: { $contains: 'x'.repeat(1001) } };
        const aggregate = await t.http
          .post('/api/v1/objects/note/aggregate')
          .set(bearer(alice))
          .send({ where, aggregations: [{ function: 'count', alias: 'n' }] })
          .expect(400);
        expect(errorOf(aggregate)).toMatchObject({ code: 'invalid_value', details: { field: 'body', maxLength: 200 } });
        const tool = await t.http
          .post('/api/v1/ai/tools/query_records/execute')
          .set(bearer(alice))
          .send({ arguments: { objectName: 'note', where } })
          .expect(200);
        expect(bodyOf<ExecuteToolResponse>(tool)).toMatchObject({
          isError: true,
          result: { error: { code: 'invalid_value', details: { field: 'body', maxLength: 200 } } },
        });
      });
    });
  });

  describe('long values in indexed or unique text fields (finding 5)', () => {
    let t: TestApp;
    let alice: string;
    /** Random hex: Postgres cannot compress it into an index entry. */
    const incompressible = (length: number) =>
      randomBytes(Math.ceil(length / 2))
        .toString('hex')
        .slice(0, length);

    beforeAll(async () => {
      t = await startTestApp();
      alice = await memberSecret(t, 'alice');
      await createObject(
        t,
        'customer',
        [
          { name: 'code', label: 'Code', type: 'text', unique: true },
          { name: 'city', label: 'City', type: 'text', indexed: true },
          { name: 'notes', label: 'Notes', type: 'textarea' },
        ],
        { label: 'customer' },
      );
    });
    afterAll(() => t.close());

    it('refuses a long value of a unique field on create with 400 naming the field and the limit', async () => {
      const res = await t.http
        .post('/api/v1/objects/customer/records')
        .set(bearer(alice))
        .send({ code: incompressible(3000) })
        .expect(400);
      expect(errorOf(res)).toMatchObject({ code: 'invalid_value', details: { field: 'code', maxBytes: MAX_INDEXED_TEXT_BYTES } });
      expect(errorOf(res).error).toContain('"code"');
      expect(errorOf(res).error).toContain(`${MAX_INDEXED_TEXT_BYTES} bytes`);
    });

    it('refuses a long value of an indexed field on update, and keeps values at the limit', async () => {
      const created = await t.http
        .post('/api/v1/objects/customer/records')
        .set(bearer(alice))
        .send({ code: incompressible(MAX_INDEXED_TEXT_BYTES), city: 'Lyon' })
        .expect(201);
      const id = bodyOf<{ id: string }>(created).id;
      const res = await t.http
        .patch(`/api/v1/objects/customer/records/${id}`)
        .set(bearer(alice))
        .send({ city: incompressible(3000) })
        .expect(400);
      expect(errorOf(res)).toMatchObject({ code: 'invalid_value', details: { field: 'city', maxBytes: MAX_INDEXED_TEXT_BYTES } });
      const stored = await t.http.get(`/api/v1/objects/customer/records/${id}`).set(bearer(alice)).expect(200);
      expect(bodyOf<{ city: string }>(stored).city).toBe('Lyon');
    });

    it.each([['indexed'], ['unique']])(
      'refuses to make a field holding long values %s, with 400 naming the field and the limit',
      async (flag) => {
        await t.http
          .post('/api/v1/objects/customer/records')
          .set(bearer(alice))
          .send({ notes: incompressible(3000) })
          .expect(201);
        const res = await t.http
          .patch('/api/v1/objects/customer/fields/notes')
          .set(bearer(t.adminKey))
          .send({ [flag]: true })
          .expect(400);
        expect(errorOf(res)).toMatchObject({
          code: 'field_values_too_long',
          details: { field: 'notes', maxBytes: MAX_INDEXED_TEXT_BYTES },
        });
        const object = await t.http.get('/api/v1/objects/customer').set(bearer(t.adminKey)).expect(200);
        const notes = bodyOf<{ fields: Array<{ name: string; indexed: boolean; unique: boolean }> }>(object).fields.find(
          (f) => f.name === 'notes',
        );
        expect(notes).toMatchObject({ indexed: false, unique: false });
      },
    );
  });

  describe('sums and averages beyond 2^53 stay exact (finding 12)', () => {
    let t: TestApp;
    let alice: string;
    const MAX_SAFE = Number.MAX_SAFE_INTEGER; // 9007199254740991
    const aggregations = [
      { function: 'count', alias: 'n' },
      { function: 'sum', field: 'units', alias: 'units_sum' },
      { function: 'avg', field: 'units', alias: 'units_avg' },
      { function: 'sum', field: 'amount', alias: 'amount_sum' },
      { function: 'avg', field: 'amount', alias: 'amount_avg' },
      { function: 'sum', field: 'weight', alias: 'weight_sum' },
      { function: 'avg', field: 'weight', alias: 'weight_avg' },
    ];
    const expected = [
      {
        kind: 'big',
        n: 2,
        units_sum: '18014398509481982',
        units_avg: MAX_SAFE,
        amount_sum: '19999999999999996',
        amount_avg: '9999999999999998',
        weight_sum: `2${'0'.repeat(308)}`,
        weight_avg: `1${'0'.repeat(308)}`,
      },
      {
        kind: 'huge',
        n: 2,
        units_sum: '9223372036854775810',
        units_avg: '4611686018427387905',
        amount_sum: null,
        amount_avg: null,
        weight_sum: null,
        weight_avg: null,
      },
      {
        kind: 'small',
        n: 2,
        units_sum: 5,
        units_avg: 2.5,
        amount_sum: 10.5,
        amount_avg: 5.25,
        weight_sum: 0.3,
        weight_avg: 0.15,
      },
    ];

    beforeAll(async () => {
      t = await startTestApp();
      alice = await memberSecret(t, 'alice');
      await createObject(
        t,
        'ledger',
        [
          { name: 'kind', label: 'Kind', type: 'select', options: ['big', 'huge', 'small'] },
          { name: 'units', label: 'Units', type: 'integer' },
          { name: 'amount', label: 'Amount', type: 'currency' },
          { name: 'weight', label: 'Weight', type: 'number' },
        ],
        { label: 'ledger' },
      );
      for (const record of [
        { kind: 'big', units: MAX_SAFE, amount: 9999999999999998, weight: 1e308 },
        { kind: 'big', units: MAX_SAFE, amount: 9999999999999998, weight: 1e308 },
        { kind: 'small', units: 2, amount: 10, weight: 0.1 },
        { kind: 'small', units: 3, amount: 0.5, weight: 0.2 },
      ]) {
        await t.http.post('/api/v1/objects/ledger/records').set(bearer(alice)).send(record).expect(201);
      }
      // Integers beyond 2^53 cannot arrive as JSON numbers; a bigint column can hold them all the same.
      await t.sql(`insert into data.ledger (kind, units) values ('huge', 4611686018427387904), ('huge', 4611686018427387906)`);
    });
    afterAll(() => t.close());

    it('answers the aggregate API with exact decimal strings beyond 2^53 and numbers below', async () => {
      const res = await t.http
        .post('/api/v1/objects/ledger/aggregate')
        .set(bearer(alice))
        .send({ groupBy: ['kind'], aggregations })
        .expect(200);
      expect(bodyOf<AggregateResponse>(res).rows).toEqual(expected);
    });

    it('answers aggregate_data, the same engine, alike', async () => {
      const res = await t.http
        .post('/api/v1/ai/tools/aggregate_data/execute')
        .set(bearer(alice))
        .send({ arguments: { objectName: 'ledger', groupBy: ['kind'], aggregations } })
        .expect(200);
      expect(bodyOf<ExecuteToolResponse>(res)).toMatchObject({ isError: false, result: { count: 3, rows: expected } });
    });
  });

  describe('the ORM pool waits at most ORM_ACQUIRE_TIMEOUT_MS for a connection (finding: no acquire timeout on the ORM pool)', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await startTestApp({ env: { ORM_ACQUIRE_TIMEOUT_MS: '300', CHAT_WORKER_ENABLED: 'false' } });
    });
    afterAll(() => t.close());

    it('answers 503 database_busy with Retry-After, instead of hanging, while every ORM connection stays taken', async () => {
      const fresh = await memberSecret(t, 'fresh');
      const pool = await t.app.get(EntityManager).getConnection().getNativeClient();
      const held: PoolClient[] = [];
      try {
        // Every connection of the ORM's pool (API keys, metadata, chats), taken and kept.
        const free = ORM_POOL_SIZE - (pool.totalCount - pool.idleCount);
        while (held.length < free) held.push(await pool.connect());
        // A key this replica has not verified yet is looked up through the ORM; listing keys reads them through it.
        for (const [path, key] of [
          ['/api/v1/objects', fresh],
          ['/api/v1/api-keys', t.adminKey],
        ]) {
          const res = await t.http.get(path).set(bearer(key)).timeout(15_000);
          expect([path, res.status, errorOf(res).code]).toEqual([path, 503, 'database_busy']);
          expect(res.headers['retry-after']).toBe('1');
          expect(errorOf(res).details).toEqual({ waitedMs: 300 });
        }
      } finally {
        for (const client of held) client.release();
      }
      await t.http.get('/api/v1/objects').set(bearer(fresh)).expect(200);
      await t.http.get('/api/v1/api-keys').set(bearer(t.adminKey)).expect(200);
    });
  });
});
