/**
 * `npm run bench:history`: what record history, the trash and change sets cost, and what they give.
 *  1. Write throughput against the build before history (commit BASELINE_COMMIT, built in a git worktree
 *     beside this one by the bench itself when missing), each app on an embedded PostgreSQL of its own:
 *     rounds alternate between the two, single creates (CLIENTS member keys, one in flight each) and
 *     batches of BATCH creates (one client, back to back); figures are the median round.
 *  2. The first page of history (default limit) of a record with HISTORY_VERSIONS versions.
 *  3. Reverting a change set of a batch that updated REVERT_RECORDS records (a fresh batch per trial).
 *  4. Storage of a 10-field record updated STORAGE_UPDATES times, one field at a time (batches of updates
 *     through the app), in record_changes before and after the retention compacts the updates.
 *  5. Single-update latency of concurrent writers while that compaction runs, against after it.
 * Compaction is the app's own retention: the section runs with CHANGE_RETENTION_DAYS=1, the updates' `at`
 * is moved two days back with SQL, and a second app process started on the same database runs the cleanup
 * at start (as every replica does, then hourly).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, symlinkSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { projectRoot } from '../src/common/project-root';
import { startEmbeddedPostgres } from '../src/database/embedded-postgres.launcher';
import { freePort } from '../test/support/free-port';
import { AppProcess, benchAppEnv, log, sql } from './harness';
import { HttpClient, percentile, runLoad } from './load';
import type { Goal } from './results';
import type { SectionContext } from './section';
import { creates } from './writes';

export const HISTORY_START = '<!-- history:start -->';
export const HISTORY_END = '<!-- history:end -->';

/** The last commit before record history (its parent's tree is what users ran before it). */
export const BASELINE_COMMIT = 'f3dcdc7';
/** Where the baseline is checked out and built (kept between runs: the build takes a few minutes). */
const BASELINE_DIR = join(tmpdir(), `data-copilot-base-${BASELINE_COMMIT}`);

const CLIENTS = 8;
const CREATES = 1200;
const BATCH = 1000;
const BATCHES = 4;
const ROUNDS = 9;

const HISTORY_VERSIONS = 1000;
const HISTORY_REQUESTS = 300;
const REVERT_RECORDS = 1000;
const REVERT_TRIALS = 5;
const STORAGE_UPDATES = 100_000;
const WRITERS = 4;
const WRITER_RECORDS = 200;
/** Updates after the compaction, as the "without pruning" sample. */
const AFTER_UPDATES = 3000;
/** How often the compaction's progress is polled. */
const POLL_MS = 100;

const STORAGE_FIELDS = [
  { name: 'name', label: 'Name', type: 'text' },
  { name: 'email', label: 'Email', type: 'email' },
  { name: 'phone', label: 'Phone', type: 'phone' },
  { name: 'city', label: 'City', type: 'text' },
  { name: 'notes', label: 'Notes', type: 'textarea' },
  { name: 'stage', label: 'Stage', type: 'select', options: ['lead', 'qualified', 'proposal', 'won', 'lost'] },
  { name: 'amount', label: 'Amount', type: 'currency' },
  { name: 'seats', label: 'Seats', type: 'integer' },
  { name: 'close_date', label: 'Close date', type: 'date' },
  { name: 'active', label: 'Active', type: 'boolean' },
];
const CITIES = ['Lisbon', 'Osaka', 'Toronto', 'Nairobi', 'Bergen', 'Curitiba', 'Melbourne'];
const STAGES = ['lead', 'qualified', 'proposal', 'won', 'lost'];

/** The value of field `f` at update `i`: of the field's type, and a realistic size for it. */
function fieldValue(f: number, i: number): unknown {
  switch (STORAGE_FIELDS[f].name) {
    case 'name':
      return `Account ${i} ${CITIES[i % CITIES.length]} Holdings`;
    case 'email':
      return `buyer.${i}@account-${i % 977}.example.com`;
    case 'phone':
      return `+1 415 555 ${String(i % 10_000).padStart(4, '0')}`;
    case 'city':
      return CITIES[i % CITIES.length];
    case 'notes':
      return `Call ${i}: asked about volume pricing for the ${CITIES[i % CITIES.length]} office; follow up next week with a revised quote.`;
    case 'stage':
      return STAGES[i % STAGES.length];
    case 'amount':
      return ((i * 7919) % 1_000_000) / 100;
    case 'seats':
      return 10 + (i % 500);
    case 'close_date':
      return `2026-${String(1 + (i % 12)).padStart(2, '0')}-${String(1 + (i % 28)).padStart(2, '0')}`;
    default:
      return i % 2 === 0;
  }
}

function fullRecord(i: number): Record<string, unknown> {
  return Object.fromEntries(STORAGE_FIELDS.map((f, index) => [f.name, fieldValue(index, i)]));
}

export interface Throughput {
  /** Per round, main and baseline. */
  createsPerSecond: { main: number[]; base: number[] };
  batchRowsPerSecond: { main: number[]; base: number[] };
  createLatencies: { main: number[]; base: number[] };
  errors: number;
}

export interface StorageFigures {
  rows: number;
  /** pg_total_relation_size(record_changes) / its rows, after VACUUM FULL (only the stored record's changes in it). */
  tableBytesPerRow: number;
  /** Average pg_column_size(record), pg_column_size(before), and the whole tuple, of the record's updates. */
  recordBytes: number;
  beforeBytes: number;
  tupleBytes: number;
}

/** The statements that took the most database time during a step (pg_stat_statements). */
export type TopStatements = Array<{ query: string; calls: number; totalMs: number }>;

export interface HistoryResult {
  baseline: string;
  throughput: Throughput;
  history: { versions: number; latencies: number[]; pageSize: number; deep: { versions: number; latencies: number[] } };
  revert: { records: number; trials: number[]; batchMs: number[]; statements: TopStatements };
  storage: {
    updates: number;
    writeMs: number;
    /** Average size of the changed field as jsonb, before + after ({field: before} + {field: after}). */
    changedFieldBytes: number;
    before: StorageFigures;
    after: StorageFigures;
    compacted: number;
    pruneMs: number;
    /** Statements of the whole database while the compaction ran (the writers' and the poll's included). */
    statements: TopStatements;
  };
  writers: {
    clients: number;
    /** Sorted latencies (ms) of single updates: before the restart, while the compaction ran, after it. */
    before: number[];
    during: number[];
    after: number[];
    errors: number;
    /** Polls (every 25 ms) during the compaction that found a backend waiting on a lock; of how many. */
    lockWaits: number;
    polls: number;
  };
}

const TOP_STATEMENTS = 6;

async function topStatements(context: SectionContext): Promise<TopStatements> {
  if (!context.db) return [];
  const rows = await context.db.read();
  return rows.sort((a, b) => b.totalMs - a.totalMs).slice(0, TOP_STATEMENTS);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Checks out and builds BASELINE_COMMIT in BASELINE_DIR unless a build is there; its bench/server.js. */
function baselineServer(): string {
  const serverJs = join(BASELINE_DIR, 'dist', 'bench', 'server.js');
  if (existsSync(serverJs)) return serverJs;
  const root = projectRoot();
  if (!existsSync(BASELINE_DIR)) {
    log(`baseline: git worktree add ${BASELINE_DIR} ${BASELINE_COMMIT}`);
    execFileSync('git', ['-C', root, 'worktree', 'add', '--detach', BASELINE_DIR, BASELINE_COMMIT], { stdio: 'inherit' });
  }
  if (!existsSync(join(BASELINE_DIR, 'node_modules')))
    symlinkSync(join(root, 'node_modules'), join(BASELINE_DIR, 'node_modules'));
  log(`baseline: npm run build in ${BASELINE_DIR} (a few minutes)`);
  execFileSync('npm', ['run', 'build'], { cwd: BASELINE_DIR, stdio: ['ignore', 'inherit', 'inherit'] });
  return serverJs;
}

async function createObject(admin: HttpClient, name: string, fields: unknown[]): Promise<void> {
  await admin.json({ method: 'POST', path: '/api/v1/objects', body: { name, label: name, fields } }, 201);
}

async function memberKeys(admin: HttpClient, port: number, count: number, sockets = 1): Promise<HttpClient[]> {
  const clients: HttpClient[] = [];
  for (let c = 0; c < count; c++) {
    const key = await admin.json<{ secret: string }>(
      { method: 'POST', path: '/api/v1/api-keys', body: { name: `bench history ${c}`, role: 'member' } },
      201,
    );
    clients.push(new HttpClient(port, { authorization: `Bearer ${key.secret}` }, sockets));
  }
  return clients;
}

type Operation =
  { op: 'create'; record: Record<string, unknown> } | { op: 'update'; id: string; record: Record<string, unknown> };

async function batch(client: HttpClient, object: string, operations: Operation[]) {
  return client.json<{ results: Array<{ status: number; id?: string }>; changeSetId?: string }>({
    method: 'POST',
    path: `/api/v1/objects/${object}/records/batch`,
    body: { operations },
  });
}

const TP_OBJECT = 'bench_tp';
const TP_FIELDS = [
  { name: 'title', label: 'Title', type: 'text' },
  { name: 'qty', label: 'Quantity', type: 'integer' },
];

/** 1. The two apps in turn, ROUNDS rounds (the order inside a round alternates too). */
async function throughputRun(main: { admin: HttpClient; port: number }, base: { admin: HttpClient; port: number }) {
  const sides = { main, base };
  const prepared = {} as Record<'main' | 'base', { clients: HttpClient[]; batcher: HttpClient }>;
  for (const side of ['main', 'base'] as const) {
    const { admin, port } = sides[side];
    await createObject(admin, TP_OBJECT, TP_FIELDS);
    const clients = await memberKeys(admin, port, CLIENTS + 1);
    prepared[side] = { clients: clients.slice(0, CLIENTS), batcher: clients[CLIENTS] };
  }
  const operations: Operation[] = Array.from({ length: BATCH }, (_, i) => ({
    op: 'create',
    record: { title: `batch row ${i}`, qty: i },
  }));
  const result: Throughput = {
    createsPerSecond: { main: [], base: [] },
    batchRowsPerSecond: { main: [], base: [] },
    createLatencies: { main: [], base: [] },
    errors: 0,
  };
  const batches = async (side: 'main' | 'base') => {
    const started = performance.now();
    for (let b = 0; b < BATCHES; b++) {
      const { results } = await batch(prepared[side].batcher, TP_OBJECT, operations);
      result.errors += results.filter((r) => r.status !== 201).length;
    }
    return ((BATCHES * BATCH) / (performance.now() - started)) * 1000;
  };
  // Warm-up of both (JIT, connection pools, the tables' first pages), not counted.
  for (const side of ['main', 'base'] as const) {
    await creates(prepared[side].clients, 200, () => TP_OBJECT);
    await batch(prepared[side].batcher, TP_OBJECT, operations);
  }
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const order: Array<'main' | 'base'> = round % 2 === 0 ? ['main', 'base'] : ['base', 'main'];
      for (const side of order) {
        const run = await creates(prepared[side].clients, CREATES, () => TP_OBJECT);
        result.errors += run.errors;
        result.createsPerSecond[side].push((CREATES / run.wallMs) * 1000);
        result.createLatencies[side].push(...run.latencies);
      }
      for (const side of order) result.batchRowsPerSecond[side].push(await batches(side));
      log(
        `throughput round ${round + 1}: creates/s main ${result.createsPerSecond.main[round].toFixed(0)}, base ` +
          `${result.createsPerSecond.base[round].toFixed(0)}; batch rows/s main ${result.batchRowsPerSecond.main[round].toFixed(0)}, ` +
          `base ${result.batchRowsPerSecond.base[round].toFixed(0)}`,
      );
    }
  } finally {
    for (const side of ['main', 'base'] as const) {
      for (const client of prepared[side].clients) client.close();
      prepared[side].batcher.close();
    }
  }
  result.createLatencies.main.sort((a, b) => a - b);
  result.createLatencies.base.sort((a, b) => a - b);
  return result;
}

/** Sizes in record_changes, after VACUUM FULL (so dead row versions are not counted). */
async function storageFigures(databaseUrl: string, object: string): Promise<StorageFigures> {
  await sql(databaseUrl, 'vacuum full analyze record_changes');
  const [table] = await sql<{ bytes: string; rows: string }>(
    databaseUrl,
    `select pg_total_relation_size('record_changes')::text as bytes, count(*)::text as rows from record_changes`,
  );
  const [columns] = await sql<{ rows: string; record: number; before: number; tuple: number }>(
    databaseUrl,
    `select count(*)::text as rows, avg(pg_column_size(c."record"))::float8 as record,
            avg(coalesce(pg_column_size(c."before"), 0))::float8 as before, avg(pg_column_size(c.*))::float8 as tuple
       from record_changes c where c."object" = $1 and c."op" = 'update'`,
    [object],
  );
  return {
    rows: Number(columns.rows),
    tableBytesPerRow: Number(table.bytes) / Number(table.rows),
    recordBytes: columns.record,
    beforeBytes: columns.before,
    tupleBytes: columns.tuple,
  };
}

/** Single updates from `clients`, one in flight each, until `stop()` says so; latencies with their start time. */
function updateLoop(clients: HttpClient[], object: string, ids: string[]) {
  const samples: Array<{ at: number; ms: number }> = [];
  let errors = 0;
  let running = true;
  let n = 0;
  const done = Promise.all(
    clients.map(async (client) => {
      while (running) {
        const i = n++;
        const at = performance.now();
        const res = await client.send({
          method: 'PATCH',
          path: `/api/v1/objects/${object}/records/${ids[i % ids.length]}`,
          body: { title: `update ${i}`, qty: i },
        });
        samples.push({ at, ms: performance.now() - at });
        if (res.status !== 200 && errors++ < 3) log(`writer: ${res.status} ${res.body.slice(0, 200)}`);
      }
    }),
  );
  return {
    samples,
    count: () => samples.length,
    errors: () => errors,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** 4 and 5: the record updated STORAGE_UPDATES times, then compacted by a restarted app while writers write. */
async function storageRun(context: SectionContext): Promise<Pick<HistoryResult, 'storage' | 'writers'>> {
  const { admin, member, databaseUrl, startOther } = context;
  const object = 'bench_store';
  await createObject(admin, object, STORAGE_FIELDS);
  const [{ id }] = (await batch(member, object, [{ op: 'create', record: fullRecord(0) }])).results as Array<{ id: string }>;
  const started = performance.now();
  for (let done = 0; done < STORAGE_UPDATES; done += BATCH) {
    const operations: Operation[] = Array.from({ length: BATCH }, (_, j) => {
      const i = done + j + 1;
      const f = i % STORAGE_FIELDS.length;
      return { op: 'update', id, record: { [STORAGE_FIELDS[f].name]: fieldValue(f, i) } };
    });
    const { results } = await batch(member, object, operations);
    const failed = results.filter((r) => r.status !== 200);
    if (failed.length) throw new Error(`storage: ${failed.length} updates of a batch failed (status ${failed[0].status})`);
    if ((done / BATCH) % 20 === 19)
      log(`storage: ${done + BATCH} updates in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  }
  const writeMs = performance.now() - started;
  const [{ n }] = await sql<{ n: string }>(
    databaseUrl,
    `select count(*)::text as n from record_changes where "object" = $1 and "op" = 'update'`,
    [object],
  );
  if (Number(n) !== STORAGE_UPDATES) throw new Error(`storage: ${n} update changes stored, not ${STORAGE_UPDATES}`);
  const [{ field }] = await sql<{ field: number }>(
    databaseUrl,
    `select avg(pg_column_size(c."before") + pg_column_size((select jsonb_object_agg(k, c."record" -> k) from unnest(c."changed_fields") k)))::float8 as field
       from record_changes c where c."object" = $1 and c."op" = 'update'`,
    [object],
  );
  const before = await storageFigures(databaseUrl, object);
  log(`storage: ${STORAGE_UPDATES} updates in ${(writeMs / 1000).toFixed(0)} s; ${before.tableBytesPerRow.toFixed(0)} B/row`);

  // Writers into an object of their own; "before": with only this app, before the restart.
  const writerObject = 'bench_writers';
  await createObject(admin, writerObject, TP_FIELDS);
  const ids = (
    await batch(
      member,
      writerObject,
      Array.from({ length: WRITER_RECORDS }, (_, i) => ({ op: 'create', record: { title: `w ${i}`, qty: i } })),
    )
  ).results.map((r) => r.id!);
  const clients = await memberKeys(admin, context.port, WRITERS);
  // The updates go past the feed's retention (CHANGE_RETENTION_DAYS=1): two days back.
  await sql(databaseUrl, `update record_changes set "at" = "at" - interval '2 days' where "object" = $1`, [object]);
  await sql(databaseUrl, 'vacuum analyze record_changes');
  // The state of the compaction, polled on one connection every POLL_MS through all three phases (so the
  // poll weighs on each alike): whether the record's updates were numbered for the feed (the cleanup's
  // first step), whether any past the feed's retention is not compacted yet, backends waiting on a lock.
  const poller = new Client({ connectionString: databaseUrl });
  await poller.connect();
  const polls: Array<{ at: number; numbered: boolean; left: boolean; waiting: number }> = [];
  let polling = true;
  const polled = (async () => {
    while (polling) {
      // Both on indexes (the feed's ("object", "cursor") and the retention's partial one), so the poll stays light.
      const { rows } = await poller.query<{ numbered: boolean; left: boolean; waiting: string }>(
        `select (select max("cursor") from record_changes where "object" = $1) is not null as numbered,
                exists (select from record_changes where "op" = 'update' and not "compacted" and "at" < now() - interval '1 day') as left,
                (select count(*) from pg_stat_activity where "wait_event_type" = 'Lock' and "datname" = current_database())::text as waiting`,
        [object],
      );
      polls.push({ at: performance.now(), numbered: rows[0].numbered, left: rows[0].left, waiting: Number(rows[0].waiting) });
      await sleep(POLL_MS);
    }
  })();
  const loop = updateLoop(clients, writerObject, ids);
  try {
    while (loop.count() < AFTER_UPDATES) await sleep(50);
    const beforeUntil = performance.now();
    // A second app on the same database runs the retention at start (as every replica does): the compaction.
    const restart = performance.now();
    await context.db?.reset();
    let otherFailed: Error | undefined;
    const other = startOther(join(__dirname, 'server.js')).catch((error: unknown) => {
      otherFailed = error instanceof Error ? error : new Error('the second app did not start');
    });
    // The compaction: from the first poll that saw the cleanup at work (changes numbered) to
    // the first that saw none left.
    for (;;) {
      if (otherFailed) throw otherFailed;
      const last = polls[polls.length - 1];
      if (last && last.at > restart && !last.left) break;
      if (performance.now() - restart > 600_000) throw new Error('storage: updates still not compacted after 600 s');
      await sleep(POLL_MS);
    }
    const window = polls.filter((p) => p.at > restart && p.numbered);
    const pruneEnd = window[window.length - 1].at;
    // The poll before the first that saw it at work: the compaction started after that one.
    const pruneStart = polls[polls.indexOf(window[0]) - 1]?.at ?? restart;
    const lockWaits = window.filter((p) => p.waiting > 0).length;
    const statements = await topStatements(context);
    await other;
    const afterFrom = performance.now();
    const counted = loop.count();
    while (loop.count() < counted + AFTER_UPDATES) await sleep(50);
    await loop.stop();
    const pick = (from: number, to: number) =>
      loop.samples
        .filter((s) => s.at >= from && s.at < to)
        .map((s) => s.ms)
        .sort((a, b) => a - b);
    const writers = {
      clients: WRITERS,
      before: pick(0, beforeUntil),
      during: pick(pruneStart, pruneEnd),
      after: pick(afterFrom, Infinity),
      errors: loop.errors(),
      lockWaits,
      polls: window.length,
    };
    const [{ compacted }] = await sql<{ compacted: string }>(
      databaseUrl,
      `select count(*)::text as compacted from record_changes where "object" = $1 and "compacted"`,
      [object],
    );
    log(
      `storage: compaction took ${(pruneEnd - pruneStart).toFixed(0)} ms; ${writers.during.length} updates meanwhile, ` +
        `p99 ${percentile(writers.during, 99).toFixed(1)} ms (after: ${percentile(writers.after, 99).toFixed(1)} ms)`,
    );
    // Only the stored record's changes in the table, as before.
    await sql(databaseUrl, `delete from record_changes where "object" = $1`, [writerObject]);
    const after = await storageFigures(databaseUrl, object);
    return {
      storage: {
        updates: STORAGE_UPDATES,
        writeMs,
        changedFieldBytes: field,
        before,
        after,
        compacted: Number(compacted),
        pruneMs: pruneEnd - pruneStart,
        statements,
      },
      writers,
    };
  } finally {
    await loop.stop();
    polling = false;
    await polled.catch(() => undefined);
    await poller.end();
    for (const client of clients) client.close();
  }
}

/** 2. The first page of the history of a record with HISTORY_VERSIONS versions (and of the compacted one). */
async function firstPageRun(context: SectionContext): Promise<HistoryResult['history']> {
  const { admin, member, databaseUrl } = context;
  const object = 'bench_hist';
  await createObject(admin, object, STORAGE_FIELDS);
  const [{ id }] = (await batch(member, object, [{ op: 'create', record: fullRecord(0) }])).results as Array<{ id: string }>;
  const operations: Operation[] = Array.from({ length: HISTORY_VERSIONS - 1 }, (_, j) => {
    const f = (j + 1) % STORAGE_FIELDS.length;
    return { op: 'update', id, record: { [STORAGE_FIELDS[f].name]: fieldValue(f, j + 1) } };
  });
  await batch(member, object, operations);
  await sql(databaseUrl, 'vacuum analyze record_changes');
  const page = (recordObject: string, recordId: string) => () => ({
    method: 'GET' as const,
    path: `/api/v1/objects/${recordObject}/records/${recordId}/history`,
  });
  const first = await member.json<{ versions: unknown[] }>(page(object, id)());
  await runLoad({ client: member, requests: 30, concurrency: 1, make: page(object, id) });
  const run = await runLoad({ client: member, requests: HISTORY_REQUESTS, concurrency: 1, make: page(object, id) });
  if (run.errors) throw new Error(`history: ${run.errors} errors: ${run.errorSamples.join('; ')}`);
  // The record of the storage run: STORAGE_UPDATES versions, compacted.
  const [stored] = await sql<{ id: string }>(databaseUrl, `select "id"::text as id from "data"."bench_store" limit 1`);
  await runLoad({ client: member, requests: 10, concurrency: 1, make: page('bench_store', stored.id) });
  const deep = await runLoad({ client: member, requests: 100, concurrency: 1, make: page('bench_store', stored.id) });
  log(
    `history: first page p50 ${percentile(run.latencies, 50).toFixed(1)} ms, p95 ${percentile(run.latencies, 95).toFixed(1)} ms; ` +
      `of the ${STORAGE_UPDATES}-version record p95 ${percentile(deep.latencies, 95).toFixed(1)} ms`,
  );
  return {
    versions: HISTORY_VERSIONS,
    pageSize: first.versions.length,
    latencies: run.latencies,
    deep: { versions: STORAGE_UPDATES + 1, latencies: deep.latencies },
  };
}

/** 3. A batch updating REVERT_RECORDS records, then its change set reverted; REVERT_TRIALS times. */
async function revertRun(context: SectionContext): Promise<HistoryResult['revert']> {
  const { admin, member } = context;
  const object = 'bench_revert';
  await createObject(admin, object, STORAGE_FIELDS);
  const ids = (
    await batch(
      member,
      object,
      Array.from({ length: REVERT_RECORDS }, (_, i) => ({ op: 'create', record: fullRecord(i) })),
    )
  ).results.map((r) => r.id!);
  const trials: number[] = [];
  const batchMs: number[] = [];
  let statements: TopStatements = [];
  for (let t = 0; t < REVERT_TRIALS + 1; t++) {
    const batchStarted = performance.now();
    const { changeSetId } = await batch(
      member,
      object,
      ids.map((id, i) => ({ op: 'update', id, record: { stage: STAGES[(t + i) % STAGES.length], seats: t * 1000 + i } })),
    );
    const batchTook = performance.now() - batchStarted;
    if (!changeSetId) throw new Error('revert: the batch answered no changeSetId');
    await context.db?.reset();
    const started = performance.now();
    await member.json({ method: 'POST', path: `/api/v1/change-sets/${changeSetId}/revert` });
    const took = performance.now() - started;
    // The statements of the last trial's revert alone.
    statements = await topStatements(context);
    // The first trial warms up.
    if (t > 0) {
      trials.push(took);
      batchMs.push(batchTook);
    }
    log(`revert trial ${t}: batch ${batchTook.toFixed(0)} ms, revert ${took.toFixed(0)} ms${t === 0 ? ' (warm-up)' : ''}`);
  }
  return { records: REVERT_RECORDS, trials, batchMs, statements };
}

/** The baseline build's app on an embedded PostgreSQL of its own, for the throughput comparison. */
async function startBaseline(context: SectionContext, cleanups: Array<() => Promise<void> | void>) {
  const serverJs = baselineServer();
  const root = await mkdtemp(join(tmpdir(), 'data-copilot-bench-base-'));
  // As root, Postgres runs as the `postgres` user, which must be able to pass through this folder.
  await chmod(root, 0o711);
  cleanups.push(() => rm(root, { recursive: true, force: true }));
  const pgOptions = { dataDir: join(root, 'pg'), port: await freePort(), persistent: true };
  let postgres = await startEmbeddedPostgres(pgOptions);
  // pg_stat_statements preloaded as on this build's cluster (the section's `statements`), so both pay for it alike.
  await sql(postgres.url, "alter system set shared_preload_libraries = 'pg_stat_statements'");
  await postgres.stop();
  postgres = await startEmbeddedPostgres(pgOptions);
  const running = postgres;
  cleanups.push(() => running.stop());
  await sql(postgres.url, 'create database bench_app');
  const adminKey = `bench-admin-${randomBytes(16).toString('hex')}`;
  const app = AppProcess.start(
    benchAppEnv(
      {
        databaseUrl: postgres.urlFor('bench_app'),
        dataDir: join(root, 'app-data'),
        adminKey,
        llmUrl: context.llm.url,
        seed: false,
      },
      HISTORY_ENV,
    ),
    join(root, 'app.log'),
    serverJs,
  );
  cleanups.push(() => app.kill());
  cleanups.push(async () => {
    await app.stop();
  });
  const { port } = await app.ready();
  log(`baseline ${BASELINE_COMMIT} listening on 127.0.0.1:${port} (pid ${app.pid})`);
  const admin = new HttpClient(port, { authorization: `Bearer ${adminKey}` });
  cleanups.push(() => admin.close());
  return { admin, port };
}

/** The section's app settings (and the baseline's): the feed kept one day, so two-day-old updates compact. */
export const HISTORY_ENV = { CHANGE_RETENTION_DAYS: '1' };

export async function historyRun(context: SectionContext): Promise<HistoryResult> {
  const cleanups: Array<() => Promise<void> | void> = [];
  try {
    // Storage first, while record_changes holds nothing else.
    const { storage, writers } = await storageRun(context);
    const history = await firstPageRun(context);
    const revert = await revertRun(context);
    const base = await startBaseline(context, cleanups);
    const throughput = await throughputRun({ admin: context.admin, port: context.port }, base);
    return { baseline: BASELINE_COMMIT, throughput, history, revert, storage, writers };
  } finally {
    for (const step of cleanups.splice(0).reverse()) {
      try {
        await step();
      } catch (error) {
        log(`cleanup: ${String(error)}`);
      }
    }
  }
}

const pct = (value: number) => `${(value * 100).toFixed(0)}%`;

export function historyGoals(r: HistoryResult): Goal[] {
  const creates = median(r.throughput.createsPerSecond.main) / median(r.throughput.createsPerSecond.base);
  const batches = median(r.throughput.batchRowsPerSecond.main) / median(r.throughput.batchRowsPerSecond.base);
  const p95 = percentile(r.history.latencies, 95);
  const revert = median(r.revert.trials);
  const stored = r.storage.after.recordBytes + r.storage.after.beforeBytes;
  const duringP99 = percentile(r.writers.during, 99);
  const afterP99 = percentile(r.writers.after, 99);
  return [
    {
      name: `Single creates (${CLIENTS} clients) against ${r.baseline}`,
      target: '>= 85%',
      measured: `${pct(creates)} (${median(r.throughput.createsPerSecond.main).toFixed(0)} / ${median(r.throughput.createsPerSecond.base).toFixed(0)} creates/s)`,
      met: creates >= 0.85,
    },
    {
      name: `Batches of ${BATCH} creates against ${r.baseline}`,
      target: '>= 85%',
      measured: `${pct(batches)} (${median(r.throughput.batchRowsPerSecond.main).toFixed(0)} / ${median(r.throughput.batchRowsPerSecond.base).toFixed(0)} rows/s)`,
      met: batches >= 0.85,
    },
    {
      name: `History, first page, record with ${r.history.versions} versions`,
      target: 'p95 <= 20 ms',
      measured: `p95 ${p95.toFixed(1)} ms (p50 ${percentile(r.history.latencies, 50).toFixed(1)} ms)`,
      met: p95 <= 20,
    },
    {
      name: `Revert of a ${r.revert.records}-record change set`,
      target: '<= 2 s (median)',
      measured: `${(revert / 1000).toFixed(2)} s`,
      met: revert <= 2000,
    },
    {
      name: 'Update kept after compaction (record + before) against the changed field (before + after)',
      target: '<= 2x',
      measured: `${(stored / r.storage.changedFieldBytes).toFixed(2)}x (${stored.toFixed(0)} B / ${r.storage.changedFieldBytes.toFixed(0)} B)`,
      met: stored <= 2 * r.storage.changedFieldBytes,
    },
    {
      name: 'Single updates while the compaction runs: p99 against after it',
      target: '<= 2x',
      measured: r.writers.during.length
        ? `${(duringP99 / afterP99).toFixed(2)}x (${duringP99.toFixed(1)} / ${afterP99.toFixed(1)} ms, ${r.writers.during.length} updates during)`
        : 'no update fell inside the compaction',
      met: r.writers.during.length > 0 && duringP99 <= 2 * afterP99,
    },
  ];
}

export function renderHistory(r: HistoryResult, run: { command: string; date: string; machine?: string }): string[] {
  const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : 'n/a');
  const t = r.throughput;
  const s = r.storage;
  const storageRow = (label: string, f: StorageFigures) =>
    `| ${label} | ${f.rows} | ${f.tableBytesPerRow.toFixed(0)} | ${f.tupleBytes.toFixed(0)} | ${f.recordBytes.toFixed(0)} | ` +
    `${f.beforeBytes.toFixed(0)} | ${(f.recordBytes + f.beforeBytes).toFixed(0)} | ${((f.recordBytes + f.beforeBytes) / s.changedFieldBytes).toFixed(2)}x |`;
  const statementRows = (statements: TopStatements) => [
    '| statement | calls | total ms | mean ms |',
    '|---|---|---|---|',
    ...statements.map(
      (q) =>
        `| \`${q.query.replace(/\s+/g, ' ').slice(0, 220).replace(/\|/g, '\\|').replace(/`/g, "'")}${q.query.length > 220 ? '…' : ''}\` | ` +
        `${q.calls} | ${q.totalMs.toFixed(0)} | ${(q.totalMs / q.calls).toFixed(2)} |`,
    ),
  ];
  const paired = (main: number[], base: number[]) => median(main.map((m, i) => m / base[i]));
  const latencyRow = (label: string, values: number[]) =>
    `| ${label} | ${values.length} | ${ms(percentile(values, 50))} | ${ms(percentile(values, 99))} | ${ms(values[values.length - 1])} |`;
  return [
    HISTORY_START,
    '',
    '## Record history, trash and change sets',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- Baseline: commit \`${r.baseline}\` (before record history), checked out and built by the bench in`,
    `  \`${BASELINE_DIR}\` when missing (\`git worktree add\`, node_modules linked, \`npm run build\`); each app on an`,
    '  embedded PostgreSQL of its own, both with the same settings (`CHANGE_RETENTION_DAYS=1`), on the same machine.',
    `- Throughput: ${ROUNDS} rounds, each running both apps in turn (order alternating): ${CREATES} single creates`,
    `  (\`POST /records\`, ${CLIENTS} member keys, one in flight each), then ${BATCHES} batches of ${BATCH} creates`,
    '  (`POST /records/batch`, one client, back to back); each figure the median round.',
    `- History: \`GET …/records/:id/history\` (default limit, ${r.history.pageSize} versions) of a 10-field record with`,
    `  ${r.history.versions} versions (one create, then updates of one field each), ${r.history.latencies.length} requests one`,
    `  after another after 30 of warm-up; also of the storage record (${r.history.deep.versions.toLocaleString('en-US')} versions, compacted).`,
    `- Revert: a batch updating 2 fields of ${r.revert.records} records, then \`POST /change-sets/:id/revert\`;`,
    `  ${r.revert.trials.length} trials after one of warm-up, a fresh batch each.`,
    `- Storage: a 10-field record (text, email, phone, textarea of ~110 characters, select, currency, integer, date,`,
    `  boolean) updated ${s.updates.toLocaleString('en-US')} times one field at a time, through \`POST /records/batch\``,
    `  (batches of ${BATCH} updates; ${(s.writeMs / 1000).toFixed(0)} s). Sizes after \`VACUUM FULL\` (no dead row versions),`,
    '  with only that record\'s changes in `record_changes`. "Changed field" is the jsonb of the field an update set,',
    "  before and after (`{field: before}` + `{field: after}`). Compaction: the updates' `at` moved two days back",
    '  with SQL, then a second app process started on the same database runs the retention cleanup at start',
    `  (\`ChangesService.prune\`): ${s.compacted.toLocaleString('en-US')} updates compacted in ${(s.pruneMs / 1000).toFixed(1)} s`,
    `  (from the poll before the first that saw it at work to the first that saw none left; polled every ${POLL_MS} ms`,
    '  through all three phases of the writers, on one connection).',
    `- Writers: ${r.writers.clients} member keys, one \`PATCH /records/:id\` in flight each, into an object of their own,`,
    '  before the second app started, while the compaction ran, and after it (both apps up); errors:',
    `  ${r.writers.errors}.`,
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...historyGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    `| throughput (median round) | this build | ${r.baseline} | ratio |`,
    '|---|---|---|---|',
    `| single creates/s | ${median(t.createsPerSecond.main).toFixed(0)} | ${median(t.createsPerSecond.base).toFixed(0)} | ${pct(median(t.createsPerSecond.main) / median(t.createsPerSecond.base))} |`,
    `| single create p50 / p99 ms (every round) | ${ms(percentile(t.createLatencies.main, 50))} / ${ms(percentile(t.createLatencies.main, 99))} | ` +
      `${ms(percentile(t.createLatencies.base, 50))} / ${ms(percentile(t.createLatencies.base, 99))} | |`,
    `| batch rows/s | ${median(t.batchRowsPerSecond.main).toFixed(0)} | ${median(t.batchRowsPerSecond.base).toFixed(0)} | ${pct(median(t.batchRowsPerSecond.main) / median(t.batchRowsPerSecond.base))} |`,
    `| errors | ${t.errors} | | |`,
    '',
    `Median of the rounds' own ratios (each round's two runs side by side): single creates ` +
      `${pct(paired(t.createsPerSecond.main, t.createsPerSecond.base))}, batch rows ` +
      `${pct(paired(t.batchRowsPerSecond.main, t.batchRowsPerSecond.base))}.`,
    '',
    `Rounds, creates/s this build: ${t.createsPerSecond.main.map((v) => v.toFixed(0)).join(', ')}; ${r.baseline}: ` +
      `${t.createsPerSecond.base.map((v) => v.toFixed(0)).join(', ')}. Batch rows/s this build: ` +
      `${t.batchRowsPerSecond.main.map((v) => v.toFixed(0)).join(', ')}; ${r.baseline}: ${t.batchRowsPerSecond.base.map((v) => v.toFixed(0)).join(', ')}.`,
    '',
    '| history / revert | requests | p50 ms | p95 ms | max ms |',
    '|---|---|---|---|---|',
    `| history first page, ${r.history.versions} versions | ${r.history.latencies.length} | ${ms(percentile(r.history.latencies, 50))} | ` +
      `${ms(percentile(r.history.latencies, 95))} | ${ms(r.history.latencies[r.history.latencies.length - 1])} |`,
    `| history first page, ${r.history.deep.versions.toLocaleString('en-US')} versions (compacted) | ${r.history.deep.latencies.length} | ` +
      `${ms(percentile(r.history.deep.latencies, 50))} | ${ms(percentile(r.history.deep.latencies, 95))} | ` +
      `${ms(r.history.deep.latencies[r.history.deep.latencies.length - 1])} |`,
    `| revert of ${r.revert.records} records (trials: ${r.revert.trials.map((v) => v.toFixed(0)).join(', ')} ms) | ${r.revert.trials.length} | ` +
      `${ms(median(r.revert.trials))} | | ${ms(Math.max(...r.revert.trials))} |`,
    `| the batch of ${r.revert.records} updates it reverts | ${r.revert.batchMs.length} | ${ms(median(r.revert.batchMs))} | | ` +
      `${ms(Math.max(...r.revert.batchMs))} |`,
    '',
    `| record_changes, per update | rows | table + indexes B/row | tuple B | record B | before B | record + before B | against changed field (${s.changedFieldBytes.toFixed(0)} B) |`,
    '|---|---|---|---|---|---|---|---|',
    storageRow('before compaction', s.before),
    storageRow('after compaction', s.after),
    '',
    '| single updates | updates | p50 ms | p99 ms | max ms |',
    '|---|---|---|---|---|',
    latencyRow('before the restart (one app)', r.writers.before),
    latencyRow('while the compaction ran', r.writers.during),
    latencyRow('after it (both apps up)', r.writers.after),
    '',
    `Polls during the compaction that found a backend of the database waiting on a lock: ${r.writers.lockWaits} of ${r.writers.polls}.`,
    '',
    `Database time while the compaction ran (pg_stat_statements, the whole database: cleanup, writers, the bench's poll), top ${TOP_STATEMENTS}:`,
    '',
    ...statementRows(s.statements),
    '',
    `Database time of one revert of ${r.revert.records} records (the last trial), top ${TOP_STATEMENTS}:`,
    '',
    ...statementRows(r.revert.statements),
    '',
    HISTORY_END,
  ];
}
