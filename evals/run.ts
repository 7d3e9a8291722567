/**
 * `npm run eval -- --base-url URL --model NAME [--agent data_chat] [--repeat N] [--api URL --api-key KEY
 * --database-url URL] [--now ISO] [--fail-under RATIO] [--cases id,kind,...] [--out DIR] [--baseline PATH]
 * [--save-baseline]`
 *
 * Without --api: starts an embedded Postgres in a temporary folder and the built app (dist) on it
 * with the sample data, pointed at the model; both are stopped and deleted at the end. With --api:
 * uses that server; --database-url is then its database, where the cases' SQL computes the expected
 * figures (read-only queries). Writes eval-report.json and eval-report.md, prints the summary and the
 * difference from the baseline; with --fail-under, exits 1 when the accuracy is below it (CI).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { projectRoot } from '../src/common/project-root';
import { startEmbeddedPostgres, type RunningPostgres } from '../src/database/embedded-postgres.launcher';
import { freePort } from '../test/support/free-port';
import { CRM_SAMPLE_REFERENCE_DATE } from '../src/seed/crm-sample.data';
import { loadSuite } from './eval-cases';
import { compareWithBaseline, renderMarkdown } from './eval-report';
import { evalDate, runEval, type EvalReport } from './eval-runner';

const USAGE =
  'usage: npm run eval -- --base-url URL --model NAME [--agent data_chat] [--repeat N] [--api URL --api-key KEY --database-url URL] [--now ISO] [--fail-under 0.8] [--cases ids-or-kinds] [--out DIR] [--baseline PATH] [--save-baseline]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      model: { type: 'string' },
      agent: { type: 'string', default: 'data_chat' },
      repeat: { type: 'string', default: '1' },
      api: { type: 'string' },
      'api-key': { type: 'string' },
      'database-url': { type: 'string' },
      now: { type: 'string', default: CRM_SAMPLE_REFERENCE_DATE },
      'fail-under': { type: 'string' },
      cases: { type: 'string' },
      out: { type: 'string', default: '.' },
      baseline: { type: 'string', default: join(projectRoot(), 'evals', 'baseline.json') },
      'save-baseline': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return console.log(USAGE);
  const model = values.model;
  const repeat = Number(values.repeat);
  if (!model || (!values.api && !values['base-url'])) throw new UsageError('--model and --base-url (or --api) are required');
  if (!Number.isInteger(repeat) || repeat < 1 || repeat > 100) throw new UsageError('--repeat must be 1..100');
  const failUnder = values['fail-under'] === undefined ? undefined : Number(values['fail-under']);
  if (failUnder !== undefined && !(failUnder >= 0 && failUnder <= 1)) throw new UsageError('--fail-under must be a ratio, 0..1');
  try {
    evalDate(values.now);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.api && (!values['api-key'] || !values['database-url'])) {
    throw new UsageError('--api needs --api-key and --database-url (the expected figures are computed by SQL on its database)');
  }
  const suite = await loadSuite();
  let cases = suite.cases;
  if (values.cases) {
    const wanted = new Set(values.cases.split(',').map((s) => s.trim()));
    cases = cases.filter((c) => wanted.has(c.id) || wanted.has(c.kind) || wanted.has(c.expects));
    if (!cases.length) throw new UsageError(`--cases ${values.cases} matches no case`);
  }
  const prices = JSON.parse(await readFile(join(projectRoot(), 'evals', 'prices.json'), 'utf8')) as {
    models: Record<string, { input: number; output: number }>;
  };

  const server = values.api
    ? { api: values.api, apiKey: values['api-key']!, databaseUrl: values['database-url']!, stop: () => Promise.resolve() }
    : await startServer(values['base-url']!, model);
  let report: EvalReport;
  try {
    console.log(
      `eval: ${cases.length} cases × ${repeat} on ${model} (agent ${values.agent}, today ${evalDate(values.now)}) via ${server.api}`,
    );
    report = await runEval({
      ...server,
      cases,
      member: suite.member,
      now: values.now,
      agent: values.agent,
      model,
      repeat,
      price: prices.models[model],
      onRun: (run, done, total) =>
        console.log(
          `[${String(done).padStart(String(total).length)}/${total}] ${run.passed ? 'pass' : 'FAIL'} ${run.id}` +
            `${repeat > 1 ? ` #${run.attempt}` : ''} · ${run.latencyMs < 1000 ? `${Math.round(run.latencyMs)} ms` : `${(run.latencyMs / 1000).toFixed(1)} s`} · ${run.toolCalls} tool calls` +
            (run.passed ? '' : ` · ${run.reasons.join('; ')}`),
        ),
    });
  } finally {
    await server.stop();
  }
  const out = resolve(values.out);
  await mkdir(out, { recursive: true });
  await writeFile(join(out, 'eval-report.json'), JSON.stringify(report, null, 2) + '\n');
  await writeFile(join(out, 'eval-report.md'), renderMarkdown(report));
  const s = report.summary;
  console.log(
    `\naccuracy ${(s.accuracy * 100).toFixed(1)}% (95% ${(s.accuracyInterval[0] * 100).toFixed(1)}–${(s.accuracyInterval[1] * 100).toFixed(1)}%) · pass^${s.repeat} ${(s.passK * 100).toFixed(1)}% · ${s.toolCalls} tool calls/run · ` +
      `${s.tokens} tokens/run · p50 ${s.latencyP50} ms · p95 ${s.latencyP95} ms · cost ${s.cost === null ? 'n/a' : `$${s.cost.toFixed(4)}`}` +
      (s.stepsWithoutUsage ? ` (${s.stepsWithoutUsage} model steps reported no usage: a floor)` : ''),
  );
  console.log(`wrote ${join(out, 'eval-report.json')} and ${join(out, 'eval-report.md')}`);
  if (existsSync(values.baseline)) {
    const baseline = JSON.parse(await readFile(values.baseline, 'utf8')) as EvalReport;
    console.log(compareWithBaseline(report, baseline).lines.join('\n'));
  } else {
    console.log(`no baseline at ${values.baseline} (--save-baseline stores this report there)`);
  }
  if (values['save-baseline']) {
    await copyFile(join(out, 'eval-report.json'), values.baseline);
    console.log(`saved as the baseline: ${values.baseline}`);
  }
  if (failUnder !== undefined && s.accuracy < failUnder) {
    console.error(`accuracy ${(s.accuracy * 100).toFixed(1)}% is below --fail-under ${failUnder}`);
    process.exitCode = 1;
  }
}

class UsageError extends Error {}

/** An embedded Postgres in a temporary folder and the built app on it (SEED=true), until stop(). */
async function startServer(
  baseUrl: string,
  model: string,
): Promise<{ api: string; apiKey: string; databaseUrl: string; stop(): Promise<void> }> {
  const main = join(projectRoot(), 'dist', 'src', 'main.js');
  if (!existsSync(main)) throw new UsageError('dist/src/main.js is missing: npm run build first (npm run eval does)');
  const dataDir = await mkdtemp(join(tmpdir(), 'data-copilot-eval-'));
  let postgres: RunningPostgres | undefined;
  let app: ChildProcess | undefined;
  const stop = async () => {
    if (app && app.exitCode === null) {
      const exited = new Promise((done) => app!.once('exit', done));
      app.kill('SIGTERM');
      await exited;
    }
    await postgres?.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    postgres = await startEmbeddedPostgres({ dataDir, port: await freePort() });
    const port = await freePort();
    const apiKey = `eval-${randomBytes(24).toString('hex')}`;
    app = spawn(process.execPath, ['--enable-source-maps', main], {
      env: {
        ...process.env,
        HOST: '127.0.0.1',
        PORT: String(port),
        DATA_DIR: dataDir,
        DATABASE_URL: postgres.url,
        SEED: 'true',
        PLAYGROUND: 'false',
        ADMIN_API_KEY: apiKey,
        OPENAI_BASE_URL: baseUrl,
        OPENAI_API_KEY: process.env.OPENAI_API_KEY ?? 'not-needed',
        LLM_MODEL: model,
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const api = `http://127.0.0.1:${port}`;
    await untilReady(api, app);
    return { api, apiKey, databaseUrl: postgres.url, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function untilReady(api: string, app: ChildProcess): Promise<void> {
  const until = Date.now() + 120_000;
  while (Date.now() < until) {
    if (app.exitCode !== null) throw new Error(`the app exited with code ${app.exitCode} while starting`);
    const ok = await fetch(`${api}/health/ready`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) return;
    await new Promise((done) => setTimeout(done, 250));
  }
  throw new Error('the app did not become ready within 120 s');
}

main().catch((error: unknown) => {
  console.error(error instanceof UsageError ? `${error.message}\n${USAGE}` : error);
  process.exit(error instanceof UsageError ? 2 : 1);
});
