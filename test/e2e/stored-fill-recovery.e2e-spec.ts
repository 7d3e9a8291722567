import { Client } from 'pg';
import type { FieldResponse } from '../../src/metadata/metadata.dto';
import type { JobResponse } from '../../src/transfer/transfer.dto';
import { spawnApp, type AppProcess } from '../support/app-process';
import { eventually } from '../support/chat-helpers';
import { fieldSpec } from '../support/fixtures';
import { waitForAccessExclusive } from '../support/pg-query';
import { bodyOf, idOf } from '../support/responses';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { bearer, startTestApp, type TestApp } from '../support/test-app';

/**
 * A stored field's fill outlives the replica that started it, and the triggers that keep stored fields are
 * what this build generates, whatever the database held before it started. Replica A is a process of its
 * own (SIGKILL: no shutdown hook runs); B, in this process, starts on the same database.
 */
const ENV = { JOB_SUPERVISE_INTERVAL_S: '1', JOB_POLL_INTERVAL_MS: '500', RATE_LIMIT_PER_MINUTE: '0' };
/** The fill queue's heartbeat (10 s) runs out, the queue notices, B retries: with a loaded machine's slack. */
const TAKE_OVER_MS = 90_000;
const ACCOUNTS = 1_500;

type Http = TestApp['http'];

describe('stored field fills and triggers across replicas', () => {
  let database: TestDatabase;
  let a: AppProcess | undefined;
  let b: TestApp | undefined;
  let sql: Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    sql = new Client({ connectionString: database.url });
    await sql.connect();
  });
  afterEach(async () => {
    await a?.cleanUp();
    await b?.close();
    a = b = undefined;
  });
  afterAll(async () => {
    await sql.end();
    await database.drop();
  });

  const job = async (http: Http, adminKey: string, id: string) =>
    bodyOf<JobResponse>(await http.get(`/api/v1/jobs/${id}`).set(bearer(adminKey)).expect(200));
  /** Accounts whose stored column differs from the same total written by hand. */
  const wrongTotals = async () =>
    (
      await sql.query<{ id: string }>(
        `select a.id from data.acct a where a.open_total is distinct from
           (select coalesce(sum(o.amount) filter (where o.stage = 'open'), 0) from data.opp o where o.acct = a.id)`,
      )
    ).rows;

  it('finishes on another replica a fill whose replica was killed in the middle of it, under the same job', async () => {
    a = await spawnApp(database.url, ENV);
    const admin = bearer(a.adminKey);
    await a.http
      .post('/api/v1/objects')
      .set(admin)
      .send({ name: 'acct', label: 'Account', fields: [fieldSpec('name', 'text')] })
      .expect(201);
    await a.http
      .post('/api/v1/objects')
      .set(admin)
      .send({
        name: 'opp',
        label: 'Deal',
        fields: [
          fieldSpec('acct', 'lookup', { reference: 'acct' }),
          fieldSpec('amount', 'currency'),
          fieldSpec('stage', 'select', { options: ['open', 'won'] }),
        ],
      })
      .expect(201);
    await sql.query(`insert into data.acct (name) select 'acct ' || g from generate_series(1, ${ACCOUNTS}) g`);
    await sql.query(
      `insert into data.opp (acct, amount, stage) select a.id, (g * 7) % 300, (array['open','won'])[1 + g % 2]
       from data.acct a cross join generate_series(1, 2) g`,
    );

    // A lock on an account of the second batch (by id) holds the fill there: asked while the field's DDL holds
    // the table, so it is granted as that commits, before the job reaches it.
    const blocker = new Client({ connectionString: database.url });
    await blocker.connect();
    let fillJobId: string;
    try {
      await blocker.query('begin');
      const adding = a.http
        .post('/api/v1/objects/acct/fields')
        .set(admin)
        .send({
          name: 'open_total',
          label: 'Open total',
          type: 'rollup',
          relation: 'opp.acct',
          function: 'sum',
          field: 'amount',
          filter: { stage: 'open' },
          stored: true,
        })
        .then((res) => res);
      await waitForAccessExclusive(
        async (text, params) => (await sql.query<Record<string, unknown>>(text, params)).rows,
        'data.acct',
      );
      const locking = blocker.query(
        // Only that row: an OFFSET under FOR UPDATE would lock every row it skips.
        'select id from data.acct where id = (select id from data.acct order by id offset 700 limit 1) for update',
      );
      const field = bodyOf<FieldResponse>(await adding.then((res) => (expect(res.status).toBe(201), res)));
      await locking;
      fillJobId = field.fillJobId!;
      expect(field).toMatchObject({ stored: true, filled: false });
      // The first batch is done and the second waits for the lock: A is in the middle of the fill.
      await eventually(async () => (await job(a!.http, a!.adminKey, fillJobId)).rowsRead === 500, 30_000);
      expect(await job(a.http, a.adminKey, fillJobId)).toMatchObject({ status: 'running', rowsRead: 500 });
      await a.kill();
    } finally {
      await blocker.query('rollback').catch(() => undefined);
      await blocker.end();
    }

    b = await startTestApp({ database, env: ENV });
    // Not filled by A: reads compute it until B's attempt ends.
    const before = bodyOf<{ fields: FieldResponse[] }>(
      await b.http.get('/api/v1/objects/acct').set(bearer(b.adminKey)).expect(200),
    );
    expect(before.fields.find((f) => f.name === 'open_total')).toMatchObject({ stored: true, filled: false });

    let ended: JobResponse | undefined;
    await eventually(async () => {
      ended = await job(b!.http, b!.adminKey, fillJobId);
      return ended.status !== 'running';
    }, TAKE_OVER_MS);
    // The job the field's creation answered is the one that ended: B took it up again from the start.
    expect(ended).toMatchObject({ kind: 'stored_fill', status: 'done', rowsRead: ACCOUNTS });
    const after = bodyOf<{ fields: FieldResponse[] }>(
      await b.http.get('/api/v1/objects/acct').set(bearer(b.adminKey)).expect(200),
    );
    expect(after.fields.find((f) => f.name === 'open_total')).toMatchObject({ stored: true, filled: true });
    expect(await wrongTotals()).toEqual([]);
  }, 180_000);

  it('rebuilds at boot the triggers that differ from what the build generates, and queues a fill no job holds', async () => {
    // What an upgrade (or a hand) may leave behind: a trigger function with another body, a trigger gone, and a
    // stored field that is not filled with no job to fill it (a stop between its commit and its job).
    const functions = (
      await sql.query<{ name: string }>(
        `select p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'data' and p.proname like 'stored\\_%' order by 1`,
      )
    ).rows.map((r) => r.name);
    const childFn = functions.find((name) => !name.endsWith('_new'))!;
    expect(functions).toHaveLength(2);
    await sql.query(
      `create or replace function data."${childFn}"() returns trigger language plpgsql as $$ begin return null; end $$`,
    );
    await sql.query(`drop trigger "${childFn}_new" on data.acct`);
    await sql.query(`update field_definitions set computed = jsonb_set(computed, '{filled}', 'false') where name = 'open_total'`);
    await sql.query(`update data.acct set open_total = -1 where id in (select id from data.acct order by id limit 10)`);

    b = await startTestApp({ database, env: ENV });
    const admin = bearer(b.adminKey);
    const body = (await sql.query<{ body: string }>(`select prosrc as body from pg_proc where proname = $1`, [childFn])).rows[0]
      .body;
    expect(body).toContain('for no key update');
    const triggers = (
      await sql.query<{ name: string }>(`select tgname as name from pg_trigger where tgname like $1 order by 1`, [`${childFn}%`])
    ).rows.map((r) => r.name);
    expect(triggers).toEqual([`${childFn}_del`, `${childFn}_ins`, `${childFn}_new`, `${childFn}_upd`]);

    // The fill the boot queued rewrote the damaged values.
    await eventually(async () => {
      const described = bodyOf<{ fields: FieldResponse[] }>(await b!.http.get('/api/v1/objects/acct').set(admin).expect(200));
      return described.fields.find((f) => f.name === 'open_total')?.filled === true;
    }, 60_000);
    expect(await wrongTotals()).toEqual([]);

    // The triggers keep it again: a new deal of an account, and a new account.
    const [{ id: account }] = (await sql.query<{ id: string }>('select id from data.acct order by id limit 1')).rows;
    await b.http.post('/api/v1/objects/opp/records').set(admin).send({ acct: account, amount: 1234, stage: 'open' }).expect(201);
    const fresh = idOf(await b.http.post('/api/v1/objects/acct/records').set(admin).send({ name: 'fresh' }).expect(201));
    expect(await wrongTotals()).toEqual([]);
    const freshRow = (
      await sql.query<{ total: string }>('select open_total::text as total from data.acct where id = $1', [fresh])
    ).rows[0];
    expect(freshRow.total).toBe('0.00');

    // Triggers that match what the build generates are left alone: the next boot replaces nothing.
    const oids = async () =>
      (
        await sql.query<{ oid: string }>(`select oid::text as oid from pg_proc where proname like $1 order by proname`, [
          `${childFn}%`,
        ])
      ).rows.map((r) => r.oid);
    const before = await oids();
    await b.close();
    b = await startTestApp({ database, env: ENV });
    expect(await oids()).toEqual(before);
  }, 180_000);
});
