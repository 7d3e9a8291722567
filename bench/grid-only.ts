/**
 * `npm run bench:grid`: the grid's two volume figures. Batches: 10,000 rows created through ten
 * `POST .../records/batch` requests of 1,000 creates (the change feed on, as in production), by one
 * client and by several at once. Keyset paging: a page of 50 at depth 1,000,000 of a 1,100,000-row
 * object, reached by following nextCursor, for several orders, against the same page by offset, with
 * the plan PostgreSQL runs for each. Replaces that section of BENCHMARKS.md.
 */
import { queryString } from './sample-requests';
import { performance } from 'node:perf_hooks';
import { decodeCursor, querySignature } from '../src/data/keyset';
import { compileFind } from '../src/data/records.compiler';
import { orderTerms } from '../src/data/order-by.compiler';
import type { ObjectMeta } from '../src/metadata/object-metadata.types';
import { DbStats, log, sql } from './harness';
import { explain, objectMeta, type PlanSummary } from './plans';
import { HttpClient, percentile, timeRuns } from './load';
import type { Goal } from './results';
import { runSection } from './section';

const GRID_START = '<!-- grid:start -->';
const GRID_END = '<!-- grid:end -->';

const BATCH_ROWS = 10_000;
const BATCH_SIZE = 1_000;
const BATCH_CLIENTS = [1, 2, 4];
const BATCH_GOAL_MS = 2_000;

const KEYSET_ROWS = 1_100_000;
const DEPTH = 1_000_000;
/** The records API's largest page: the walk to the depth takes DEPTH / WALK_LIMIT requests. */
const WALK_LIMIT = 1_000;
const PAGE_LIMIT = 50;
const KEYSET_RUNS = 200;
const OFFSET_RUNS = 15;
const KEYSET_GOAL_MS = 20;

interface BatchRun {
  clients: number;
  wallMs: number;
  /** Sorted, ms: each batch request from send to response. */
  latencies: number[];
}

interface BatchResult {
  runs: BatchRun[];
  /** pg_stat_statements over the one-client run, per batch. */
  statementsPerBatch: number;
  dbMsPerBatch: number;
  top: Array<{ query: string; perBatch: number; meanMs: number }>;
}

interface KeysetOrderResult {
  name: string;
  orderBy?: unknown;
  /** Following nextCursor with pages of WALK_LIMIT until DEPTH: total ms and pages. */
  walkMs: number;
  walkPages: number;
  /** Sorted, ms. */
  keyset: number[];
  offset: number[];
  keysetPlan: PlanSummary;
  offsetPlan: PlanSummary;
}

interface GridResult {
  batch: BatchResult;
  keyset: { rows: number; fillMs: number; orders: KeysetOrderResult[] };
}

const BATCH_FIELDS = [
  { name: 'title', label: 'Title', type: 'text' },
  { name: 'qty', label: 'Quantity', type: 'integer' },
  { name: 'amount', label: 'Amount', type: 'currency' },
  { name: 'active', label: 'Active', type: 'boolean' },
  { name: 'due', label: 'Due', type: 'date' },
  { name: 'status', label: 'Status', type: 'select', options: ['open', 'won', 'lost'], indexed: true },
];

const KEYSET_FIELDS = [
  { name: 'n', label: 'N', type: 'integer' },
  { name: 'score', label: 'Score', type: 'number', indexed: true },
  { name: 'day', label: 'Day', type: 'date', indexed: true },
  { name: 'label', label: 'Label', type: 'text' },
];

/** The orders measured; `undefined` is the default order (by id). */
const KEYSET_ORDERS: Array<{ name: string; orderBy?: unknown }> = [
  { name: 'id (the default)' },
  { name: 'score asc (indexed number, 5% empty), id', orderBy: [{ field: 'score' }] },
  { name: 'score desc, id', orderBy: [{ field: 'score', order: 'desc' }] },
  { name: 'day desc (indexed date, ~370 rows a day), id', orderBy: [{ field: 'day', order: 'desc' }] },
];

const query = queryString;

async function gridRun(admin: HttpClient, member: HttpClient, databaseUrl: string, db: DbStats): Promise<GridResult> {
  const batch = await batchRun(admin, member, databaseUrl, db);
  const keyset = await keysetRun(admin, member, databaseUrl);
  return { batch, keyset };
}

// -----------------------------------------------------------------------------------------------
// Batches
// -----------------------------------------------------------------------------------------------

function batchBody(from: number): unknown {
  return {
    operations: Array.from({ length: BATCH_SIZE }, (_, j) => {
      const i = from + j;
      return {
        op: 'create',
        record: {
          title: `row ${i}`,
          qty: i % 1000,
          amount: (i % 100_000) / 100,
          active: i % 2 === 0,
          due: `2026-${String((i % 12) + 1).padStart(2, '0')}-${String((i % 28) + 1).padStart(2, '0')}`,
          status: ['open', 'won', 'lost'][i % 3],
        },
      };
    }),
  };
}

/** Creates BATCH_ROWS rows in `object` through batches sent by `clients` concurrent clients. */
async function createRows(member: HttpClient, object: string, clients: number): Promise<BatchRun> {
  const bodies = Array.from({ length: BATCH_ROWS / BATCH_SIZE }, (_, b) => batchBody(b * BATCH_SIZE));
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let b = next++; b < bodies.length; b = next++) {
        const sent = performance.now();
        const { results } = await member.json<{ results: Array<{ status: number }> }>({
          method: 'POST',
          path: `/api/v1/objects/${object}/records/batch`,
          body: bodies[b],
        });
        latencies.push(performance.now() - sent);
        if (results.length !== BATCH_SIZE || results.some((r) => r.status !== 201))
          throw new Error(`${object}: batch ${b} did not create ${BATCH_SIZE} records`);
      }
    }),
  );
  return { clients, wallMs: performance.now() - started, latencies: latencies.sort((a, b) => a - b) };
}

async function batchRun(admin: HttpClient, member: HttpClient, databaseUrl: string, db: DbStats): Promise<BatchResult> {
  const objects = ['grid_warmup', ...BATCH_CLIENTS.map((c) => `grid_batch_${c}`)];
  for (const name of objects) {
    await admin.json({ method: 'POST', path: '/api/v1/objects', body: { name, label: name, fields: BATCH_FIELDS } }, 201);
  }
  // Connections, caches and the JIT warmed up on an object of its own, not counted.
  await createRows(member, 'grid_warmup', 2);
  const runs: BatchRun[] = [];
  let statements: Awaited<ReturnType<DbStats['read']>> = [];
  for (const clients of BATCH_CLIENTS) {
    const object = `grid_batch_${clients}`;
    if (clients === 1) await db.reset();
    const run = await createRows(member, object, clients);
    if (clients === 1) statements = await db.read();
    const [{ rows, changes }] = await sql<{ rows: string; changes: string }>(
      databaseUrl,
      `select (select count(*) from "data"."${object}") as rows,
              (select count(*) from "record_changes" where "object" = $1 and "op" = 'create') as changes`,
      [object],
    );
    if (Number(rows) !== BATCH_ROWS || Number(changes) !== BATCH_ROWS)
      throw new Error(`${object}: ${rows} rows and ${changes} change events, expected ${BATCH_ROWS} of each`);
    log(
      `batches, ${clients} client(s): ${BATCH_ROWS} rows in ${run.wallMs.toFixed(0)} ms; per batch p50 ` +
        `${percentile(run.latencies, 50).toFixed(0)} ms, max ${run.latencies[run.latencies.length - 1].toFixed(0)} ms`,
    );
    runs.push(run);
  }
  const batches = BATCH_ROWS / BATCH_SIZE;
  return {
    runs,
    statementsPerBatch: statements.reduce((sum, s) => sum + s.calls, 0) / batches,
    dbMsPerBatch: statements.reduce((sum, s) => sum + s.totalMs, 0) / batches,
    top: [...statements]
      .sort((a, b) => b.totalMs - a.totalMs)
      .slice(0, 5)
      .map((s) => ({ query: s.query, perBatch: s.calls / batches, meanMs: s.totalMs / s.calls })),
  };
}

// -----------------------------------------------------------------------------------------------
// Keyset paging at depth
// -----------------------------------------------------------------------------------------------

interface RecordPage {
  records: Array<{ id: string }>;
  nextCursor: string | null;
}

async function keysetRun(admin: HttpClient, member: HttpClient, databaseUrl: string): Promise<GridResult['keyset']> {
  await admin.json(
    { method: 'POST', path: '/api/v1/objects', body: { name: 'grid_rows', label: 'Grid rows', fields: KEYSET_FIELDS } },
    201,
  );
  const started = performance.now();
  // Every 20th score empty; the days repeat (about 370 rows each), so the id tie-breaker matters.
  await sql(
    databaseUrl,
    `insert into "data"."grid_rows" ("n", "score", "day", "label")
     select g, case when g % 20 = 0 then null else ((g::bigint * 7919) % 1000003) / 7.0 end,
            date '2020-01-01' + (g % 3000), 'row ' || g
     from generate_series(1, ${KEYSET_ROWS}) g`,
  );
  await sql(databaseUrl, 'analyze "data"."grid_rows"');
  const fillMs = performance.now() - started;
  log(`filled grid_rows with ${KEYSET_ROWS} rows in ${fillMs.toFixed(0)} ms`);
  const object = await objectMeta(admin, 'grid_rows');
  const orders: KeysetOrderResult[] = [];
  for (const order of KEYSET_ORDERS) orders.push(await measureOrder(member, databaseUrl, object, order));
  return { rows: KEYSET_ROWS, fillMs, orders };
}

async function measureOrder(
  member: HttpClient,
  databaseUrl: string,
  object: ObjectMeta,
  order: { name: string; orderBy?: unknown },
): Promise<KeysetOrderResult> {
  const path = (params: Record<string, unknown>) =>
    `/api/v1/objects/grid_rows/records?${query({ orderBy: order.orderBy, ...params })}`;
  // To the depth by the API itself, in the largest pages it serves; only ids travel.
  let cursor: string | null = null;
  let walked = 0;
  let walkPages = 0;
  const walkStarted = performance.now();
  while (walked < DEPTH) {
    const page: RecordPage = await member.json<RecordPage>({
      method: 'GET',
      path: path({ fields: 'id', limit: Math.min(WALK_LIMIT, DEPTH - walked), cursor: cursor ?? undefined }),
    });
    walked += page.records.length;
    walkPages++;
    if (!page.nextCursor) throw new Error(`${order.name}: the pages ended at ${walked} rows`);
    cursor = page.nextCursor;
  }
  const walkMs = performance.now() - walkStarted;
  log(`${order.name}: depth ${walked} after ${walkPages} pages in ${(walkMs / 1000).toFixed(1)} s`);

  const keysetPath = path({ limit: PAGE_LIMIT, cursor });
  const offsetPath = path({ limit: PAGE_LIMIT, offset: DEPTH });
  const keysetPage = await member.json<RecordPage>({ method: 'GET', path: keysetPath });
  const offsetPage = await member.json<RecordPage>({ method: 'GET', path: offsetPath });
  const ids = (page: RecordPage) => page.records.map((r) => r.id).join();
  if (keysetPage.records.length !== PAGE_LIMIT || ids(keysetPage) !== ids(offsetPage))
    throw new Error(`${order.name}: the page after the cursor is not the page at offset ${DEPTH}`);

  for (let i = 0; i < 10; i++) await member.json({ method: 'GET', path: keysetPath });
  const keyset = await timeRuns(KEYSET_RUNS, async () => {
    await member.json({ method: 'GET', path: keysetPath });
  });
  const offset = await timeRuns(OFFSET_RUNS, async () => {
    await member.json({ method: 'GET', path: offsetPath });
  });
  log(
    `${order.name}: keyset p50 ${percentile(keyset, 50).toFixed(1)} ms, p95 ${percentile(keyset, 95).toFixed(1)} ms; ` +
      `offset p50 ${percentile(offset, 50).toFixed(0)} ms`,
  );

  // The statements the app runs for both pages, compiled by its own compiler, explained in the app's database.
  const terms = orderTerms(object, order.orderBy);
  const after = decodeCursor(cursor!, querySignature(object.name, undefined, terms), terms.length);
  const keysetPlan = await explain(
    databaseUrl,
    compileFind(object, { orderBy: order.orderBy, limit: PAGE_LIMIT, offset: 0 }, { terms, after, keys: true }),
  );
  const offsetPlan = await explain(
    databaseUrl,
    compileFind(object, { orderBy: order.orderBy, limit: PAGE_LIMIT, offset: DEPTH }, { terms, keys: true }),
  );
  log(`${order.name}: keyset plan ${keysetPlan.nodes.join(' / ')}; offset plan ${offsetPlan.nodes.join(' / ')}`);
  return { name: order.name, orderBy: order.orderBy, walkMs, walkPages, keyset, offset, keysetPlan, offsetPlan };
}

// -----------------------------------------------------------------------------------------------
// Goals and the section
// -----------------------------------------------------------------------------------------------

function gridGoals(r: GridResult): Goal[] {
  const sequential = r.batch.runs.find((run) => run.clients === 1)!;
  return [
    {
      name: `Batches: ${BATCH_ROWS.toLocaleString('en-US')} rows created through ${BATCH_ROWS / BATCH_SIZE} batches of ${BATCH_SIZE.toLocaleString('en-US')}, one client, wall time`,
      target: `<= ${BATCH_GOAL_MS / 1000} s`,
      measured: `${(sequential.wallMs / 1000).toFixed(2)} s`,
      met: sequential.wallMs <= BATCH_GOAL_MS,
    },
    ...r.keyset.orders.map((o) => {
      const p95 = percentile(o.keyset, 95);
      return {
        name: `Keyset: a page of ${PAGE_LIMIT} at depth ${DEPTH.toLocaleString('en-US')}, order by ${o.name}, p95`,
        target: `<= ${KEYSET_GOAL_MS} ms`,
        measured: `${p95.toFixed(1)} ms`,
        met: p95 <= KEYSET_GOAL_MS,
      };
    }),
  ];
}

function renderGrid(r: GridResult, run: { command: string; date: string; machine?: string }): string[] {
  const ms = (value: number, digits = 1) => value.toFixed(digits);
  const plan = (p: PlanSummary) =>
    `${p.nodes.join(', ')}; ${p.buffers.toLocaleString('en-US')} buffers, ` +
    `${p.rowsRemovedByFilter.toLocaleString('en-US')} rows removed by filter, ${ms(p.executionMs, 2)} ms`;
  const sqlText = (text: string) => text.replace(/\s+/g, ' ').slice(0, 110).replace(/\|/g, '\\|');
  return [
    GRID_START,
    '',
    '## Grid: batches of 1,000 and keyset pages at depth 1,000,000',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- Batches: ${BATCH_ROWS.toLocaleString('en-US')} rows of an object with 6 fields (text, integer, currency, ` +
      `boolean, date, an indexed select) created through ${BATCH_ROWS / BATCH_SIZE} \`POST .../records/batch\` ` +
      `requests of ${BATCH_SIZE.toLocaleString('en-US')} creates each, as a member key over HTTP, with the change ` +
      'feed on (every row also an outbox row, committed with it). Wall time from the first request sent to the last ' +
      'answer, with one client (the goal) and with several sending batches at once (each run on an empty object of ' +
      'its own, after a warm-up object of 10,000 rows).',
    `- Keyset: an object of ${r.keyset.rows.toLocaleString('en-US')} rows (filled by one SQL insert and analyzed, ` +
      `${ms(r.keyset.fillMs / 1000)} s), \`score\` (number) and \`day\` (date) marked \`indexed\`. For each order ` +
      `the cursor at depth ${DEPTH.toLocaleString('en-US')} is reached through the API (nextCursor of ` +
      `${WALK_LIMIT.toLocaleString('en-US')}-row pages, ids only), then the page of ${PAGE_LIMIT} after it is read ` +
      `${KEYSET_RUNS} times by one client (after 10 not counted), and the same page by \`offset=${DEPTH}\` ` +
      `${OFFSET_RUNS} times (offset is not capped; its answer also counts the total; the app's \`QUERY_TIMEOUT_MS\` ` +
      'is raised to 60 s for them, from the default 5 s). Both pages were checked to hold the same records. The ' +
      'plans are `EXPLAIN (ANALYZE, BUFFERS)` of the statements the app compiles for them, their nodes depth first.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...gridGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| batches: clients | 10,000 rows, wall time | rows/s | per batch p50 ms | p95 ms | max ms |',
    '|---|---|---|---|---|---|',
    ...r.batch.runs.map(
      (b) =>
        `| ${b.clients} | ${ms(b.wallMs / 1000, 2)} s | ${Math.round((BATCH_ROWS / b.wallMs) * 1000).toLocaleString('en-US')} | ` +
        `${ms(percentile(b.latencies, 50), 0)} | ${ms(percentile(b.latencies, 95), 0)} | ${ms(b.latencies[b.latencies.length - 1], 0)} |`,
    ),
    '',
    `PostgreSQL per batch (one client, pg_stat_statements): ${ms(r.batch.statementsPerBatch)} statements, ` +
      `${ms(r.batch.dbMsPerBatch)} ms of execution. The costliest:`,
    '',
    '| statement | per batch | mean ms |',
    '|---|---|---|',
    ...r.batch.top.map((s) => `| \`${sqlText(s.query)}\` | ${ms(s.perBatch)} | ${ms(s.meanMs, 2)} |`),
    '',
    '| keyset: order by | to depth 1,000,000 | keyset p50 ms | p95 ms | p99 ms | offset p50 ms | offset p95 ms |',
    '|---|---|---|---|---|---|---|',
    ...r.keyset.orders.map(
      (o) =>
        `| ${o.name} | ${o.walkPages} pages, ${ms(o.walkMs / 1000)} s | ${ms(percentile(o.keyset, 50))} | ` +
        `${ms(percentile(o.keyset, 95))} | ${ms(percentile(o.keyset, 99))} | ${ms(percentile(o.offset, 50), 0)} | ` +
        `${ms(percentile(o.offset, 95), 0)} |`,
    ),
    '',
    'Plans (the page after the cursor; the page at the offset):',
    '',
    ...r.keyset.orders.flatMap((o) => [`- ${o.name}: ${plan(o.keysetPlan)}.`, `  Offset: ${plan(o.offsetPlan)}.`]),
    '',
    GRID_END,
  ];
}

runSection({
  command: 'npm run bench:grid',
  title: 'grid',
  seed: false,
  memberSockets: Math.max(...BATCH_CLIENTS),
  markers: { start: GRID_START, end: GRID_END },
  statements: true,
  // The offset pages at depth 1,000,000 take seconds: compared, not cut off at the default 5 s.
  env: { QUERY_TIMEOUT_MS: '60000' },
  run: ({ admin, member, databaseUrl, db }) => gridRun(admin, member, databaseUrl, db!),
  render: renderGrid,
  goals: gridGoals,
});
