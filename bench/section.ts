/**
 * One scenario of the benchmark on its own (`npm run bench:schemas`, `bench:mcp`, `bench:openai`): its
 * own embedded PostgreSQL, mock model server and application process, then its section of
 * BENCHMARKS.md replaced and the rest of the file left as the last `npm run bench` wrote it.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { arch, cpus, loadavg, platform, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../src/common/project-root';
import { startEmbeddedPostgres } from '../src/database/embedded-postgres.launcher';
import { freePort } from '../test/support/free-port';
import { MockLlmServer } from '../test/support/mock-llm.server';
import { AppProcess, benchAppEnv, DbStats, log, spliceSection, sql } from './harness';
import { HttpClient } from './load';
import type { Goal } from './results';

/** What a scenario gets to run against: the app, a member key with its client, the model server. */
export interface SectionContext {
  port: number;
  app: AppProcess;
  /** A member key's secret, and a keep-alive client that sends it. */
  secret: string;
  member: HttpClient;
  /** The admin key's client (to make more keys). */
  admin: HttpClient;
  llm: MockLlmServer;
  /** The app's database. */
  databaseUrl: string;
  /** pg_stat_statements of the app's database, when the spec asked for it. */
  db?: DbStats;
  /** Starts another app on the same database and settings from another build's bench/server.js (stopped at the end). */
  startOther: (serverJs: string) => Promise<{ app: AppProcess; port: number }>;
}

export interface SectionSpec<R> {
  /** The npm command, named in the section. */
  command: string;
  /** For the log line: "wrote the <title> section". */
  title: string;
  /** Load the sample CRM (the data_chat agent exists either way). */
  seed: boolean;
  /** Sockets of the member's client; its default when absent. */
  memberSockets?: number;
  /** The section's markers in BENCHMARKS.md; without them the section is only printed (a probe, not a result). */
  markers?: { start: string; end: string };
  /** Preload pg_stat_statements (one restart of PostgreSQL) and hand the scenario its reader. */
  statements?: boolean;
  /** Environment of the app beyond the bench's defaults. */
  env?: Record<string, string>;
  /** Options of the mock model server. */
  llm?: { keepRequests?: boolean };
  run(context: SectionContext): Promise<R>;
  render(result: R, meta: { command: string; date: string; machine: string }): string[];
  goals(result: R): Goal[];
}

/** Runs one scenario as described above; exits the process with 0, or 1 after logging a failure. */
export function runSection<R>(spec: SectionSpec<R>): void {
  runSectionOnce(spec).then(
    () => process.exit(0),
    (error: unknown) => {
      log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      process.exit(1);
    },
  );
}

async function runSectionOnce<R>(spec: SectionSpec<R>): Promise<void> {
  const loadBefore = loadavg();
  const root = await mkdtemp(join(tmpdir(), 'data-copilot-bench-'));
  // As root, Postgres runs as the `postgres` user, which must be able to pass through this folder.
  await chmod(root, 0o711);
  const cleanups: Array<() => Promise<void> | void> = [() => rm(root, { recursive: true, force: true })];
  const cleanup = async () => {
    for (const step of cleanups.splice(0).reverse()) {
      try {
        await step();
      } catch (error) {
        log(`cleanup: ${String(error)}`);
      }
    }
  };
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  try {
    const pgOptions = { dataDir: join(root, 'pg'), port: await freePort(), persistent: true };
    let postgres = await startEmbeddedPostgres(pgOptions);
    if (spec.statements) {
      // pg_stat_statements must be preloaded: set it, restart. The cluster is deleted with the temporary folder.
      await sql(postgres.url, "alter system set shared_preload_libraries = 'pg_stat_statements'");
      await postgres.stop();
      postgres = await startEmbeddedPostgres(pgOptions);
    }
    const running = postgres;
    cleanups.push(() => running.stop());
    await sql(postgres.url, 'create database bench_app');
    const databaseUrl = postgres.urlFor('bench_app');
    const [{ server_version: postgresVersion }] = await sql<{ server_version: string }>(databaseUrl, 'show server_version');
    const db = spec.statements ? await DbStats.open(databaseUrl, 'bench_app') : undefined;
    if (db) cleanups.push(() => db.close());
    const llm = await MockLlmServer.start(spec.llm);
    cleanups.push(() => llm.close());
    const adminKey = `bench-admin-${randomBytes(16).toString('hex')}`;
    const appEnv = (dataDir: string) =>
      benchAppEnv({ databaseUrl, dataDir: join(root, dataDir), adminKey, llmUrl: llm.url, seed: spec.seed }, spec.env);
    const app = AppProcess.start(appEnv('app-data'), join(root, 'app.log'));
    cleanups.push(() => app.kill());
    const ready = await app.ready();
    log(`app listening on 127.0.0.1:${ready.port} (pid ${app.pid}), PostgreSQL ${postgresVersion}`);
    const admin = new HttpClient(ready.port, { authorization: `Bearer ${adminKey}` });
    cleanups.push(() => admin.close());
    const { secret } = await admin.json<{ secret: string }>(
      { method: 'POST', path: '/api/v1/api-keys', body: { name: 'bench member', role: 'member' } },
      201,
    );
    const member = new HttpClient(ready.port, { authorization: `Bearer ${secret}` }, spec.memberSockets);
    cleanups.push(() => member.close());

    const startOther = async (serverJs: string) => {
      const other = AppProcess.start(appEnv('other-app-data'), join(root, 'other-app.log'), serverJs);
      cleanups.push(() => other.kill());
      const { port } = await other.ready();
      cleanups.push(async () => {
        await other.stop();
      });
      log(`other app (${serverJs}) listening on 127.0.0.1:${port} (pid ${other.pid})`);
      return { app: other, port };
    };
    const result = await spec.run({ port: ready.port, app, secret, member, admin, llm, databaseUrl, db, startOther });
    await app.stop();

    const load = (values: number[]) => values.map((l) => l.toFixed(2)).join(' / ');
    const machine =
      `${cpus().length} cores (${cpus()[0]?.model?.trim() ?? 'unknown CPU'}), ${(totalmem() / 1024 ** 3).toFixed(1)} GiB, ` +
      `${platform()} ${arch()}, Node ${process.version}, PostgreSQL ${postgresVersion}; load average (1/5/15 min) ` +
      `${load(loadBefore)} at the start, ${load(loadavg())} at the end`;
    const section = spec.render(result, { command: spec.command, date: new Date().toISOString(), machine }).join('\n');
    process.stdout.write(section + '\n');
    for (const goal of spec.goals(result))
      log(`${goal.met ? 'met' : 'NOT met'}: ${goal.name}: ${goal.measured} (${goal.target})`);
    if (spec.markers) {
      const file = join(projectRoot(), 'BENCHMARKS.md');
      const current = await readFile(file, 'utf8').catch(() => '# Benchmarks\n');
      await writeFile(file, spliceSection(current, section, spec.markers));
      log(`wrote the ${spec.title} section of ${file}`);
    }
  } finally {
    await cleanup();
  }
}
