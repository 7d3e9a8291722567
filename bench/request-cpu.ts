/**
 * `npm run bench:request-cpu`: the app's own CPU per records request, on the object of `npm run bench:pages`.
 * For each case: requests at 8 in flight from one member key, and the CPU time of the app process (all its
 * threads, /proc/<pid>/stat) and of its main thread (/proc/<pid>/task/<pid>/schedstat) across them, per
 * request, less what it burns idle over the same time; the median of a few rounds. CPU per request hardly moves with the machine's load, where latency
 * does. Prints its table and writes nothing. REQUEST_CPU_CASES (names, separated by ';') picks cases,
 * REQUEST_CPU_SCALE multiplies the requests; BENCH_APP_EXEC_ARGV="--cpu-prof --cpu-prof-dir=..." profiles.
 */
import { readFileSync } from 'node:fs';
import { queryString } from './sample-requests';
import { log, sql } from './harness';
import { HttpRequest, HttpResponse, percentile, runLoad } from './load';
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
  // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  // schedstat: nanoseconds on the CPU.
  const main = Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  return { process: ticks * 10, main };
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

runSection<CpuResult[]>({
  command: 'npm run bench:request-cpu',
  title: 'request CPU',
  seed: false,
  env: { DATA_POOL_KEY_SHARE: '1', QUERY_TIMEOUT_MS: '60000' },
  memberSockets: IN_FLIGHT,
  run: async ({ admin, member, app, databaseUrl }) => {
    await createPagesObject(admin, databaseUrl);
    const pid = app.pid!;
    const ids = (
      await sql<{ id: string }>(databaseUrl, `select id from "data"."${PAGES_OBJECT}" order by random() limit 1000`)
    ).map((r) => r.id);
    const picked = process.env.REQUEST_CPU_CASES?.split(';').map((s) => s.trim());
    // What the app burns with no request (timers, workers' polls), per ms of wall time: taken off each round.
    const idleFrom = cpuOf(pid);
    const idleStarted = performance.now();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const idleWall = performance.now() - idleStarted;
    const idleTo = cpuOf(pid);
    const idle = { process: (idleTo.process - idleFrom.process) / idleWall, main: (idleTo.main - idleFrom.main) / idleWall };
    log(`idle: ${(idle.process * 1000).toFixed(1)} ms CPU per second (main thread ${(idle.main * 1000).toFixed(1)})`);
    const results: CpuResult[] = [];
    let next = 0;
    for (const c of cases(ids).filter((c) => !picked || picked.includes(c.name))) {
      const run = async (requests: number) => {
        const from = next;
        next += requests;
        const load = await runLoad({
          client: member,
          requests,
          concurrency: IN_FLIGHT,
          make: (i) => c.request(from + i),
          expectStatus: c.status ?? 200,
          check: (res) => c.check(res),
        });
        if (load.errors) throw new Error(`${c.name}: ${load.errors} errors, e.g. ${load.errorSamples[0]}`);
        return load;
      };
      // Warm-up: the JIT, the caches, the pool's connections.
      await run(Math.max(IN_FLIGHT * 4, c.requests / 2));
      const rounds: Array<{ process: number; main: number }> = [];
      const latencies: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const before = cpuOf(pid);
        const load = await run(c.requests);
        const after = cpuOf(pid);
        const busy = (from: number, to: number, idlePerMs: number) => (to - from - idlePerMs * load.wallMs) / c.requests;
        rounds.push({
          process: busy(before.process, after.process, idle.process),
          main: busy(before.main, after.main, idle.main),
        });
        latencies.push(...load.latencies);
      }
      latencies.sort((a, b) => a - b);
      const median = [...rounds].sort((a, b) => a.process - b.process)[Math.floor(ROUNDS / 2)];
      const result = {
        name: c.name,
        requests: c.requests,
        processMs: median.process,
        mainThreadMs: [...rounds].sort((a, b) => a.main - b.main)[Math.floor(ROUNDS / 2)].main,
        rounds: rounds.map((r) => r.process),
        p50: percentile(latencies, 50),
        p95: percentile(latencies, 95),
      };
      log(
        `${c.name}: ${result.processMs.toFixed(2)} ms CPU per request (main thread ${result.mainThreadMs.toFixed(2)}; ` +
          `rounds ${result.rounds.map((r) => r.toFixed(2)).join(', ')}), p50 ${result.p50.toFixed(1)} ms, p95 ${result.p95.toFixed(1)} ms`,
      );
      results.push(result);
    }
    return results;
  },
  render: (results, meta) => [
    `App CPU per request, ${IN_FLIGHT} in flight (${meta.command}, ${meta.date}; ${meta.machine})`,
    '',
    '| case | requests x rounds | process CPU ms / request | main thread | rounds | p50 ms | p95 ms |',
    '|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.name} | ${r.requests} x ${ROUNDS} | ${r.processMs.toFixed(2)} | ${r.mainThreadMs.toFixed(2)} | ` +
        `${r.rounds.map((x) => x.toFixed(2)).join(', ')} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} |`,
    ),
  ],
  goals: () => [],
});
