/**
 * `npm run bench`: starts an embedded PostgreSQL, the mock model server and the real application
 * (bench/server.ts, in a child process), measures bounded loads over loopback, writes BENCHMARKS.md
 * and prints it, then stops and deletes everything it started. Not part of `npm test`.
 */
import { dealPage, dealsByStage, fullDealPage, queryString } from './sample-requests';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { freePort } from '../test/support/free-port';
import { arch, cpus, loadavg, platform, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { projectRoot } from '../src/common/project-root';
import { RunningPostgres, startEmbeddedPostgres } from '../src/database/embedded-postgres.launcher';
import { DynamicStep, MockLlmServer, MockReply } from '../test/support/mock-llm.server';
import { HttpClient, HttpRequest, HttpResponse, LoadResult, percentile, runLoad, timeRuns } from './load';
import { clientSchemasRun } from './client-schemas';
import { mcpGoals, mcpRun } from './mcp';
import { rowFilterGoals, rowFilterRun } from './row-filter';
import { changeFeedGoals, changeFeedRun } from './change-feed';
import { openAiCompatGoals, openAiCompatRun } from './openai-compat';
import { BenchReport, clientSchemaGoals, renderReport, ScenarioResult, throughput, TimedStep } from './report';
import type { Goal, MemoryReading } from './results';
import { AppProcess, benchAppEnv, DbStats, log, sql } from './harness';
import type { StartupTimings } from './server';

const COMMAND = 'npm run bench';
const WARMUP_REQUESTS = 100;
const SCALE_ROWS = 200_000;
const SCALE_RUNS = 15;

// -----------------------------------------------------------------------------------------------
// Scenarios
// -----------------------------------------------------------------------------------------------

interface Scenario {
  name: string;
  description: string;
  /** Requests at concurrency 1 and at concurrency 8. */
  counts: [number, number];
  make: (i: number) => HttpRequest;
  check: (res: HttpResponse) => boolean;
  /** Called before each measured (or warm-up) run with its request count. */
  before?(requests: number): void;
  after?(): void;
}

const q = queryString;

function scenarios(llm: MockLlmServer): Scenario[] {
  const chatStep: DynamicStep = (request) => {
    const messages = (request.body?.messages ?? []) as Array<{ role?: string }>;
    if (messages.at(-1)?.role === 'tool') {
      return MockReply.text('The five largest won deals are listed above; the largest is worth 9,180,000 USD.');
    }
    return MockReply.toolCall('query_records', {
      objectName: 'deal',
      where: { stage: 'won' },
      fields: ['name', 'amount', 'close_date'],
      orderBy: [{ field: 'amount', order: 'desc' }],
      limit: 5,
    });
  };
  return [
    {
      name: 'records page',
      description: 'GET deal records: `stage $in [proposal, negotiation]`, `amount $gt`, orderBy amount desc, limit 50',
      counts: [500, 2000],
      make: dealPage,
      check: fullDealPage,
    },
    {
      name: 'deep page',
      description: 'GET deal records: orderBy close_date, limit 50, offset 1900 (of 2,000)',
      counts: [500, 2000],
      make: () => ({
        method: 'GET',
        path: '/api/v1/objects/deal/records?' + q({ orderBy: [{ field: 'close_date', order: 'asc' }], limit: 50, offset: 1900 }),
      }),
      check: (res) => {
        const body = JSON.parse(res.body) as { records: unknown[]; total: number };
        return body.records.length === 50 && body.total === 2000;
      },
    },
    {
      name: 'aggregate',
      description: 'POST deal aggregate: groupBy stage, count + sum(amount)',
      counts: [500, 2000],
      make: dealsByStage,
      check: (res) => (JSON.parse(res.body) as { rows: unknown[] }).rows.length === 6,
    },
    {
      name: 'tool execute',
      description: 'POST tools/query_records/execute: won deals, 3 fields, orderBy amount desc, limit 20',
      counts: [500, 2000],
      make: () => ({
        method: 'POST',
        path: '/api/v1/ai/tools/query_records/execute',
        body: {
          arguments: {
            objectName: 'deal',
            where: { stage: 'won' },
            fields: ['name', 'amount', 'close_date'],
            orderBy: [{ field: 'amount', order: 'desc' }],
            limit: 20,
          },
        },
      }),
      check: (res) => {
        const body = JSON.parse(res.body) as { isError: boolean; result: { count: number } };
        return !body.isError && body.result.count === 20;
      },
    },
    {
      name: 'agent chat',
      description: 'POST agents/data_chat/chat: model → query_records → model (mock model, no delay)',
      counts: [200, 800],
      make: () => ({
        method: 'POST',
        path: '/api/v1/ai/agents/data_chat/chat',
        body: { messages: [{ role: 'user', content: 'Which won deals are the largest?' }] },
      }),
      check: (res) => {
        const body = JSON.parse(res.body) as {
          finishReason: string;
          toolCalls: Array<{ isError: boolean; result: { count: number } }>;
        };
        return (
          body.finishReason === 'stop' &&
          body.toolCalls.length === 1 &&
          !body.toolCalls[0].isError &&
          body.toolCalls[0].result.count === 5
        );
      },
      before: (requests) => {
        llm.reset();
        for (let i = 0; i < requests * 2; i++) llm.enqueue(chatStep);
      },
      after: () => {
        if (llm.pendingSteps !== 0) throw new Error(`mock model: ${llm.pendingSteps} scripted steps left unused`);
        llm.reset();
      },
    },
  ];
}

async function runScenario(client: HttpClient, s: Scenario, db: DbStats): Promise<ScenarioResult> {
  const runs: LoadResult[] = [];
  const measure = async (requests: number, concurrency: number) => {
    s.before?.(requests);
    const result = await runLoad({ client, requests, concurrency, make: s.make, check: s.check });
    s.after?.();
    return result;
  };
  const warmup = await measure(WARMUP_REQUESTS, 8);
  if (warmup.errors) throw new Error(`${s.name}: warm-up failed: ${warmup.errorSamples.join('\n')}`);
  let database: ScenarioResult['database'];
  for (const [index, concurrency] of [1, 8].entries()) {
    if (concurrency === 1) await db.reset();
    const result = await measure(s.counts[index], concurrency);
    if (concurrency === 1) {
      const statements = await db.read();
      const perRequest = (n: number) => n / result.requests;
      database = {
        statementsPerRequest: perRequest(statements.reduce((sum, st) => sum + st.calls, 0)),
        dbMsPerRequest: perRequest(statements.reduce((sum, st) => sum + st.totalMs, 0)),
        top: statements
          .slice(0, 8)
          .map((st) => ({ query: st.query, perRequest: perRequest(st.calls), meanMs: st.totalMs / st.calls })),
      };
      log(
        `${s.name}: ${database.statementsPerRequest.toFixed(1)} statements and ${database.dbMsPerRequest.toFixed(2)} ms of execution in PostgreSQL per request`,
      );
    }
    const l = result.latencies;
    log(
      `${s.name} c=${concurrency}: ${result.requests} req, ${result.errors} errors, p50 ${percentile(l, 50).toFixed(2)} ms, ` +
        `p95 ${percentile(l, 95).toFixed(2)} ms, p99 ${percentile(l, 99).toFixed(2)} ms, ${throughput(result).toFixed(0)} req/s`,
    );
    for (const sample of result.errorSamples) log(`  error: ${sample}`);
    runs.push(result);
  }
  return { name: s.name, description: s.description, runs, database };
}

// -----------------------------------------------------------------------------------------------
// Data engine at scale
// -----------------------------------------------------------------------------------------------

async function scaleRun(admin: HttpClient, member: HttpClient, databaseUrl: string): Promise<BenchReport['scale']> {
  await admin.json(
    {
      method: 'POST',
      path: '/api/v1/objects',
      body: {
        name: 'bench_event',
        label: 'Bench event',
        description: 'Synthetic rows for the data-engine benchmark',
        fields: [
          {
            name: 'category',
            label: 'Category',
            type: 'select',
            options: Array.from({ length: 10 }, (_, i) => `c${i}`),
            indexed: true,
          },
          { name: 'region', label: 'Region', type: 'select', options: ['emea', 'amer', 'apac'] },
          { name: 'amount', label: 'Amount', type: 'currency' },
          { name: 'quantity', label: 'Quantity', type: 'integer' },
          { name: 'happened_on', label: 'Happened on', type: 'date' },
        ],
      },
    },
    201,
  );
  let started = performance.now();
  await sql(
    databaseUrl,
    `insert into "data"."bench_event" ("category", "region", "amount", "quantity", "happened_on")
     select 'c' || (g % 10), (array['emea', 'amer', 'apac'])[1 + g % 3], ((g::bigint * 7919) % 100000) / 100.0,
            1 + (g * 31) % 50, date '2024-01-01' + (g % 730)
     from generate_series(1, $1::int) as g`,
    [SCALE_ROWS],
  );
  const insertMs = performance.now() - started;
  started = performance.now();
  await sql(databaseUrl, 'analyze "data"."bench_event"');
  const analyzeMs = performance.now() - started;
  log(`scale: inserted ${SCALE_ROWS} rows in ${insertMs.toFixed(0)} ms, analyze ${analyzeMs.toFixed(0)} ms`);

  const [expected] = await sql<{ n: string; groups: string; total: string }>(
    databaseUrl,
    `select (select count(*) from "data"."bench_event" where "category" = 'c3' and "amount" > 500) as n,
            (select count(distinct "category") from "data"."bench_event") as groups,
            (select sum("amount") from "data"."bench_event") as total`,
  );
  const filter = { category: 'c3', amount: { $gt: 500 } };
  const steps: Array<{ name: string; description: string; request: HttpRequest; check(body: unknown): boolean }> = [
    {
      name: 'aggregate, all rows',
      description: 'POST aggregate: groupBy category, count + sum(amount) + avg(quantity)',
      request: {
        method: 'POST',
        path: '/api/v1/objects/bench_event/aggregate',
        body: {
          groupBy: ['category'],
          aggregations: [
            { function: 'count', alias: 'n' },
            { function: 'sum', field: 'amount', alias: 'total' },
            { function: 'avg', field: 'quantity', alias: 'avg_quantity' },
          ],
        },
      },
      check: (body: { rows: Array<{ n: number; total: number }> }) =>
        body.rows.length === Number(expected.groups) &&
        body.rows.reduce((sum, r) => sum + r.n, 0) === SCALE_ROWS &&
        Math.abs(body.rows.reduce((sum, r) => sum + r.total, 0) - Number(expected.total)) < 1,
    },
    {
      name: 'filtered count',
      description: 'POST aggregate: count where category = c3 and amount > 500',
      request: {
        method: 'POST',
        path: '/api/v1/objects/bench_event/aggregate',
        body: { where: filter, aggregations: [{ function: 'count', alias: 'n' }] },
      },
      check: (body: { rows: Array<{ n: number }> }) => body.rows[0]?.n === Number(expected.n),
    },
    {
      name: 'filtered page with total',
      description: 'GET records: same filter, orderBy amount desc, limit 50, its total counted (10,000: up to the cap)',
      request: {
        method: 'GET',
        path:
          '/api/v1/objects/bench_event/records?' + q({ where: filter, orderBy: [{ field: 'amount', order: 'desc' }], limit: 50 }),
      },
      check: (body: { records: unknown[]; total: number }) => body.records.length === 50 && body.total === Number(expected.n),
    },
  ];
  const timed: TimedStep[] = [];
  for (const step of steps) {
    for (let i = 0; i < 3; i++) {
      const body = await member.json(step.request);
      if (!step.check(body))
        throw new Error(`scale: ${step.name} returned a wrong result: ${JSON.stringify(body).slice(0, 500)}`);
    }
    const durations = await timeRuns(SCALE_RUNS, async () => {
      await member.json(step.request);
    });
    log(`scale: ${step.name}: p50 ${percentile(durations, 50).toFixed(1)} ms, p95 ${percentile(durations, 95).toFixed(1)} ms`);
    timed.push({ name: step.name, description: step.description, durations });
  }
  return { rows: SCALE_ROWS, insertMs, analyzeMs, steps: timed };
}

// -----------------------------------------------------------------------------------------------
// Goals
// -----------------------------------------------------------------------------------------------

function goals(report: Omit<BenchReport, 'goals'>): Goal[] {
  const run = (name: string, concurrency: number) =>
    report.scenarios.find((s) => s.name === name)?.runs.find((r) => r.concurrency === concurrency);
  const p95 = (name: string, concurrency: number) => percentile(run(name, concurrency)?.latencies ?? [], 95);
  const step = (name: string) => percentile(report.scale.steps.find((s) => s.name === name)?.durations ?? [], 95);
  const latencyGoal = (label: string, value: number, limit: number): Goal => ({
    name: label,
    target: `< ${limit} ms`,
    measured: `${value.toFixed(1)} ms`,
    met: value < limit,
  });
  const records8 = run('records page', 8);
  const afterLoad = report.memory.find((m) => m.label.startsWith('after the HTTP load'));
  const peakRss = Math.max(...report.memory.map((m) => m.rss));
  const liveGrowth = report.memory.length ? report.memory[report.memory.length - 1].liveHeap - report.memory[0].liveHeap : 0;
  const errors = report.scenarios.reduce((sum, s) => sum + s.runs.reduce((n, r) => n + r.errors, 0), 0);
  const initNoSeed = report.startup.initToListenMs - report.startup.seedMs;
  return [
    latencyGoal('records page (50 deals, filtered + sorted), p95 at 8 in flight', p95('records page', 8), 50),
    {
      name: 'records page throughput at 8 in flight',
      target: '>= 200 req/s',
      measured: records8 ? `${throughput(records8).toFixed(0)} req/s` : 'n/a',
      met: records8 ? throughput(records8) >= 200 : false,
    },
    latencyGoal('deep page (offset 1900), p95 at 8 in flight', p95('deep page', 8), 100),
    latencyGoal('aggregate over 2,000 deals, p95 at 8 in flight', p95('aggregate', 8), 50),
    latencyGoal('tool execute query_records, p95 at 8 in flight', p95('tool execute', 8), 50),
    latencyGoal('agent chat overhead (one tool round, model time excluded), p95 at 8 in flight', p95('agent chat', 8), 100),
    latencyGoal(`aggregate over ${report.scale.rows.toLocaleString('en-US')} rows, p95`, step('aggregate, all rows'), 500),
    latencyGoal(`filtered count over ${report.scale.rows.toLocaleString('en-US')} rows, p95`, step('filtered count'), 500),
    {
      name: 'app start on an empty database (createApp + migrations → listening, seeding excluded)',
      target: '< 5000 ms',
      measured: `${initNoSeed.toFixed(0)} ms`,
      met: initNoSeed < 5000,
    },
    {
      name: 'sample-data seeding',
      target: '< 15000 ms',
      measured: `${report.startup.seedMs.toFixed(0)} ms`,
      met: report.startup.seedMs < 15000,
    },
    {
      name: 'live JS heap after the HTTP load (after a full GC)',
      target: '< 150 MB',
      measured: afterLoad ? `${(afterLoad.liveHeap / 1024 / 1024).toFixed(0)} MB` : 'n/a',
      met: afterLoad ? afterLoad.liveHeap < 150 * 1024 * 1024 : false,
    },
    {
      name: 'live JS heap growth across all load (leak check: last reading minus first)',
      target: '< 25 MB',
      measured: `${(liveGrowth / 1024 / 1024).toFixed(1)} MB`,
      met: liveGrowth < 25 * 1024 * 1024,
    },
    {
      name: 'RSS of the app process, highest reading',
      target: '< 600 MB',
      measured: `${(peakRss / 1024 / 1024).toFixed(0)} MB`,
      met: peakRss < 600 * 1024 * 1024,
    },
    { name: 'failed requests in all HTTP scenarios', target: '0', measured: String(errors), met: errors === 0 },
    {
      name: `durable chats: all ${report.durable.chats} answered, each with exactly 4 messages`,
      target: `${report.durable.chats} / ${report.durable.chats * 4}`,
      measured: `${report.durable.completed} / ${report.durable.messages}`,
      met:
        report.durable.errors === 0 &&
        report.durable.completed === report.durable.chats &&
        report.durable.messages === report.durable.chats * 4,
    },
    {
      name: 'durable chat throughput (one replica, 4 chats at a time, one tool round each)',
      target: '>= 30 chats/s',
      measured: `${(report.durable.chats / (report.durable.wallMs / 1000)).toFixed(1)} chats/s`,
      met: report.durable.chats / (report.durable.wallMs / 1000) >= 30,
    },
    latencyGoal(
      'durable chat, POST to answered, p95 (200 chats from 16 clients, queueing included)',
      percentile(report.durable.durations, 95),
      2000,
    ),
    fairnessGoal(report.fairness),
    ...(report.clientSchemas ? clientSchemaGoals(report.clientSchemas) : []),
    ...(report.mcp ? mcpGoals(report.mcp) : []),
    ...(report.rowFilter ? rowFilterGoals(report.rowFilter) : []),
    ...(report.changeFeed ? changeFeedGoals(report.changeFeed) : []),
    ...(report.openaiCompat ? openAiCompatGoals(report.openaiCompat) : []),
  ];
}

/** Another key's slowest turn during the flood against twice its idle median. */
function fairnessGoal(f: BenchReport['fairness']): Goal {
  const idle = percentile(f.idle, 50);
  const worst = Math.max(...f.during);
  return {
    name: `another key's turn while one key floods ${f.flood} chats: slowest of ${f.during.length}, against its idle median`,
    target: `<= 2x (${(2 * idle).toFixed(0)} ms)`,
    measured: `${worst.toFixed(0)} ms (${(worst / idle).toFixed(2)}x)`,
    met: f.errors === 0 && worst <= 2 * idle,
  };
}

// -----------------------------------------------------------------------------------------------
// Main
// -----------------------------------------------------------------------------------------------

const DURABLE_CHATS = 200;
const DURABLE_CREATORS = 16;

/** The model of the durable-chat runs: calls query_records once, then answers; each call after `delayMs()` ms. */
function oneToolRound(delayMs: () => number = () => 0): DynamicStep {
  return (request) =>
    ((request.body?.messages ?? []) as Array<{ role?: string }>).at(-1)?.role === 'tool'
      ? MockReply.text('Done.', { delayMs: delayMs() })
      : MockReply.toolCall(
          'query_records',
          { objectName: 'deal', where: { stage: 'won' }, fields: ['name', 'amount'], limit: 5 },
          { delayMs: delayMs() },
        );
}

/** Delays spread evenly over [min, max] ms, from a fixed seed: the same draws every run. */
function seededDelays([min, max]: readonly [number, number]): () => number {
  let state = 20261123;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return min + Math.round((state / 2 ** 31) * (max - min));
  };
}

/**
 * One durable-chat turn as a client sees it: POST a chat, then poll its status every 20 ms until it
 * is answered. Returns ms from the POST to `waiting`; throws on error or after 60 s.
 */
async function chatTurn(client: HttpClient, message: string): Promise<number> {
  const begin = performance.now();
  const chat = await client.json<{ id: string }>(
    { method: 'POST', path: '/api/v1/chats', body: { agent: 'data_chat', message } },
    201,
  );
  for (;;) {
    const { status } = await client.json<{ status: string }>({ method: 'GET', path: `/api/v1/chats/${chat.id}` });
    if (status === 'waiting') return performance.now() - begin;
    if (status === 'error') throw new Error('chat ended in error');
    if (performance.now() - begin > 60_000) throw new Error('chat did not finish within 60 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Durable chats end to end: `DURABLE_CHATS` chats created by 16 concurrent clients, each run by the
 * worker (model → query_records → model), measured from the POST to the chat reaching `waiting`.
 * Status is polled every 20 ms, which adds a little load of its own.
 */
async function durableRun(member: HttpClient, llm: MockLlmServer, databaseUrl: string): Promise<BenchReport['durable']> {
  llm.reset();
  for (let i = 0; i < DURABLE_CHATS * 2; i++) llm.enqueue(oneToolRound());
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < DURABLE_CHATS) {
      next++;
      try {
        latencies.push(await chatTurn(member, 'Largest won deals?'));
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: DURABLE_CREATORS }, worker));
  const wallMs = performance.now() - started;
  const [{ n, messages }] = await sql<{ n: string; messages: string }>(
    databaseUrl,
    `select count(distinct c.id) as n, count(m.id) as messages from chats c join chat_messages m on m.chat_id = c.id where c.status = 'waiting'`,
  );
  llm.reset();
  return {
    chats: DURABLE_CHATS,
    creators: DURABLE_CREATORS,
    wallMs,
    errors,
    completed: Number(n),
    messages: Number(messages),
    durations: latencies.sort((a, b) => a - b),
  };
}

const FAIRNESS_FLOOD = 150;
const FAIRNESS_TURNS = 8;
/**
 * Model latency per call. It varies, as a real model's does: with one fixed delay the flooding key's
 * chats, started together, would also end together, and free the worker's slots only in bursts.
 */
const FAIRNESS_MODEL_DELAY_MS = [200, 400] as const;

/**
 * Fairness across keys: a second key's turn latency alone, then while a first key has
 * `FAIRNESS_FLOOD` chats queued. The model answers each call after `FAIRNESS_MODEL_DELAY_MS`, so a
 * turn (two model calls) takes what a fast real model would; the worker runs 4 chats at a time.
 */
async function fairnessRun(
  admin: HttpClient,
  port: number,
  llm: MockLlmServer,
  databaseUrl: string,
): Promise<BenchReport['fairness']> {
  const member = async (name: string) => {
    const key = await admin.json<{ secret: string; subject: string }>(
      { method: 'POST', path: '/api/v1/api-keys', body: { name, role: 'member' } },
      201,
    );
    return { client: new HttpClient(port, { authorization: `Bearer ${key.secret}` }, 16), subject: key.subject };
  };
  const flooder = await member('bench flooder');
  const other = await member('bench other key');
  const backlogOf = async () =>
    Number(
      (
        await sql<{ n: string }>(
          databaseUrl,
          `select count(*) as n from chats where owner = $1 and status in ('pending', 'running')`,
          [flooder.subject],
        )
      )[0].n,
    );
  llm.reset();
  const delays = seededDelays(FAIRNESS_MODEL_DELAY_MS);
  for (let i = 0; i < (FAIRNESS_FLOOD + 2 * FAIRNESS_TURNS) * 2; i++) llm.enqueue(oneToolRound(delays));
  let errors = 0;
  try {
    const idle: number[] = [];
    for (let i = 0; i < FAIRNESS_TURNS; i++) idle.push(await chatTurn(other.client, 'Largest won deals?'));

    const floodStarted = performance.now();
    let next = 0;
    const post = async () => {
      while (next < FAIRNESS_FLOOD) {
        next++;
        const res = await flooder.client.send({
          method: 'POST',
          path: '/api/v1/chats',
          body: { agent: 'data_chat', message: 'Largest won deals?' },
        });
        if (res.status !== 201) errors++;
      }
    };
    await Promise.all(Array.from({ length: 16 }, post));
    const floodPostedMs = performance.now() - floodStarted;
    const during: number[] = [];
    const backlog: number[] = [await backlogOf()];
    for (let i = 0; i < FAIRNESS_TURNS; i++) {
      try {
        during.push(await chatTurn(other.client, 'Largest won deals?'));
      } catch {
        errors++;
      }
      backlog.push(await backlogOf());
    }
    while ((await backlogOf()) > 0) {
      if (performance.now() - floodStarted > 300_000) throw new Error('fairness: the flood did not drain within 300 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const drainMs = performance.now() - floodStarted;
    const [{ failed }] = await sql<{ failed: string }>(
      databaseUrl,
      `select count(*) as failed from chats where status = 'error'`,
    );
    errors += Number(failed);
    return {
      flood: FAIRNESS_FLOOD,
      turns: FAIRNESS_TURNS,
      modelDelayMs: [...FAIRNESS_MODEL_DELAY_MS],
      idle: idle.sort((a, b) => a - b),
      during,
      backlog,
      floodPostedMs,
      drainMs,
      errors,
    };
  } finally {
    flooder.client.close();
    other.client.close();
    llm.reset();
  }
}

async function main(): Promise<void> {
  const benchStarted = performance.now();
  const loadBefore = loadavg();
  const root = await mkdtemp(join(tmpdir(), 'data-copilot-bench-'));
  // As root, Postgres runs as the `postgres` user, which must be able to pass through this folder.
  await chmod(root, 0o711);
  const cleanups: Array<() => Promise<void> | void> = [() => rm(root, { recursive: true, force: true })];
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const step of cleanups.reverse()) {
        try {
          await step();
        } catch (error) {
          log(`cleanup: ${String(error)}`);
        }
      }
    })());
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    log(`temporary folder ${root}`);
    const started = performance.now();
    const pgOptions = { dataDir: join(root, 'pg'), port: await freePort(), persistent: true };
    const first = await startEmbeddedPostgres(pgOptions);
    const postgresStartMs = performance.now() - started;
    // pg_stat_statements must be preloaded: set it, restart. The cluster is deleted with the temporary folder.
    await sql(first.url, "alter system set shared_preload_libraries = 'pg_stat_statements'");
    await first.stop();
    const postgres: RunningPostgres = await startEmbeddedPostgres(pgOptions);
    cleanups.push(() => postgres.stop());
    await sql(postgres.url, 'create database bench_app');
    const databaseUrl = postgres.urlFor('bench_app');
    const [{ server_version: postgresVersion }] = await sql<{ server_version: string }>(databaseUrl, 'show server_version');
    log(`PostgreSQL ${postgresVersion} started in ${postgresStartMs.toFixed(0)} ms`);

    const db = await DbStats.open(databaseUrl, 'bench_app');
    cleanups.push(() => db.close());
    const llm = await MockLlmServer.start();
    cleanups.push(() => llm.close());

    const adminKey = `bench-admin-${randomBytes(16).toString('hex')}`;
    const app = AppProcess.start(
      benchAppEnv(
        { databaseUrl, dataDir: join(root, 'app-data'), adminKey, llmUrl: llm.url, seed: true },
        // The fairness run queues 150 chats of one key at once: above the default cap of 32 in flight. The durable
        // and fairness runs look at queueing for the worker's slots, so they keep the 4 slots they were designed
        // with (the default is 2000: `npm run bench:scale` measures that).
        { CHAT_MAX_IN_FLIGHT_PER_KEY: String(FAIRNESS_FLOOD + 10), CHAT_WORKER_CONCURRENCY: '4' },
      ),
      join(root, 'app.log'),
    );
    cleanups.push(() => app.kill());
    const ready = await app.ready();
    const startup: StartupTimings = ready.timings;
    log(
      `app listening on 127.0.0.1:${ready.port} (pid ${app.pid}): create ${startup.createMs.toFixed(0)} ms, ` +
        `migrations ${startup.migrationsMs.toFixed(0)} ms, seeding ${startup.seedMs.toFixed(0)} ms`,
    );

    const admin = new HttpClient(ready.port, { authorization: `Bearer ${adminKey}` });
    cleanups.push(() => admin.close());
    const { secret } = await admin.json<{ secret: string }>(
      { method: 'POST', path: '/api/v1/api-keys', body: { name: 'bench member', role: 'member' } },
      201,
    );
    const member = new HttpClient(ready.port, { authorization: `Bearer ${secret}` }, 16);
    cleanups.push(() => member.close());

    const memory: MemoryReading[] = [];
    memory.push(await app.memory('after start and seeding, before any load'));
    const results: ScenarioResult[] = [];
    for (const scenario of scenarios(llm)) results.push(await runScenario(member, scenario, db));
    const mcp = await mcpRun(ready.port, secret, member);
    const openaiCompat = await openAiCompatRun(ready.port, secret, member, llm);
    memory.push(await app.memory('after the HTTP load (all scenarios above)'));
    const durable = await durableRun(member, llm, databaseUrl);
    log(`durable chats: ${durable.completed}/${durable.chats} in ${durable.wallMs.toFixed(0)} ms`);
    const fairness = await fairnessRun(admin, ready.port, llm, databaseUrl);
    log(
      `fairness: other key's turn idle p50 ${percentile(fairness.idle, 50).toFixed(0)} ms; during a ${fairness.flood}-chat flood ` +
        `p50 ${percentile(
          [...fairness.during].sort((a, b) => a - b),
          50,
        ).toFixed(0)} ms, max ${Math.max(...fairness.during).toFixed(0)} ms; ` +
        `flood drained in ${fairness.drainMs.toFixed(0)} ms`,
    );
    const clientSchemas = await clientSchemasRun(member, app, llm);
    const scale = await scaleRun(admin, member, databaseUrl);
    const rowFilter = await rowFilterRun(admin, ready.port, databaseUrl);
    const changeFeed = await changeFeedRun({ admin, member, secret, llm, databaseUrl });
    memory.push(await app.memory(`after the ${SCALE_ROWS.toLocaleString('en-US')}-row run`));

    admin.close();
    member.close();
    const shutdownMs = await app.stop();

    const notes: string[] = [
      `Load average of the machine when the run started (1/5/15 min): ${loadBefore.map((l) => l.toFixed(2)).join(' / ')}; ` +
        `when it ended: ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' / ')}. Other work on the machine shows up in every figure.`,
    ];
    const errors = results.flatMap((s) => s.runs.flatMap((r) => r.errorSamples.map((e) => `${s.name} c=${r.concurrency}: ${e}`)));
    notes.push(...errors.slice(0, 10).map((e) => `error sample: \`${e.replace(/\|/g, '\\|').replace(/`/g, "'")}\``));
    const partial: Omit<BenchReport, 'goals'> = {
      command: COMMAND,
      date: new Date().toISOString(),
      machine: {
        cores: cpus().length,
        cpuModel: cpus()[0]?.model?.trim() ?? 'unknown CPU',
        totalMemoryBytes: totalmem(),
        node: process.version,
        platform: `${platform()} ${arch()}`,
        postgres: postgresVersion,
      },
      totalSeconds: 0,
      postgresStartMs,
      startup,
      shutdownMs,
      scenarios: results,
      memory,
      scale,
      durable,
      fairness,
      clientSchemas,
      mcp,
      openaiCompat,
      rowFilter,
      changeFeed,
      notes,
    };
    await cleanup();
    partial.totalSeconds = (performance.now() - benchStarted) / 1000;
    const report: BenchReport = { ...partial, goals: goals(partial) };
    const file = join(projectRoot(), 'BENCHMARKS.md');
    // bench:scale's section (and the notes written by hand under it) is not this run's: kept as it was.
    // Sections only their own commands write (bench:scale, bench:transfer, ...) are not this run's:
    // kept as they were, with any notes written by hand under them.
    const markdown = withSectionsKept(renderReport(report), await readFile(file, 'utf8').catch(() => ''));
    await writeFile(file, markdown);
    process.stdout.write(markdown + '\n');
    log(`wrote ${file}`);
  } finally {
    await cleanup();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);

/**
 * `rendered` with every marked section of `previous` that it lacks (`<!-- name: start ... -->` up to the
 * next section or the run's notes, hand-written notes under it included), before the run's notes.
 */
function withSectionsKept(rendered: string, previous: string): string {
  let markdown = rendered;
  for (const match of previous.matchAll(/^<!-- [a-z-]+: ?start[^\n]*-->$/gm)) {
    if (rendered.includes(match[0])) continue;
    const start = match.index;
    // Up to the next section's start (not this one's end marker) or the run's notes.
    const following = /\n<!-- [a-z-]+: ?start/g;
    following.lastIndex = start + match[0].length;
    const next = [following.exec(previous)?.index ?? -1, previous.indexOf('\n## Notes from this run', start)].filter(
      (at) => at >= 0,
    );
    const block = previous.slice(start, next.length ? Math.min(...next) : previous.length).trimEnd();
    const notes = markdown.indexOf('## Notes from this run');
    markdown =
      notes >= 0 ? `${markdown.slice(0, notes)}${block}\n\n${markdown.slice(notes)}` : `${markdown.trimEnd()}\n\n${block}\n`;
  }
  return markdown;
}
