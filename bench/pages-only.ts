/**
 * `npm run bench:pages`: a grid's requests on an object of 200,000 rows, 8 in flight, each next to
 * the floor of its own SQL: the statements the app runs for that request (compiled by its own
 * compilers, the same text and values) sent through `pg` by 8 clients, with no HTTP, no Nest and no
 * JSON in between, and the bare HTTP floor: the same statements behind a plain `node:http` server
 * (bench/pages-http-floor.ts). The three run in alternating rounds, so that whatever else the machine
 * does weighs on all alike. Replaces that section of BENCHMARKS.md.
 */
import { Client } from 'pg';
import { log, processCpuMs, sql } from './harness';
import { COUNT_CAP, LIMIT, pageCases, type PageCase, type Statement } from './pages-cases';
import { startHttpFloor, type HttpFloor } from './pages-http-floor';
import { createPagesObject, PAGES_OBJECT, PAGES_ROWS } from './pages-object';
import { HttpClient, percentile, runLoad } from './load';
import { explain, objectMeta, type PlanSummary } from './plans';
import type { Goal } from './results';
import { runSection } from './section';

const PAGES_START = '<!-- pages:start -->';
const PAGES_END = '<!-- pages:end -->';

interface CaseResult {
  name: string;
  description: string;
  statements: number;
  /** Sorted, ms: the app over HTTP, its SQL through `pg` alone, the same SQL behind a bare HTTP server. */
  http: number[];
  floor: number[];
  httpFloor: number[];
  /** CPU time per request of the app's process and of the bare HTTP floor's, ms (from /proc, over the timed rounds). */
  cpuPerRequest: { app: number; bare: number };
  httpErrors: number;
  plan?: PlanSummary;
}

interface PagesResult {
  rows: number;
  fillMs: number;
  cases: CaseResult[];
}

const OBJECT = PAGES_OBJECT;
const ROWS = PAGES_ROWS;
const IN_FLIGHT = 8;
/** Rounds of each case: the app over HTTP, its SQL alone, the bare HTTP floor, in turn. */
const ROUNDS = 5;
/** Most a case's p95 may be over the p95 of its own SQL. */
const RATIO_GOAL = 1.5;
/** The unfiltered first page sorted by an indexed field, p95 at 8 in flight. */
const FIRST_PAGE_GOAL_MS = 20;

async function pagesRun(admin: HttpClient, port: number, appPid: number, databaseUrl: string): Promise<PagesResult> {
  const fillMs = await createPagesObject(admin, databaseUrl);

  const object = await objectMeta(admin, OBJECT);
  const key = await admin.json<{ id: string; secret: string }>(
    { method: 'POST', path: '/api/v1/api-keys', body: { name: 'bench pages', role: 'member' } },
    201,
  );
  const member = new HttpClient(port, { authorization: `Bearer ${key.secret}` }, IN_FLIGHT);
  const clients = await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      const client = new Client({ connectionString: databaseUrl });
      await client.connect();
      return client;
    }),
  );
  try {
    const ids = (await sql<{ id: string }>(databaseUrl, `select id from "data"."${OBJECT}" order by random() limit 1000`)).map(
      (r) => r.id,
    );
    const floorServer = await startHttpFloor({ databaseUrl, object, ids, keyId: key.id, connections: IN_FLIGHT });
    try {
      const results: CaseResult[] = [];
      for (const [index, pageCase] of pageCases(object, ids, key.id).entries()) {
        results.push(await measure(pageCase, index, { member, pid: appPid }, clients, floorServer, databaseUrl));
      }
      return { rows: ROWS, fillMs, cases: results };
    } finally {
      await floorServer.close();
    }
  } finally {
    member.close();
    await Promise.all(clients.map((c) => c.end()));
  }
}

async function measure(
  pageCase: PageCase,
  index: number,
  app: { member: HttpClient; pid: number },
  clients: Client[],
  floorServer: HttpFloor,
  databaseUrl: string,
): Promise<CaseResult> {
  const { member } = app;
  const expectStatus = pageCase.status ?? 200;
  const cpu = { app: 0, bare: 0 };
  // Checked before timing: the answer, and that the app runs as many statements on the table as the floor.
  const first = await member.send(pageCase.request(0));
  if (first.status !== expectStatus || !pageCase.check(first))
    throw new Error(`pages: ${pageCase.name} answered ${first.status}: ${first.body.slice(0, 300)}`);
  const appStatements = await statementsOf(databaseUrl, () => member.send(pageCase.request(1)));
  const floorCount = pageCase.statements(1).length;
  if (appStatements !== floorCount)
    throw new Error(`pages: ${pageCase.name}: the app ran ${appStatements} statements on the table, the floor has ${floorCount}`);

  let next = 2;
  const http: number[] = [];
  const floor: number[] = [];
  const httpFloor: number[] = [];
  let httpErrors = 0;
  const floorLoad = (from: number, requests: number) =>
    runLoad({
      client: floorServer.client,
      requests,
      concurrency: IN_FLIGHT,
      make: (i) => floorServer.request(index, from + i, pageCase.request(from + i)),
      expectStatus,
    });
  // Warm-up, not counted.
  await runLoad({
    client: member,
    requests: IN_FLIGHT * 2,
    concurrency: IN_FLIGHT,
    make: (i) => pageCase.request(next + i),
    expectStatus,
  });
  await floorRun(clients, IN_FLIGHT * 2, (i) => pageCase.statements(next + i));
  await floorLoad(next, IN_FLIGHT * 2);
  next += IN_FLIGHT * 2;
  for (let round = 0; round < ROUNDS; round++) {
    const from = next;
    const appCpuBefore = processCpuMs(app.pid);
    const load = await runLoad({
      client: member,
      requests: pageCase.perRound,
      concurrency: IN_FLIGHT,
      make: (i) => pageCase.request(from + i),
      expectStatus,
      check: (res) => pageCase.check(res),
    });
    cpu.app += processCpuMs(app.pid) - appCpuBefore;
    if (load.errors) log(`pages: ${pageCase.name}: ${load.errors} errors, e.g. ${load.errorSamples[0]}`);
    httpErrors += load.errors;
    http.push(...load.latencies);
    next += pageCase.perRound;
    const base = next;
    floor.push(...(await floorRun(clients, pageCase.perRound, (i) => pageCase.statements(base + i))));
    next += pageCase.perRound;
    const bareCpuBefore = processCpuMs(floorServer.pid);
    const bare = await floorLoad(next, pageCase.perRound);
    cpu.bare += processCpuMs(floorServer.pid) - bareCpuBefore;
    if (bare.errors) throw new Error(`pages: ${pageCase.name}: the bare HTTP floor failed: ${bare.errorSamples[0]}`);
    httpFloor.push(...bare.latencies);
    next += pageCase.perRound;
  }
  http.sort((a, b) => a - b);
  floor.sort((a, b) => a - b);
  httpFloor.sort((a, b) => a - b);
  const plan = pageCase.plan ? await explain(databaseUrl, pageCase.plan) : undefined;
  log(
    `pages: ${pageCase.name}: p95 ${percentile(http, 95).toFixed(1)} ms over HTTP, ${percentile(floor, 95).toFixed(1)} ms ` +
      `its SQL (${floorCount} statement${floorCount > 1 ? 's' : ''}), ${percentile(httpFloor, 95).toFixed(1)} ms behind bare HTTP`,
  );
  return {
    name: pageCase.name,
    description: pageCase.description,
    statements: floorCount,
    http,
    floor,
    httpFloor,
    cpuPerRequest: { app: cpu.app / http.length, bare: cpu.bare / httpFloor.length },
    httpErrors,
    plan,
  };
}

/** Runs `requests` statement sequences on the clients, one sequence per client at a time; sorted ms of each. */
async function floorRun(clients: Client[], requests: number, statements: (i: number) => Statement[]): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    clients.map(async (client) => {
      for (let i = next++; i < requests; i = next++) {
        const started = process.hrtime.bigint();
        for (const statement of statements(i)) await client.query(statement.sql, [...statement.parameters]);
        latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
      }
    }),
  );
  return latencies;
}

/** Statements on the object's table (pg_stat_statements calls) while `work` runs. */
async function statementsOf(databaseUrl: string, work: () => Promise<unknown>): Promise<number> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('select pg_stat_statements_reset()');
    await work();
    const { rows } = await client.query<{ calls: string }>(
      `select coalesce(sum(s.calls), 0) as calls from pg_stat_statements s join pg_database d on d.oid = s.dbid
        where d.datname = current_database() and s.query like $1 and s.query not ilike '%pg_stat_statements%'`,
      [`%"data"."${OBJECT}"%`],
    );
    return Number(rows[0].calls);
  } finally {
    await client.end();
  }
}

// -----------------------------------------------------------------------------------------------
// Goals and the section
// -----------------------------------------------------------------------------------------------

function pagesGoals(r: PagesResult): Goal[] {
  const p95 = (values: number[]) => percentile(values, 95);
  const firstPage = r.cases.find((c) => c.name === 'first page, indexed order')!;
  return [
    {
      name: `Pages: the first page of ${LIMIT} sorted by an indexed field, no filter, p95 at ${IN_FLIGHT} in flight`,
      target: `<= ${FIRST_PAGE_GOAL_MS} ms`,
      measured: `${p95(firstPage.http).toFixed(1)} ms`,
      met: p95(firstPage.http) <= FIRST_PAGE_GOAL_MS,
    },
    ...r.cases.map((c) => {
      const ratio = p95(c.http) / p95(c.floor);
      return {
        name: `Pages: ${c.name}, p95 over HTTP against the p95 of its own SQL, ${IN_FLIGHT} in flight`,
        target: `<= ${RATIO_GOAL.toFixed(1)}x`,
        measured: `${ratio.toFixed(2)}x (${p95(c.http).toFixed(1)} ms vs ${p95(c.floor).toFixed(1)} ms)`,
        met: ratio <= RATIO_GOAL && c.httpErrors === 0,
      };
    }),
  ];
}

function renderPages(r: PagesResult, run: { command: string; date: string; machine?: string }): string[] {
  const ms = (value: number) => value.toFixed(1);
  const plan = (p: PlanSummary) =>
    `${p.nodes.join(', ')}; ${p.buffers.toLocaleString('en-US')} buffers, ${p.executionMs.toFixed(2)} ms alone`;
  return [
    PAGES_START,
    '',
    `## Grid pages: ${r.rows.toLocaleString('en-US')} rows, each request against the floor of its own SQL`,
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- An object of ${r.rows.toLocaleString('en-US')} deals (filled by one SQL insert, then \`vacuum analyze\`, ` +
      `${(r.fillMs / 1000).toFixed(1)} s): \`stage\`, \`amount\` and \`close_date\` marked \`indexed\` (B-tree on ` +
      '(field, id)), `weighted` not; 5% of amounts and weights empty.',
    `- Each case: ${IN_FLIGHT} requests in flight from one member key over HTTP (the app with \`DATA_POOL_KEY_SHARE=1\`, ` +
      `so that they get ${IN_FLIGHT} connections as the floor does), and its floor: the statements the app runs for ` +
      `that request, compiled by its own compilers with the same values, sent through \`pg\` by ${IN_FLIGHT} ` +
      'clients (a request = its statements in turn on one client). Before timing, the answer is checked and ' +
      'pg_stat_statements confirms the app runs that many statements on the table. Beside them, the bare HTTP floor: ' +
      'the same statements behind a plain `node:http` server in a process of its own (a `pg` pool of ' +
      `${IN_FLIGHT}, the rows sent back as JSON; no framework, auth, validation or row decoding), called as the app is. ` +
      `The three run in ${ROUNDS} alternating rounds after a warm-up. A page counts its total in its own statement (only when it came back ` +
      `full), up to \`RECORDS_COUNT_CAP\` (${COUNT_CAP.toLocaleString('en-US')}), then asks the planner (a filtered page ` +
      'in a second statement); the deep page, which shows more than the cap by itself, only asks the planner.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...pagesGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| case | request | statements | requests | HTTP p50 ms | p95 ms | p99 ms | SQL floor p50 ms | p95 ms | p99 ms | p95 over floor | bare HTTP floor p50 ms | p95 ms | bare HTTP p95 over SQL floor | app p95 over bare HTTP | CPU per request: app ms | bare HTTP ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...r.cases.map(
      (c) =>
        `| ${c.name} | ${c.description} | ${c.statements} | ${c.http.length} | ${ms(percentile(c.http, 50))} | ` +
        `${ms(percentile(c.http, 95))} | ${ms(percentile(c.http, 99))} | ${ms(percentile(c.floor, 50))} | ` +
        `${ms(percentile(c.floor, 95))} | ${ms(percentile(c.floor, 99))} | ` +
        `+${ms(percentile(c.http, 95) - percentile(c.floor, 95))} ms | ${ms(percentile(c.httpFloor, 50))} | ` +
        `${ms(percentile(c.httpFloor, 95))} | ${(percentile(c.httpFloor, 95) / percentile(c.floor, 95)).toFixed(2)}x | ` +
        `${(percentile(c.http, 95) / percentile(c.httpFloor, 95)).toFixed(2)}x | ${c.cpuPerRequest.app.toFixed(2)} | ` +
        `${c.cpuPerRequest.bare.toFixed(2)} |`,
    ),
    '',
    'Plans of the page statements (`EXPLAIN (ANALYZE, BUFFERS)` after the runs, nodes depth first):',
    '',
    ...r.cases.filter((c) => c.plan).map((c) => `- ${c.name}: ${plan(c.plan!)}.`),
    '',
    PAGES_END,
  ];
}

runSection({
  command: 'npm run bench:pages',
  title: 'pages',
  seed: false,
  markers: { start: PAGES_START, end: PAGES_END },
  statements: true,
  // One key's 8 requests get 8 connections, as the floor's 8 clients; a deep page is not cut off at 5 s.
  env: { DATA_POOL_KEY_SHARE: '1', QUERY_TIMEOUT_MS: '60000' },
  run: ({ admin, port, app, databaseUrl }) => pagesRun(admin, port, app.pid!, databaseUrl),
  render: renderPages,
  goals: pagesGoals,
});
