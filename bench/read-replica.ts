/**
 * `npm run bench:replica`: the app with a streaming read replica (DATABASE_READ_URL), both servers the
 * embedded PostgreSQL on this machine. A member key reads (records pages, aggregates, a data tool) at 8
 * in flight while another key edits deals and reads each one back at once; pg_stat_statements on each
 * server counts the data engine's statements it ran. Replaces its section of BENCHMARKS.md.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { arch, cpus, loadavg, platform, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { projectRoot } from '../src/common/project-root';
import { startStreamingReplica, StreamingReplica } from '../test/support/streaming-replica';
import { AppProcess, benchAppEnv, log, spliceSection } from './harness';
import { HttpClient, percentile, runInterleaved, type InterleavedRoute, type LoadResult } from './load';
import type { Goal } from './results';
import { dealPage, dealsByStage, fullDealPage } from './sample-requests';

export const REPLICA_START = '<!-- read-replica:start -->';
export const REPLICA_END = '<!-- read-replica:end -->';

/** Requests of the reading key (after the warm-up), and how many it has in flight. */
const READS = 3_000;
const IN_FLIGHT = 8;
const GOAL_SHARE = 0.8;

type Server = 'primary' | 'replica';

interface Statements {
  reads: number;
  writes: number;
}

interface ReplicaResult {
  routes: Array<{ name: string; run: LoadResult }>;
  edits: number;
  /** Edits whose read right after did not show the edit. */
  staleReadsOfOwnWrites: number;
  editErrors: number;
  statements: Record<Server, Statements>;
  fallbacks: Record<string, number>;
  /** The app's lag gauge at the end, seconds. */
  lagSeconds: number;
}

const ROUTES: Array<{ name: string; route: InterleavedRoute }> = [
  {
    name: 'records page: deals `stage $in [proposal, negotiation]`, `amount $gt`, orderBy amount desc, limit 50',
    route: {
      make: dealPage,
      check: fullDealPage,
    },
  },
  {
    name: 'aggregate: deals by stage, count + sum(amount)',
    route: {
      make: dealsByStage,
    },
  },
  {
    name: 'tool execute: query_records, won deals, limit 20',
    route: {
      make: () => ({
        method: 'POST',
        path: '/api/v1/ai/tools/query_records/execute',
        body: { arguments: { objectName: 'deal', where: { stage: 'won' }, fields: ['name', 'amount'], limit: 20 } },
      }),
      check: (res) => !(JSON.parse(res.body) as { isError: boolean }).isError,
    },
  },
];

async function main(): Promise<void> {
  const loadBefore = loadavg();
  const root = await mkdtemp(join(tmpdir(), 'data-copilot-bench-replica-'));
  const cleanups: Array<() => Promise<void> | void> = [() => rm(root, { recursive: true, force: true })];
  const cleanup = async () => {
    for (const step of cleanups.splice(0).reverse())
      await Promise.resolve(step()).catch((e: unknown) => log(`cleanup: ${String(e)}`));
  };
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  try {
    const pair = await startStreamingReplica({ settings: { shared_preload_libraries: 'pg_stat_statements' } });
    cleanups.push(() => pair.stop());
    await pair.sql('primary', 'create database bench_app');
    await pair.sql('primary', 'create extension pg_stat_statements', [], 'bench_app');
    await pair.caughtUp();
    const [{ server_version: version }] = await pair.sql<{ server_version: string }>('primary', 'show server_version');

    const adminKey = `bench-admin-${randomBytes(16).toString('hex')}`;
    const app = AppProcess.start(
      benchAppEnv(
        // No model call is made here.
        {
          databaseUrl: pair.primary.urlFor('bench_app'),
          dataDir: join(root, 'app'),
          adminKey,
          llmUrl: 'http://127.0.0.1:9/v1',
          seed: true,
        },
        { DATABASE_READ_URL: pair.replica.urlFor('bench_app') },
      ),
      join(root, 'app.log'),
    );
    cleanups.push(() => app.kill());
    const { port } = await app.ready();
    log(`app listening on 127.0.0.1:${port}, PostgreSQL ${version}, a primary and a streaming replica`);
    const admin = new HttpClient(port, { authorization: `Bearer ${adminKey}` });
    cleanups.push(() => admin.close());
    const memberClient = async (name: string) => {
      const { secret } = await admin.json<{ secret: string }>(
        { method: 'POST', path: '/api/v1/api-keys', body: { name, role: 'member' } },
        201,
      );
      const client = new HttpClient(port, { authorization: `Bearer ${secret}` });
      cleanups.push(() => client.close());
      return client;
    };
    const reader = await memberClient('bench reader');
    const writer = await memberClient('bench writer');

    // An app replica reads on the primary for a few seconds after it starts (see ReadReplica.start).
    const deadline = Date.now() + 30_000;
    for (;;) {
      await resetStatements(pair);
      await reader.json(ROUTES[0].route.make(0));
      if ((await statements(pair, 'replica')).reads > 0) break;
      if (Date.now() > deadline) throw new Error('the replica never served a read');
      await sleep(250);
    }
    log('warm-up');
    await runInterleaved(
      reader,
      300,
      IN_FLIGHT,
      ROUTES.map((r) => r.route),
    );
    const deals = (
      await reader.json<{ records: Array<{ id: string }> }>({
        method: 'GET',
        path: '/api/v1/objects/deal/records?fields=id&limit=200',
      })
    ).records.map((r) => r.id);

    await resetStatements(pair);
    log(`${READS} reads at ${IN_FLIGHT} in flight, edits and their reads alongside`);
    let reading = true;
    let edits = 0;
    let staleReadsOfOwnWrites = 0;
    let editErrors = 0;
    const editing = (async () => {
      while (reading) {
        const id = deals[edits % deals.length];
        const amount = 50_000 + edits;
        edits++;
        try {
          await writer.json({ method: 'PATCH', path: `/api/v1/objects/deal/records/${id}`, body: { amount } });
          const record = await writer.json<{ amount: number }>({ method: 'GET', path: `/api/v1/objects/deal/records/${id}` });
          if (record.amount !== amount) staleReadsOfOwnWrites++;
        } catch (error) {
          editErrors++;
          log(`edit failed: ${String(error)}`);
        }
        await sleep(5);
      }
    })();
    const runs = await runInterleaved(
      reader,
      READS,
      IN_FLIGHT,
      ROUTES.map((r) => r.route),
    );
    reading = false;
    await editing;
    const counted = { primary: await statements(pair, 'primary'), replica: await statements(pair, 'replica') };
    const metrics = await admin.send({ method: 'GET', path: '/metrics' });
    const fallbacks: Record<string, number> = {};
    for (const match of metrics.body.matchAll(/^datacopilot_db_read_fallbacks_total\{reason="(\w+)"\} (\S+)$/gm)) {
      fallbacks[match[1]] = Number(match[2]);
    }
    const lag = /^datacopilot_db_read_replica_lag_seconds (\S+)$/m.exec(metrics.body);
    await app.stop();

    const result: ReplicaResult = {
      routes: ROUTES.map((r, i) => ({ name: r.name, run: runs[i] })),
      edits,
      staleReadsOfOwnWrites,
      editErrors,
      statements: counted,
      fallbacks,
      lagSeconds: lag ? Number(lag[1]) : NaN,
    };
    const load = (values: number[]) => values.map((l) => l.toFixed(2)).join(' / ');
    const machine =
      `${cpus().length} cores (${cpus()[0]?.model?.trim() ?? 'unknown CPU'}), ${(totalmem() / 1024 ** 3).toFixed(1)} GiB, ` +
      `${platform()} ${arch()}, Node ${process.version}, PostgreSQL ${version} (both servers); load average (1/5/15 min) ` +
      `${load(loadBefore)} at the start, ${load(loadavg())} at the end`;
    const section = renderReadReplica(result, { command: 'npm run bench:replica', date: new Date().toISOString(), machine });
    const file = join(projectRoot(), 'BENCHMARKS.md');
    const current = await readFile(file, 'utf8').catch(() => '# Benchmarks\n');
    await writeFile(file, spliceSection(current, section.join('\n'), { start: REPLICA_START, end: REPLICA_END }));
    process.stdout.write(section.join('\n') + '\n');
    for (const goal of readReplicaGoals(result))
      log(`${goal.met ? 'met' : 'NOT met'}: ${goal.name}: ${goal.measured} (${goal.target})`);
    log(`wrote the read replica section of ${file}`);
  } finally {
    await cleanup();
  }
}

async function resetStatements(pair: StreamingReplica): Promise<void> {
  for (const server of ['primary', 'replica'] as const)
    await pair.sql(server, 'select pg_stat_statements_reset()', [], 'bench_app');
}

/** The data engine's statements on one server since the last reset: those on the object tables, reads and writes. */
async function statements(pair: StreamingReplica, server: Server): Promise<Statements> {
  const rows = await pair.sql<{ query: string; calls: string }>(
    server,
    `select s.query, s.calls from pg_stat_statements s join pg_database d on d.oid = s.dbid
      where d.datname = 'bench_app' and s.query like '%"data".%'`,
    [],
    'bench_app',
  );
  const counted: Statements = { reads: 0, writes: 0 };
  for (const row of rows) counted[/\b(insert|update|delete)\b/i.test(row.query) ? 'writes' : 'reads'] += Number(row.calls);
  return counted;
}

function replicaShare(r: ReplicaResult): number {
  const { primary, replica } = r.statements;
  return replica.reads / (replica.reads + primary.reads);
}

export function readReplicaGoals(r: ReplicaResult): Goal[] {
  const share = replicaShare(r);
  const failed = r.routes.reduce((sum, route) => sum + route.run.errors, 0) + r.editErrors;
  return [
    {
      name: "Read replica: share of the data engine's reads it served (one key reading, another editing and reading back)",
      target: `>= ${GOAL_SHARE * 100}%`,
      measured: `${(share * 100).toFixed(1)}%`,
      met: share >= GOAL_SHARE,
    },
    {
      name: 'Read replica: edits read back at once by their key that showed the edit',
      target: 'all',
      measured: `${r.edits - r.staleReadsOfOwnWrites} of ${r.edits}`,
      met: r.staleReadsOfOwnWrites === 0,
    },
    { name: 'Read replica: failed requests', target: '0', measured: String(failed), met: failed === 0 },
  ];
}

export function renderReadReplica(r: ReplicaResult, run: { command: string; date: string; machine: string }): string[] {
  const ms = (value: number) => value.toFixed(1);
  const fallbacks = Object.entries(r.fallbacks)
    .map(([reason, count]) => `${reason} ${count}`)
    .join(', ');
  return [
    REPLICA_START,
    '',
    '## Reads on a streaming read replica',
    '',
    `- Run: \`${run.command}\`, ${run.date}; ${run.machine}`,
    '- A primary and a hot standby streaming from it (both the embedded PostgreSQL, on this machine), the app with',
    '  `DATABASE_READ_URL` on the standby and the default `READ_MAX_LAG_MS` (2000), the sample CRM. One member key',
    `  sends ${READS} reads at ${IN_FLIGHT} in flight (the three requests below in turn, after 300 not counted); meanwhile another`,
    '  member key edits a deal and reads it back at once, one edit after the other. `pg_stat_statements` on each server',
    "  counts the statements on the object tables (the data engine's); the lag checks and the ORM's statements are apart.",
    '- Both servers, the app and this load share the machine: the times below say what the reads cost here, not what a',
    '  replica on its own machine adds (the point is where the reads ran, and that none failed or read a stale own write).',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...readReplicaGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| server | data reads | data writes |',
    '|---|---|---|',
    `| primary | ${r.statements.primary.reads} | ${r.statements.primary.writes} |`,
    `| replica | ${r.statements.replica.reads} | ${r.statements.replica.writes} |`,
    '',
    '| reads of the first key | requests | errors | p50 ms | p95 ms | req/s |',
    '|---|---|---|---|---|---|',
    ...r.routes.map(
      ({ name, run: x }) =>
        `| ${name} | ${x.requests} | ${x.errors} | ${ms(percentile(x.latencies, 50))} | ${ms(percentile(x.latencies, 95))} | ${(x.requests / (x.wallMs / 1000)).toFixed(0)} |`,
    ),
    '',
    `Edits with their read-back: ${r.edits} (errors: ${r.editErrors}); each read-back ran on the primary (the key wrote` +
      ` within the read-your-writes window). Fallbacks to the primary (\`datacopilot_db_read_fallbacks_total\`): ${fallbacks || 'none'};` +
      ` replica lag at the end: ${Number.isNaN(r.lagSeconds) ? 'unknown' : `${(r.lagSeconds * 1000).toFixed(0)} ms`}.`,
    '',
    REPLICA_END,
  ];
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
