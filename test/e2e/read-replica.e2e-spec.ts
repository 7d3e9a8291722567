import { setTimeout as sleep } from 'node:timers/promises';
import { DATA_POOL_APPLICATION_NAMES } from '../../src/database/data-pool';
import type { ReadinessResponse } from '../../src/health/health.dto';
import type { ExecuteToolResponse } from '../../src/tools/tools.dto';
import { Scrape } from '../support/prometheus';
import { bodyOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { startStreamingReplica, StreamingReplica } from '../support/streaming-replica';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey, createObject, fieldSpec } from '../support/fixtures';

/** Small enough that forcing lag takes a couple of seconds; the checks run every 375 ms with it. */
const MAX_LAG_MS = 1_500;

type Server = 'primary' | 'replica';
/** Statements of the data engine's pools that began on each server while a request ran. */
type Served = Record<Server, number>;

/**
 * The data engine's reads on a real streaming replica: a primary and a hot standby started from the
 * embedded binaries for this file alone (the shared test server's per-file databases would all be
 * replicated, and its replay could not be paused for one file). Which server ran a request's
 * statements is read from pg_stat_activity on each: the data engine's pools have names of their own there.
 */
describe('reads on a streaming read replica (DATABASE_READ_URL)', () => {
  let pair: StreamingReplica;
  let t: TestApp;
  /** A member key that only reads. */
  let reader: string;
  /** A member key that writes, then reads. */
  let writer: string;
  let id: string;

  const records = (query = '') => `/api/v1/objects/gizmo/records${query}`;

  /** Each running server's clock now (a stopped replica has none). */
  async function clocks(): Promise<Partial<Record<Server, string>>> {
    const read = async (server: Server) =>
      (await pair.sql<{ now: string }>(server, 'select clock_timestamp()::text as now').catch(() => undefined))?.[0].now;
    return { primary: await read('primary'), replica: await read('replica') };
  }

  /**
   * Runs `request`, and counts the data engine's statements that began on each server meanwhile, per
   * pool (`data`, `readers`); a stopped replica counts none.
   */
  async function servedBy(request: () => Promise<unknown>): Promise<Served> {
    const since = await clocks();
    await request();
    return { primary: await statements('primary', since), replica: await statements('replica', since) };
  }

  async function statements(server: Server, since: Partial<Record<Server, string>>, pool?: 'data' | 'readers'): Promise<number> {
    if (since[server] === undefined) return 0;
    // The requests' pools, not the server's own background lookups (`system`).
    const { data, readers } = DATA_POOL_APPLICATION_NAMES[server];
    const names = pool ? [DATA_POOL_APPLICATION_NAMES[server][pool]] : [data, readers];
    const [{ n }] = await pair.sql<{ n: number }>(
      server,
      'select count(*)::int as n from pg_stat_activity where application_name = any($1) and query_start >= $2::timestamptz',
      [names, since[server]],
    );
    return n;
  }

  /**
   * Repeats `request` until the replica serves it: an app replica reads on the primary at first (the
   * marks of writes other app replicas announced before it listened are unknown to it), and a key
   * that wrote reads there for a while after.
   */
  async function untilTheReplicaServes(request: () => Promise<unknown>): Promise<void> {
    const deadline = Date.now() + 20_000;
    while ((await servedBy(request)).replica === 0) {
      if (Date.now() > deadline) throw new Error('the read replica never served the request');
      await sleep(100);
    }
  }

  async function ready(): Promise<ReadinessResponse> {
    return bodyOf<ReadinessResponse>(await t.http.get('/health/ready').expect(200));
  }

  async function readReplicaBecomes(state: ReadinessResponse['checks']['readReplica'], timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await ready()).checks.readReplica !== state) {
      if (Date.now() > deadline) throw new Error(`the read replica did not become ${state}: ${JSON.stringify(await ready())}`);
      await sleep(50);
    }
  }

  async function scrape(): Promise<Scrape> {
    return new Scrape((await t.http.get('/metrics').expect(200)).text);
  }

  async function getAs(key: string, headers: Record<string, string> = {}): Promise<RecordBody> {
    return bodyOf<RecordBody>(
      await t.http
        .get(records(`/${id}`))
        .set(bearer(key))
        .set(headers)
        .expect(200),
    );
  }

  beforeAll(async () => {
    pair = await startStreamingReplica();
    await pair.sql('primary', 'create database app');
    await pair.caughtUp();
    t = await startTestApp({
      database: { url: pair.primary.urlFor('app'), drop: () => Promise.resolve() },
      env: { DATABASE_READ_URL: pair.replica.urlFor('app'), READ_MAX_LAG_MS: String(MAX_LAG_MS) },
    });
    await createObject(t, 'gizmo', [
      fieldSpec('name', 'text', { required: true }),
      fieldSpec('size', 'integer'),
      fieldSpec('kind', 'select', { options: ['small', 'large'] }),
    ]);
    for (let i = 0; i < 6; i++) {
      const res = await t.http
        .post(records())
        .set(bearer(t.adminKey))
        .send({ name: `gizmo ${i}`, size: i, kind: i % 2 ? 'large' : 'small' })
        .expect(201);
      id ??= idOf(res);
    }
    reader = (await createApiKey(t, { name: 'reader', role: 'member' })).secret;
    writer = (await createApiKey(t, { name: 'writer', role: 'member' })).secret;
    await pair.caughtUp();
    await readReplicaBecomes('ok');
    await untilTheReplicaServes(() => getAs(reader));
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await pair?.stop();
  });

  it('serves pages, gets, value counts, aggregates, exports and the data tools from the replica, none from the primary', async () => {
    const page = await servedBy(async () => {
      const body = bodyOf<RecordPage>(
        await t.http
          .get(records())
          .query({ orderBy: JSON.stringify([{ field: 'size' }]) })
          .set(bearer(reader))
          .expect(200),
      );
      expect(body.records.map((r) => r.name)).toEqual(['gizmo 0', 'gizmo 1', 'gizmo 2', 'gizmo 3', 'gizmo 4', 'gizmo 5']);
    });
    const get = await servedBy(async () => expect((await getAs(reader)).name).toBe('gizmo 0'));
    const values = await servedBy(() => t.http.get('/api/v1/objects/gizmo/fields/kind/values').set(bearer(reader)).expect(200));
    const aggregate = await servedBy(async () => {
      const res = await t.http
        .post('/api/v1/objects/gizmo/aggregate')
        .set(bearer(reader))
        .send({ aggregations: [{ function: 'sum', field: 'size', alias: 'total' }] })
        .expect(200);
      expect(res.body).toEqual({ rows: [{ total: 15 }] });
    });
    const exported = await servedBy(async () => {
      const res = await t.http.get(records('/export.csv')).set(bearer(reader)).expect(200);
      expect(res.text.trim().split('\n')).toHaveLength(7);
    });
    const since = await clocks();
    const tool = await servedBy(async () => {
      const res = await t.http
        .post('/api/v1/ai/tools/query_records/execute')
        .set(bearer(reader))
        .send({ arguments: { objectName: 'gizmo', where: { kind: 'large' } } })
        .expect(200);
      expect(bodyOf<ExecuteToolResponse>(res).isError).toBe(false);
    });

    for (const served of [page, get, values, aggregate, exported, tool]) {
      expect(served.primary).toBe(0);
      expect(served.replica).toBeGreaterThan(0);
    }
    // The data tools run on the replica's reader connections (SELECT-only role, read-only).
    expect(await statements('replica', since, 'readers')).toBeGreaterThan(0);
  });

  it('reads a key its own writes on the primary right after it writes; other keys keep reading the replica', async () => {
    let etag = '';
    const write = await servedBy(async () => {
      const res = await t.http
        .patch(records(`/${id}`))
        .set(bearer(writer))
        .send({ size: 40 })
        .expect(200);
      etag = String(res.headers.etag);
    });
    expect(write.primary).toBeGreaterThan(0);

    const own = await servedBy(async () => expect((await getAs(writer)).size).toBe(40));
    expect(own).toEqual({ primary: 1, replica: 0 });
    // Any read of that key, not only of the record it wrote.
    const ownPage = await servedBy(() => t.http.get(records()).set(bearer(writer)).expect(200));
    expect(ownPage).toEqual({ primary: 1, replica: 0 });

    const other = await servedBy(() => getAs(reader));
    expect(other).toEqual({ primary: 0, replica: 1 });
    // A client revalidating a version it holds reads the primary, whichever key it is.
    const revalidated = await servedBy(async () => expect((await getAs(reader, { 'If-None-Match': etag })).size).toBe(40));
    expect(revalidated).toEqual({ primary: 1, replica: 0 });
  });

  it('sends the next read of a key that wrote to the primary on the other app replicas too', async () => {
    const other = await startTestApp({
      database: t.database,
      env: { DATABASE_READ_URL: pair.replica.urlFor('app'), READ_MAX_LAG_MS: String(MAX_LAG_MS) },
    });
    try {
      const otherGet = async (key: string) =>
        bodyOf<RecordBody>(
          await other.http
            .get(records(`/${id}`))
            .set(bearer(key))
            .expect(200),
        );
      await untilTheReplicaServes(() => otherGet(reader));
      await t.http
        .patch(records(`/${id}`))
        .set(bearer(writer))
        .send({ size: 39 })
        .expect(200);
      const own = await servedBy(async () => expect((await otherGet(writer)).size).toBe(39));
      expect(own).toEqual({ primary: 1, replica: 0 });
      expect(await servedBy(() => otherGet(reader))).toEqual({ primary: 0, replica: 1 });
    } finally {
      await other.close();
    }
  });

  it('reads its own write while the replica has not replayed it, then goes back to the replica', async () => {
    await pair.sql('replica', 'select pg_wal_replay_pause()');
    try {
      await t.http
        .patch(records(`/${id}`))
        .set(bearer(writer))
        .send({ size: 41 })
        .expect(200);
      // The replica does not have it, whatever the app thinks of its lag yet.
      const [stale] = await pair.sql<{ size: number }>('replica', 'select size from data.gizmo where id = $1', [id], 'app');
      expect(stale.size).not.toBe(41);
      expect((await getAs(writer)).size).toBe(41);
    } finally {
      await pair.sql('replica', 'select pg_wal_replay_resume()');
    }
    await pair.caughtUp();
    // Once the window of its write is over, the writer's reads go to the replica again.
    await untilTheReplicaServes(() => getAs(writer));
  });

  it('falls back to the primary while the replica lags more than READ_MAX_LAG_MS, and comes back once it caught up', async () => {
    const before = await scrape();
    await pair.sql('replica', 'select pg_wal_replay_pause()');
    try {
      // A write the replica cannot replay: from now on, it falls behind.
      await t.http.post(records()).set(bearer(t.adminKey)).send({ name: 'late gizmo', size: 100 }).expect(201);
      await readReplicaBecomes('lagging');
      expect((await ready()).readReplicaLagMs).toBeGreaterThan(MAX_LAG_MS);

      const lagging = await servedBy(async () => {
        const body = bodyOf<RecordPage>(await t.http.get(records()).set(bearer(reader)).expect(200));
        expect(body.records.map((r) => r.name)).toContain('late gizmo');
      });
      expect(lagging).toEqual({ primary: 1, replica: 0 });
      const during = await scrape();
      expect(during.value('datacopilot_db_read_replica_lag_seconds')).toBeGreaterThan(MAX_LAG_MS / 1000);
      expect(during.value('datacopilot_db_read_fallbacks_total', { reason: 'lagging' })).toBeGreaterThan(
        before.value('datacopilot_db_read_fallbacks_total', { reason: 'lagging' }),
      );
    } finally {
      await pair.sql('replica', 'select pg_wal_replay_resume()');
    }
    await readReplicaBecomes('ok');
    expect((await ready()).readReplicaLagMs).toBeLessThanOrEqual(MAX_LAG_MS);
    // One read may still end on the primary too: the replica replaying its backlog cancels a query that conflicts
    // with it (the app then reads on the primary), or the app's background work runs a statement there meanwhile.
    // Asked a few times, a read is the replica's alone.
    let caughtUp: Served | undefined;
    for (let attempt = 0; attempt < 5 && !(caughtUp?.primary === 0 && caughtUp.replica === 1); attempt++) {
      if (attempt) await sleep(200);
      caughtUp = await servedBy(async () => {
        const body = bodyOf<RecordPage>(await t.http.get(records()).set(bearer(reader)).expect(200));
        expect(body.records.map((r) => r.name)).toContain('late gizmo');
      });
    }
    expect(caughtUp).toEqual({ primary: 0, replica: 1 });
  });

  it('keeps serving every read from the primary when the replica stops, and stays ready', async () => {
    await pair.replica.stop();
    const requests = [
      () => t.http.get(records()).set(bearer(reader)),
      () => t.http.get(records(`/${id}`)).set(bearer(reader)),
      () => t.http.get('/api/v1/objects/gizmo/fields/kind/values').set(bearer(reader)),
      () =>
        t.http
          .post('/api/v1/objects/gizmo/aggregate')
          .set(bearer(reader))
          .send({ aggregations: [{ function: 'count', alias: 'n' }] }),
      () => t.http.get(records('/export.csv')).set(bearer(reader)),
      () =>
        t.http
          .post('/api/v1/ai/tools/query_records/execute')
          .set(bearer(reader))
          .send({ arguments: { objectName: 'gizmo' } }),
    ];
    for (const request of requests) {
      let status = 0;
      const served = await servedBy(async () => {
        const res = await request();
        status = res.status;
        expect((res.body as Partial<ExecuteToolResponse>).isError).not.toBe(true);
      });
      expect(status).toBe(200);
      expect(served.primary).toBeGreaterThan(0);
    }
    await readReplicaBecomes('down');
    const body = await ready();
    expect(body.status).toBe('ok');
    expect(body.readReplicaLagMs).toBeNull();
    const metrics = await scrape();
    expect(Number.isNaN(metrics.value('datacopilot_db_read_replica_lag_seconds'))).toBe(true);
    expect(metrics.value('datacopilot_db_read_fallbacks_total', { reason: 'down' })).toBeGreaterThan(0);
  });
});
