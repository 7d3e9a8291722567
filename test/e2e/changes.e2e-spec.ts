import http from 'node:http';
import { Client } from 'pg';
import { ChangesService } from '../../src/changes/changes.service';
import type { ChangeResponse, ChangesResponse } from '../../src/changes/changes.dto';
import { DataPool } from '../../src/database/data-pool';
import { DataService } from '../../src/data/data.service';
import { SYSTEM_CALLER } from '../../src/governance/access.service';
import { eventually, listen, SseClient } from '../support/chat-helpers';
import { bodyOf, errorOf, idOf } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';

describe('the change feed: GET /api/v1/objects/:name/changes and /changes/stream', () => {
  let t: TestApp;
  let url: string;
  let member: string;
  let memberId: string;

  const changes = async (query: string, key = member) =>
    bodyOf<ChangesResponse>(await t.http.get(`/api/v1/objects/item/changes${query}`).set(bearer(key)).expect(200));
  const latest = async () => (await changes('?limit=1000')).nextCursor;
  const create = async (record: Record<string, unknown>, key = member) =>
    idOf(await t.http.post('/api/v1/objects/item/records').set(bearer(key)).send(record).expect(201));
  const summary = (list: ChangeResponse[]) => list.map((c) => [c.op, c.id, c.changedFields]);

  beforeAll(async () => {
    // One key's burst of writes waits for its share of the data pool. A slow machine must not turn that
    // queue into 503s the deadlock test would count.
    t = await startTestApp({ env: { DB_ACQUIRE_TIMEOUT_MS: '30000' } });
    url = await listen(t);
    await createObject(t, 'item', [
      fieldSpec('sku', 'text', { label: 'SKU', required: true, unique: true }),
      fieldSpec('qty', 'integer', { label: 'Quantity' }),
      fieldSpec('owner', 'text'),
      fieldSpec('cost', 'number'),
    ]);
    ({ secret: member, id: memberId } = await createApiKey(t, { name: 'grid', role: 'member' }));
  });
  afterAll(() => t.close());

  it('reports REST creates, updates and deletes in order, with the fields each set and the record after it', async () => {
    const from = await latest();
    const id = await create({ sku: 'a-1', qty: 1 });
    await t.http.patch(`/api/v1/objects/item/records/${id}`).set(bearer(member)).send({ qty: 2, owner: 'ann' }).expect(200);
    await t.http.delete(`/api/v1/objects/item/records/${id}`).set(bearer(member)).expect(204);
    const page = await changes(`?after=${from}`);
    expect(summary(page.changes)).toEqual([
      ['create', id, ['id', 'created_at', 'updated_at', 'sku', 'qty', 'owner', 'cost']],
      ['update', id, ['qty', 'owner']],
      ['delete', id, []],
    ]);
    const [created, updated, deleted] = page.changes;
    expect(created.record).toMatchObject({ id, sku: 'a-1', qty: 1, owner: null });
    expect(updated.record).toMatchObject({ id, sku: 'a-1', qty: 2, owner: 'ann' });
    expect(deleted.record).toBeUndefined();
    for (const change of page.changes) {
      expect(change).toMatchObject({ object: 'item', actor: 'self' });
      expect(new Date(change.at).toISOString()).toBe(change.at);
    }
    const cursors = page.changes.map((c) => BigInt(c.cursor));
    expect([...cursors].sort((a, b) => (a < b ? -1 : 1))).toEqual(cursors);
    expect(page.nextCursor).toBe(page.changes[2].cursor);
    // Paging on from nextCursor: nothing more, the same cursor back.
    expect(await changes(`?after=${page.nextCursor}`)).toEqual({ changes: [], nextCursor: page.nextCursor });
    expect((await changes(`?after=${from}&limit=2`)).changes.map((c) => c.op)).toEqual(['create', 'update']);
  });

  it("names each change's writer to a member as self, other or system, and by keyId to admins only, in pages and the stream", async () => {
    const second = await createApiKey(t, { name: 'second', role: 'member' });
    const otherAdmin = await createApiKey(t, { name: 'second-admin', role: 'admin' });
    const from = await latest();
    const stream = await SseClient.open(url, `/api/v1/objects/item/changes/stream?after=${from}`, member);
    try {
      await create({ sku: 'by-me' });
      await create({ sku: 'by-second' }, second.secret);
      await create({ sku: 'by-admin' }, otherAdmin.secret);
      // What the seed does: the server writes as no key.
      await t.app.get(DataService).insert(SYSTEM_CALLER, 'item', { sku: 'by-server' });
      await stream.waitFor((events) => events.filter((e) => e.event === 'change').length === 4);
    } finally {
      stream.close();
    }
    const actors = (list: Array<Partial<ChangeResponse>>) =>
      list.map((c) => [(c.record as { sku: string }).sku, c.actor, c.keyId]);
    const asMember = [
      ['by-me', 'self', undefined],
      ['by-second', 'other', undefined],
      ['by-admin', 'other', undefined],
      ['by-server', 'system', undefined],
    ];
    expect(actors((await changes(`?after=${from}`)).changes)).toEqual(asMember);
    expect(actors(stream.of('change').map((e) => e.data as unknown as ChangeResponse))).toEqual(asMember);
    for (const change of [...(await changes(`?after=${from}`)).changes, ...stream.of('change').map((e) => e.data)]) {
      expect(change).not.toHaveProperty('keyId');
    }
    expect(actors((await changes(`?after=${from}`, second.secret)).changes)).toEqual([
      ['by-me', 'other', undefined],
      ['by-second', 'self', undefined],
      ['by-admin', 'other', undefined],
      ['by-server', 'system', undefined],
    ]);
    expect(actors((await changes(`?after=${from}`, otherAdmin.secret)).changes)).toEqual([
      ['by-me', 'other', memberId],
      ['by-second', 'other', second.id],
      ['by-admin', 'self', otherAdmin.id],
      ['by-server', 'system', 'system'],
    ]);
  });

  it('reports every operation of a batch, in operation order; a rolled-back batch reports nothing', async () => {
    const existing = await create({ sku: 'b-0', qty: 0 });
    const from = await latest();
    const res = await t.http
      .post('/api/v1/objects/item/records/batch')
      .set(bearer(member))
      .send({
        operations: [
          { op: 'create', record: { sku: 'b-1', qty: 1 } },
          { op: 'create', record: { sku: 'b-2', qty: 2 } },
          { op: 'update', id: existing, record: { cost: 9.5 } },
          { op: 'create', record: { sku: 'b-3' } },
          { op: 'delete', id: existing },
        ],
      })
      .expect(200);
    const ids = bodyOf<{ results: { id: string }[] }>(res).results.map((r) => r.id);
    const page = await changes(`?after=${from}`);
    expect(page.changes.map((c) => [c.op, c.id])).toEqual([
      ['create', ids[0]],
      ['create', ids[1]],
      ['update', existing],
      ['create', ids[3]],
      ['delete', existing],
    ]);
    expect(page.changes[2].changedFields).toEqual(['cost']);
    expect(page.changes[2].record).toMatchObject({ cost: 9.5 });

    await t.http
      .post('/api/v1/objects/item/records/batch')
      .set(bearer(member))
      .send({
        operations: [
          { op: 'create', record: { sku: 'b-4' } },
          { op: 'create', record: { sku: 'b-1' } },
        ],
      })
      .expect(409);
    expect((await changes(`?after=${page.nextCursor}`)).changes).toEqual([]);
  });

  it('numbers changes in commit order: a write does not wait behind an open transaction of its object, and the open one comes after it', async () => {
    const from = await latest();
    const data = t.app.get(DataService);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let appended!: () => void;
    const started = new Promise<void>((resolve) => (appended = resolve));
    // First to append, last to commit: a transaction that writes, then stays open.
    const first = t.app.get(DataPool).transaction(async (session) => {
      await data.insert(SYSTEM_CALLER, 'item', { sku: 'slow' }, { session });
      appended();
      await held;
    });
    await started;
    try {
      // A later write of the same object commits while the first is still open.
      await t.http.post('/api/v1/objects/item/records').set(bearer(member)).send({ sku: 'fast' }).expect(201);
      const during = await changes(`?after=${from}`);
      expect(during.changes.map((c) => c.record?.sku)).toEqual(['fast']);
      release();
      await first;
      // The change that committed last is after the cursor the reader already passed: nothing is skipped.
      const after = await changes(`?after=${during.nextCursor}`);
      expect(after.changes.map((c) => c.record?.sku)).toEqual(['slow']);
      expect(BigInt(after.changes[0].cursor)).toBeGreaterThan(BigInt(during.nextCursor));
    } finally {
      release();
      await first;
    }
  });

  it('never fills a gap below a cursor already passed, with many connections writing and transactions held open while later ones commit', async () => {
    const from = await latest();
    const stream = await SseClient.open(url, `/api/v1/objects/item/changes/stream?after=${from}`, member);
    const pool = t.app.get(DataPool);
    const data = t.app.get(DataService);
    const seeds = await Promise.all(Array.from({ length: 4 }, (_, i) => create({ sku: `g-seed-${i}`, qty: 0 })));
    let writing = true;
    // A reader paging small pages all along: every page must start after the cursor it last passed.
    const paged: ChangeResponse[] = [];
    const reader = (async () => {
      let cursor = from;
      while (writing) {
        const page = await changes(`?after=${cursor}&limit=7`);
        for (const change of page.changes) expect(BigInt(change.cursor)).toBeGreaterThan(BigInt(cursor));
        paged.push(...page.changes);
        cursor = page.nextCursor;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      for (;;) {
        const page = await changes(`?after=${cursor}&limit=7`);
        paged.push(...page.changes);
        if (!page.changes.length) return;
        cursor = page.nextCursor;
      }
    })();
    try {
      for (let round = 0; round < 3; round++) {
        // Transactions that write (creates, updates) and stay open ...
        const releases: Array<() => void> = [];
        const held = Array.from({ length: 3 }, (_, h) => {
          let appended!: () => void;
          const wrote = new Promise<void>((resolve) => (appended = resolve));
          const done = pool.transaction(async (session) => {
            await data.insert(SYSTEM_CALLER, 'item', { sku: `g-held-${round}-${h}`, qty: h }, { session });
            await data.update(SYSTEM_CALLER, 'item', seeds[h], { qty: round * 10 + h }, undefined, { session });
            appended();
            await new Promise<void>((resolve) => releases.push(resolve));
          });
          return { wrote, done };
        });
        await Promise.all(held.map((h) => h.wrote));
        // ... while later writes on other connections, single and batched, commit around them.
        const later = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            i % 4 === 3
              ? t.http
                  .post('/api/v1/objects/item/records/batch')
                  .set(bearer(member))
                  .send({ operations: [0, 1].map((k) => ({ op: 'create', record: { sku: `g-batch-${round}-${i}-${k}` } })) })
              : i % 4 === 2
                ? t.http.patch(`/api/v1/objects/item/records/${seeds[3]}`).set(bearer(member)).send({ qty: i })
                : t.http
                    .post('/api/v1/objects/item/records')
                    .set(bearer(member))
                    .send({ sku: `g-later-${round}-${i}` }),
          ),
        );
        expect(later.map((r) => r.status).filter((status) => status >= 300)).toEqual([]);
        // The held ones commit last, newest first, while the reader keeps paging.
        for (const release of releases.reverse()) {
          release();
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await Promise.all(held.map((h) => h.done));
      }
    } finally {
      writing = false;
      await reader;
    }
    const all = await changes(`?after=${from}&limit=1000`);
    // 4 seeds, and per round 3 held × 2 changes, 9 single writes and 3 batches of 2.
    expect(all.changes).toHaveLength(4 + 3 * (6 + 9 + 6));
    // What the reader saw while the writes happened is the whole feed: no change appeared below its cursor later.
    expect(paged.map((c) => c.cursor)).toEqual(all.changes.map((c) => c.cursor));
    await stream.waitFor((events) => events.filter((e) => e.event === 'change').length >= all.changes.length);
    stream.close();
    expect(stream.of('change').map((e) => e.id)).toEqual(all.changes.map((c) => c.cursor));
    // Each record's last change in the feed is its current state.
    const current = await t.sql<{ id: string; qty: number }>(`select id, qty::int as qty from data.item where id = any($1)`, [
      seeds,
    ]);
    for (const row of current) expect(all.changes.filter((c) => c.id === row.id).at(-1)!.record).toMatchObject({ qty: row.qty });
  });

  it('streams live changes with id: = cursor and resumes from Last-Event-ID without loss or repeats', async () => {
    const stream = await SseClient.open(url, '/api/v1/objects/item/changes/stream', member);
    try {
      await create({ sku: 's-1' });
      await create({ sku: 's-2' });
      await stream.waitFor((events) => events.filter((e) => e.event === 'change').length === 2);
    } finally {
      stream.close();
    }
    const first = stream.of('change');
    expect(first.map((e) => e.data.record && (e.data.record as { sku: string }).sku)).toEqual(['s-1', 's-2']);
    expect(first.map((e) => e.id)).toEqual(first.map((e) => e.data.cursor));

    // Written while no stream is open.
    await create({ sku: 's-3' });
    await create({ sku: 's-4' });
    const resumed = await SseClient.open(url, '/api/v1/objects/item/changes/stream', member, {
      'last-event-id': first[1].id!,
    });
    try {
      await resumed.waitFor((events) => events.filter((e) => e.event === 'change').length === 2);
      await create({ sku: 's-5' });
      await resumed.waitFor((events) => events.filter((e) => e.event === 'change').length === 3);
    } finally {
      resumed.close();
    }
    expect(resumed.of('change').map((e) => (e.data.record as { sku: string }).sku)).toEqual(['s-3', 's-4', 's-5']);

    // ?after= resumes the same way.
    const viaQuery = await SseClient.open(url, `/api/v1/objects/item/changes/stream?after=${first[0].id}`, member);
    try {
      await viaQuery.waitFor((events) => events.filter((e) => e.event === 'change').length === 4);
    } finally {
      viaQuery.close();
    }
    expect(viaQuery.of('change').map((e) => (e.data.record as { sku: string }).sku)).toEqual(['s-2', 's-3', 's-4', 's-5']);
  });

  it('opens the stream with a stream token (?token=) for EventSource clients', async () => {
    const { token } = bodyOf<{ token: string }>(
      await t.http.post('/api/v1/stream-tokens').set(bearer(member)).send({}).expect(201),
    );
    const from = await latest();
    const response = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http.get(`${url}/api/v1/objects/item/changes/stream?token=${token}&after=${from}`, resolve).on('error', reject),
    );
    try {
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toMatch(/^text\/event-stream/);
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      const id = await create({ sku: 'token-1' });
      await eventually(() => text.includes(id));
      expect(text).toMatch(/^event: change\nid: \d+\ndata: /m);
    } finally {
      response.destroy();
    }
  });

  it('reports each of many concurrent writes to one object once, in cursor order, without deadlocks', async () => {
    const ids = await Promise.all(Array.from({ length: 6 }, (_, i) => create({ sku: `c-${i}`, qty: 0 })));
    const from = await latest();
    const patches = Array.from({ length: 24 }, (_, i) =>
      t.http
        .patch(`/api/v1/objects/item/records/${ids[i % ids.length]}`)
        .set(bearer(member))
        .send({ qty: i + 1 }),
    );
    // Batches touch the same records in the opposite order to the single writes.
    const batches = [0, 1].map(() =>
      t.http
        .post('/api/v1/objects/item/records/batch')
        .set(bearer(member))
        .send({ operations: [...ids].reverse().map((id) => ({ op: 'update', id, record: { cost: 1 } })) }),
    );
    const statuses = (await Promise.all([...patches, ...batches])).map((r) => r.status);
    expect(statuses).toEqual([...patches.map(() => 200), 200, 200]);
    const page = await changes(`?after=${from}&limit=1000`);
    expect(page.changes).toHaveLength(24 + 2 * ids.length);
    expect(new Set(page.changes.map((c) => c.cursor)).size).toBe(page.changes.length);
    // Each record's last change in the feed is its current state.
    for (const id of ids) {
      const current = bodyOf<Record<string, unknown>>(
        await t.http.get(`/api/v1/objects/item/records/${id}`).set(bearer(member)).expect(200),
      );
      const last = page.changes.filter((c) => c.id === id).at(-1)!;
      expect(last.record).toMatchObject({ qty: current.qty, cost: current.cost });
    }
  });

  it('never deadlocks (no 500) when concurrent creates, updates, deletes and batches of one object collide on a unique value; every write is in the feed, in order', async () => {
    const from = await latest();
    const statuses: number[] = [];
    let written = 0;
    for (let round = 0; round < 4; round++) {
      const taken = `dup-${round}`;
      const ids = await Promise.all(Array.from({ length: 6 }, (_, i) => create({ sku: `d-${round}-${i}`, qty: 0 })));
      written += ids.length;
      const single = [
        ...Array.from({ length: 4 }, () => t.http.post('/api/v1/objects/item/records').set(bearer(member)).send({ sku: taken })),
        t.http.patch(`/api/v1/objects/item/records/${ids[0]}`).set(bearer(member)).send({ sku: taken }),
        t.http.patch(`/api/v1/objects/item/records/${ids[1]}`).set(bearer(member)).send({ qty: 5 }),
        t.http.delete(`/api/v1/objects/item/records/${ids[2]}`).set(bearer(member)),
      ];
      // Each batch holds its rows over many writes before the one that collides on the unique sku,
      // while single writes of that sku come in.
      const batches = [false, true, false].map((atomic, b) =>
        t.http
          .post('/api/v1/objects/item/records/batch')
          .set(bearer(member))
          .send({
            atomic,
            operations: [
              ...Array.from({ length: 60 }, (_, i) => ({ op: 'update', id: ids[3 + (i % 3)], record: { qty: b + i } })),
              { op: 'create', record: { sku: `d-${round}-b${b}` } },
              { op: 'create', record: { sku: taken } },
              ...(b === 2 ? [{ op: 'delete', id: ids[5] }] : []),
            ],
          }),
      );
      const responses = await Promise.all([...batches, ...single]);
      for (const res of responses) {
        statuses.push(res.status);
        if (res.status < 300) written += 1;
        const results = res.status === 200 ? bodyOf<{ results?: { status: number }[] }>(res).results : undefined;
        if (results) written += results.filter((r) => r.status < 300).length - 1;
      }
    }
    expect(statuses.filter((status) => ![200, 201, 204, 404, 409].includes(status))).toEqual([]);
    const page = await changes(`?after=${from}&limit=1000`);
    expect(page.changes).toHaveLength(written);
    const cursors = page.changes.map((c) => BigInt(c.cursor));
    expect([...cursors].sort((a, b) => (a < b ? -1 : 1))).toEqual(cursors);
    // Replaying the feed in cursor order gives the table as it is.
    const replayed = new Map<string, Record<string, unknown>>();
    for (const change of page.changes) {
      if (change.op === 'delete') replayed.delete(change.id);
      else replayed.set(change.id, change.record!);
    }
    const rows = await t.sql<{ id: string; sku: string; qty: number | null }>(
      `select id, sku, qty::int as qty from data.item where sku like 'd%' order by id`,
    );
    expect(rows.map((r) => [r.id, r.sku, r.qty])).toEqual(
      [...replayed.values()].map((r) => [r.id, r.sku, r.qty]).sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
  });

  it('answers a deadlock Postgres still detects with 503 database_busy and Retry-After, never 500', async () => {
    const id = await create({ sku: 'deadlock-1' });
    const other = new Client({ connectionString: t.database.url });
    await other.connect();
    try {
      await other.query('begin');
      await other.query(`insert into data.item (sku) values ('deadlock-2')`);
      // The PATCH locks its row, then waits for this transaction's uncommitted sku ...
      const patch = t.http
        .patch(`/api/v1/objects/item/records/${id}`)
        .set(bearer(member))
        .send({ sku: 'deadlock-2' })
        .then((r) => r);
      await eventually(
        async () => (await t.sql(`select 1 from pg_locks where locktype = 'transactionid' and not granted`)).length > 0,
      );
      // ... which then wants the PATCH's row: Postgres ends the PATCH, which waited first.
      const locked = other.query(`update data.item set qty = 1 where id = $1`, [id]);
      const res = await patch;
      await locked;
      expect(res.status).toBe(503);
      expect(errorOf(res).code).toBe('database_busy');
      expect(res.headers['retry-after']).toBe('1');
    } finally {
      await other.query('rollback');
      await other.end();
    }
  });

  it('delivers a write made on a second replica to a stream held on the first, in order', async () => {
    const b = await startTestApp({ database: t.database });
    const stream = await SseClient.open(url, '/api/v1/objects/item/changes/stream', member);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(
          idOf(
            await b.http
              .post('/api/v1/objects/item/records')
              .set(bearer(member))
              .send({ sku: `r-${i}` })
              .expect(201),
          ),
        );
      }
      await b.http.patch(`/api/v1/objects/item/records/${ids[0]}`).set(bearer(member)).send({ qty: 7 }).expect(200);
      await stream.waitFor((events) => events.filter((e) => e.event === 'change').length === 6);
      expect(stream.of('change').map((e) => [e.data.op, e.data.id])).toEqual([
        ...ids.map((id) => ['create', id]),
        ['update', ids[0]],
      ]);
    } finally {
      stream.close();
      await b.close();
    }
  });

  it('is 410 cursor_expired for a cursor older than the retention kept, on pages and streams', async () => {
    const from = await latest();
    await create({ sku: 'old-1' });
    await create({ sku: 'old-2' });
    const kept = await latest();
    // Everything written so far is past the feed's retention (7 days by default), not history's: nothing is deleted.
    expect((await t.app.get(ChangesService).prune(Date.now() + 7 * 86_400_000 + 60_000)).removed).toBe(0);
    const expired = await t.http.get(`/api/v1/objects/item/changes?after=${from}`).set(bearer(member)).expect(410);
    expect(errorOf(expired).code).toBe('cursor_expired');
    const streamed = await t.http
      .get('/api/v1/objects/item/changes/stream')
      .set(bearer(member))
      .set('last-event-id', from)
      .expect(410);
    expect(errorOf(streamed).code).toBe('cursor_expired');
    // The latest cursor is still good: nothing after it was removed.
    expect(await changes(`?after=${kept}`)).toEqual({ changes: [], nextCursor: kept });
    // Without a cursor: from the oldest change kept, and a cursor that is not expired.
    const fresh = await changes('');
    expect(fresh.changes).toEqual([]);
    await create({ sku: 'new-1' });
    expect((await changes(`?after=${fresh.nextCursor}`)).changes.map((c) => c.record?.sku)).toEqual(['new-1']);
  });

  it('follows metadata changes: a field dropped and re-added with another type, an object dropped and re-created', async () => {
    const define = () =>
      t.http
        .post('/api/v1/objects')
        .set(asAdmin(t))
        .send({ name: 'temp', label: 'Temp', fields: [{ name: 'code', label: 'Code', type: 'text' }] })
        .expect(201);
    await define();
    const page = (query: string) => t.http.get(`/api/v1/objects/temp/changes${query}`).set(bearer(member));
    await t.http.post('/api/v1/objects/temp/records').set(bearer(member)).send({ code: 'not a number' }).expect(201);
    await t.http.delete('/api/v1/objects/temp/fields/code').set(asAdmin(t)).expect(204);
    await t.http
      .post('/api/v1/objects/temp/fields')
      .set(asAdmin(t))
      .send({ name: 'code', label: 'Code', type: 'integer' })
      .expect(201);
    const kept = bodyOf<ChangesResponse>(await page('').expect(200));
    expect(kept.changes).toHaveLength(1);
    expect(kept.changes[0].record).toMatchObject({ code: null });
    expect(kept.changes[0].op).toBe('create');

    await t.http.delete('/api/v1/objects/temp').set(asAdmin(t)).expect(204);
    expect(errorOf(await page('').expect(404)).code).toBe('object_not_found');
    await define();
    expect(errorOf(await page('?after=0').expect(410)).code).toBe('cursor_expired');
    expect(bodyOf<ChangesResponse>(await page('').expect(200)).changes).toEqual([]);
  });

  it('refuses bad input with 4xx: cursor, limit, object, key', async () => {
    for (const query of ['?after=abc', '?after=-1', '?after=1.5', '?limit=0', '?limit=1001', '?limit=x', '?other=1']) {
      const res = await t.http.get(`/api/v1/objects/item/changes${query}`).set(bearer(member));
      expect([query, res.status]).toEqual([query, 400]);
      expect(errorOf(res).code).toBe('validation_failed');
    }
    const badHeader = await t.http.get('/api/v1/objects/item/changes/stream').set(bearer(member)).set('last-event-id', 'x');
    expect(badHeader.status).toBe(400);
    expect(errorOf(await t.http.get('/api/v1/objects/nope/changes').set(bearer(member)).expect(404)).code).toBe(
      'object_not_found',
    );
    await t.http.get('/api/v1/objects/nope/changes/stream').set(bearer(member)).expect(404);
    await t.http.get('/api/v1/objects/item/changes').expect(401);
    await t.http.get('/api/v1/objects/item/changes/stream').expect(401);
  });
});

describe('the change feed under access policies', () => {
  let t: TestApp;
  let url: string;
  let alice: string;

  beforeAll(async () => {
    t = await startTestApp();
    url = await listen(t);
    await createObject(t, 'deal', [fieldSpec('title', 'text'), fieldSpec('owner', 'text'), fieldSpec('amount', 'number')]);
    await createObject(t, 'secret', []);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'own-deals',
        objects: { deal: { read: true, create: true, update: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount'] } },
      })
      .expect(201);
    alice = (await createApiKey(t, { name: 'alice', role: 'member', subject: 'alice', policies: ['own-deals'] })).secret;
  });
  afterAll(() => t.close());

  it("never shows another owner's record or a hidden field, in pages or the stream", async () => {
    const stream = await SseClient.open(url, '/api/v1/objects/deal/changes/stream', alice);
    const write = (record: Record<string, unknown>) =>
      t.http.post('/api/v1/objects/deal/records').set(asAdmin(t)).send(record).expect(201).then(idOf);
    try {
      const mine = await write({ title: 'mine', owner: 'alice', amount: 100 });
      const theirs = await write({ title: 'theirs', owner: 'bob', amount: 200 });
      await t.http.patch(`/api/v1/objects/deal/records/${theirs}`).set(asAdmin(t)).send({ title: 'still theirs' }).expect(200);
      await t.http.patch(`/api/v1/objects/deal/records/${mine}`).set(asAdmin(t)).send({ amount: 150 }).expect(200);
      await t.http.patch(`/api/v1/objects/deal/records/${mine}`).set(asAdmin(t)).send({ title: 'mine too' }).expect(200);
      await t.http.delete(`/api/v1/objects/deal/records/${theirs}`).set(asAdmin(t)).expect(204);
      const last = await write({ title: 'mine at last', owner: 'alice' });

      const page = bodyOf<ChangesResponse>(await t.http.get('/api/v1/objects/deal/changes').set(bearer(alice)).expect(200));
      const expected = [
        ['create', mine, ['id', 'created_at', 'updated_at', 'title', 'owner']],
        ['update', mine, []],
        ['update', mine, ['title']],
        ['create', last, ['id', 'created_at', 'updated_at', 'title', 'owner']],
      ];
      expect(page.changes.map((c) => [c.op, c.id, c.changedFields])).toEqual(expected);
      for (const change of page.changes)
        expect(Object.keys(change.record!).sort()).toEqual(['created_at', 'id', 'owner', 'title', 'updated_at']);
      // The changes alice may not see still move her cursor: the next page starts after all of them.
      const admins = bodyOf<ChangesResponse>(await t.http.get('/api/v1/objects/deal/changes').set(asAdmin(t)).expect(200));
      expect(admins.changes).toHaveLength(7);
      expect(admins.changes[0].record).toMatchObject({ amount: 100 });
      expect(page.nextCursor).toBe(admins.nextCursor);

      await stream.waitFor((events) => events.filter((e) => e.event === 'change').length === 4);
      expect(stream.of('change').map((e) => [e.data.op, e.data.id, e.data.changedFields])).toEqual(expected);
      expect(JSON.stringify(stream.events)).not.toMatch(/theirs|amount/);
    } finally {
      stream.close();
    }
    expect(errorOf(await t.http.get('/api/v1/objects/secret/changes').set(bearer(alice)).expect(404)).code).toBe(
      'object_not_found',
    );
  });
});
