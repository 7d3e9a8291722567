/**
 * `npm run bench:request-cpu`: the app's own CPU per records request, on the object of `npm run bench:pages`.
 * For each case: requests at 8 in flight from one member key, and the CPU time of the app process (all its
 * threads, /proc/<pid>/stat) and of its main thread (/proc/<pid>/task/<pid>/schedstat) across them, per
 * request, less what it burns idle over the same time; the median of a few rounds. CPU per request hardly moves with the machine's load, where latency
 * does. Prints its table and writes nothing. REQUEST_CPU_CASES (names, separated by ';') picks cases,
 * REQUEST_CPU_SCALE multiplies the requests, REQUEST_CPU_COMPARE (another build's dist/bench/server.js) runs that
 * build too, on the same database, in alternate rounds; BENCH_APP_EXEC_ARGV="--cpu-prof --cpu-prof-dir=..." profiles.
 */
import { readFileSync } from 'node:fs';
import { queryString } from './sample-requests';
import { log, processCpuMs, sql } from './harness';
import { HttpClient, HttpRequest, HttpResponse, percentile, runLoad } from './load';
import { createPagesObject, PAGES_OBJECT, STAGES } from './pages-object';
import { runSection } from './section';

const IN_FLIGHT = 8;
const ROUNDS = 5;
/** How long the app's idle CPU is read before the cases. */
const IDLE_MS = 5000;
const LIMIT = 50;

interface CpuCase {
  name: string;
  requests: number;
  status?: number;
  request(i: number): HttpRequest;
  check(res: HttpResponse): boolean;
}

interface CpuResult {
  name: string;
  /** `this` build, or `other` (REQUEST_CPU_COMPARE). */
  build: string;
  requests: number;
  /** Per request, ms: the median round's. */
  processMs: number;
  mainThreadMs: number;
  rounds: number[];
  p50: number;
  p95: number;
}

/** CPU ms of the whole process (user + system, every thread) and of its main thread. */
function cpuOf(pid: number): { process: number; main: number } {
  // schedstat: nanoseconds on the CPU.
  const main = Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  return { process: processCpuMs(pid), main };
}

function cases(ids: string[]): CpuCase[] {
  const records = (params: Record<string, unknown>): HttpRequest => ({
    method: 'GET',
    path: `/api/v1/objects/${PAGES_OBJECT}/records?${queryString(params)}`,
  });
  const fullPage = (res: HttpResponse) => (JSON.parse(res.body) as { records: unknown[] }).records.length === LIMIT;
  const scale = Number(process.env.REQUEST_CPU_SCALE ?? 1);
  return [
    {
      name: 'first page, indexed order',
      requests: 1000 * scale,
      request: () => records({ orderBy: [{ field: 'amount', order: 'desc' }], limit: LIMIT }),
      check: fullPage,
    },
    {
      name: 'first page, unindexed order',
      requests: 80 * scale,
      request: () => records({ orderBy: [{ field: 'weighted', order: 'desc' }], limit: LIMIT }),
      check: fullPage,
    },
    {
      name: 'filtered page',
      requests: 200 * scale,
      request: () =>
        records({
          where: { stage: 'won', amount: { $gt: 50_000 } },
          orderBy: [{ field: 'close_date', order: 'desc' }],
          limit: LIMIT,
        }),
      check: fullPage,
    },
    {
      name: 'get by id',
      requests: 2000 * scale,
      request: (i) => ({ method: 'GET', path: `/api/v1/objects/${PAGES_OBJECT}/records/${ids[i % ids.length]}` }),
      check: (res) => (JSON.parse(res.body) as { id: string }).id.length === 36,
    },
    {
      name: 'single create',
      requests: 1000 * scale,
      status: 201,
      request: (i) => ({
        method: 'POST',
        path: `/api/v1/objects/${PAGES_OBJECT}/records`,
        body: { name: `new deal ${i}`, stage: STAGES[i % 5], amount: 1000 + i, close_date: '2026-12-01' },
      }),
      check: (res) => (JSON.parse(res.body) as { id: string }).id.length === 36,
    },
  ];
}

interface Target {
  build: string;
  client: HttpClient;
  pid: number;
  /** CPU ms per wall ms it burns idle. */
  idle: { process: number; main: number };
}

/** What an app burns with no request (timers, workers' polls), per ms of wall time: taken off each round. */
async function idleCpu(pid: number): Promise<{ process: number; main: number }> {
  const from = cpuOf(pid);
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
  const wall = performance.now() - started;
  const to = cpuOf(pid);
  return { process: (to.process - from.process) / wall, main: (to.main - from.main) / wall };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

runSection<CpuResult[]>({
  command: 'npm run bench:request-cpu',
  title: 'request CPU',
  seed: false,
  env: { DATA_POOL_KEY_SHARE: '1', QUERY_TIMEOUT_MS: '60000' },
  memberSockets: IN_FLIGHT,
  run: async ({ admin, member, secret, app, databaseUrl, startOther }) => {
    await createPagesObject(admin, databaseUrl);
    const ids = (
      await sql<{ id: string }>(databaseUrl, `select id from "data"."${PAGES_OBJECT}" order by random() limit 1000`)
    ).map((r) => r.id);
    const picked = process.env.REQUEST_CPU_CASES?.split(';').map((s) => s.trim());
    const targets: Target[] = [{ build: 'this', client: member, pid: app.pid!, idle: { process: 0, main: 0 } }];
    // REQUEST_CPU_COMPARE: another build's dist/bench/server.js, on the same database, its rounds alternating with these.
    const compare = process.env.REQUEST_CPU_COMPARE;
    if (compare) {
      const other = await startOther(compare);
      targets.push({
        build: 'other',
        client: new HttpClient(other.port, { authorization: `Bearer ${secret}` }, IN_FLIGHT),
        pid: other.app.pid!,
        idle: { process: 0, main: 0 },
      });
    }
    for (const target of targets) {
      target.idle = await idleCpu(target.pid);
      log(
        `idle (${target.build}): ${(target.idle.process * 1000).toFixed(1)} ms CPU per second (main thread ${(target.idle.main * 1000).toFixed(1)})`,
      );
    }
    const results: CpuResult[] = [];
    let next = 0;
    for (const c of cases(ids).filter((c) => !picked || picked.includes(c.name))) {
      const run = async (target: Target, requests: number) => {
        const from = next;
        next += requests;
        const load = await runLoad({
          client: target.client,
          requests,
          concurrency: IN_FLIGHT,
          make: (i) => c.request(from + i),
          expectStatus: c.status ?? 200,
          check: (res) => c.check(res),
        });
        if (load.errors) throw new Error(`${c.name} (${target.build}): ${load.errors} errors, e.g. ${load.errorSamples[0]}`);
        return load;
      };
      // Warm-up: the JIT, the caches, the pool's connections.
      for (const target of targets) await run(target, Math.max(IN_FLIGHT * 4, c.requests / 2));
      const rounds = targets.map(() => [] as Array<{ process: number; main: number }>);
      const latencies = targets.map(() => [] as number[]);
      for (let round = 0; round < ROUNDS; round++) {
        // Alternating which goes first, so that neither always follows the other.
        const order = targets.map((_, i) => i);
        if (round % 2) order.reverse();
        for (const i of order) {
          const target = targets[i];
          const before = cpuOf(target.pid);
          const load = await run(target, c.requests);
          const after = cpuOf(target.pid);
          const busy = (from: number, to: number, idlePerMs: number) => (to - from - idlePerMs * load.wallMs) / c.requests;
          rounds[i].push({
            process: busy(before.process, after.process, target.idle.process),
            main: busy(before.main, after.main, target.idle.main),
          });
          latencies[i].push(...load.latencies);
        }
      }
      targets.forEach((target, i) => {
        const sorted = latencies[i].sort((a, b) => a - b);
        const result: CpuResult = {
          name: c.name,
          build: target.build,
          requests: c.requests,
          processMs: median(rounds[i].map((r) => r.process)),
          mainThreadMs: median(rounds[i].map((r) => r.main)),
          rounds: rounds[i].map((r) => r.process),
          p50: percentile(sorted, 50),
          p95: percentile(sorted, 95),
        };
        log(
          `${c.name} (${target.build}): ${result.processMs.toFixed(2)} ms CPU per request (main thread ` +
            `${result.mainThreadMs.toFixed(2)}; rounds ${result.rounds.map((r) => r.toFixed(2)).join(', ')}), ` +
            `p50 ${result.p50.toFixed(1)} ms, p95 ${result.p95.toFixed(1)} ms`,
        );
        results.push(result);
      });
    }
    for (const target of targets.slice(1)) target.client.close();
    return results;
  },
  render: (results, meta) => [
    `App CPU per request, ${IN_FLIGHT} in flight (${meta.command}, ${meta.date}; ${meta.machine})`,
    '',
    '| case | build | requests x rounds | process CPU ms / request | main thread | rounds | p50 ms | p95 ms |',
    '|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.name} | ${r.build} | ${r.requests} x ${ROUNDS} | ${r.processMs.toFixed(2)} | ${r.mainThreadMs.toFixed(2)} | ` +
        `${r.rounds.map((x) => x.toFixed(2)).join(', ')} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} |`,
    ),
  ],
  goals: () => [],
});
