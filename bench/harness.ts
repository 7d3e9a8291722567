/**
 * What the benchmark entry points share: the log, one-off SQL, and the application in a child
 * process (bench/server.ts) driven over IPC, with its memory read after a forced GC.
 */
import { ChildProcess, fork } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import type { MemoryReading } from './results';
import type { ChildMessage, ParentMessage } from './server';

export function log(message: string): void {
  process.stderr.write(`[bench ${(performance.now() / 1000).toFixed(1)}s] ${message}\n`);
}

export { sql } from '../test/support/pg-query';

/** The application process, driven over IPC. */
export class AppProcess {
  private readonly waiting: Array<{ type: ChildMessage['type']; resolve: (m: ChildMessage) => void }> = [];
  private exited = false;
  private failure?: string;

  private constructor(
    private readonly child: ChildProcess,
    private readonly logFile: string,
  ) {
    child.on('message', (message: ChildMessage) => {
      if (message.type === 'failed') this.failure = message.error;
      const index = this.waiting.findIndex((w) => w.type === message.type);
      if (index >= 0) this.waiting.splice(index, 1)[0].resolve(message);
    });
    child.on('exit', (code) => {
      this.exited = true;
      for (const w of this.waiting.splice(0)) {
        w.resolve({
          type: 'failed',
          error: this.failure ?? `app process exited with code ${code}; log tail:\n${this.logTail()}`,
        });
      }
    });
  }

  /** `serverJs`: another build's bench/server.js (to compare two builds on one database), else this one's. */
  static start(env: Record<string, string>, logFile: string, serverJs = join(__dirname, 'server.js')): AppProcess {
    const fd = openSync(logFile, 'a');
    try {
      const child = fork(serverJs, [], {
        // The flags of `npm start`, so the figures are those of the process users run; BENCH_APP_EXEC_ARGV adds
        // node flags for the app process only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
        execArgv: [...startFlags(), '--expose-gc', ...(process.env.BENCH_APP_EXEC_ARGV ?? '').split(' ').filter(Boolean)],
        env: { PATH: process.env.PATH ?? '', ...passedThrough(), ...env },
        stdio: ['ignore', fd, fd, 'ipc'],
      });
      return new AppProcess(child, logFile);
    } finally {
      closeSync(fd);
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  private request<T extends ChildMessage['type']>(type: T, message?: ParentMessage): Promise<Extract<ChildMessage, { type: T }>> {
    if (this.exited) return Promise.reject(new Error(this.failure ?? 'app process is not running'));
    return new Promise((resolve, reject) => {
      this.waiting.push({
        type,
        resolve: (m) =>
          m.type === 'failed'
            ? reject(new Error(`app process failed: ${m.error}`))
            : resolve(m as Extract<ChildMessage, { type: T }>),
      });
      if (message) this.child.send(message);
    });
  }

  ready() {
    return this.request('ready');
  }

  async memory(label: string): Promise<MemoryReading> {
    const { memory, liveHeap, rssAfterGc } = await this.request('memory', { type: 'memory' });
    return {
      label,
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      heapTotal: memory.heapTotal,
      external: memory.external,
      liveHeap,
      rssAfterGc,
    };
  }

  async stop(): Promise<number | undefined> {
    if (this.exited) return undefined;
    const stopped = await this.request('stopped', { type: 'stop' }).catch(() => undefined);
    await this.waitForExit(10_000);
    return stopped?.closeMs;
  }

  /** Last resort: the process by its own id, never by name. */
  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL');
  }

  private waitForExit(timeoutMs: number): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.kill();
        resolve();
      }, timeoutMs);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  logTail(): string {
    try {
      return readFileSync(this.logFile, 'utf8').split('\n').slice(-20).join('\n');
    } catch {
      return '(no log)';
    }
  }
}

/** The app's environment in every bench: loopback on a random port, the mock model without retries, JSON logs at info. */
export function benchAppEnv(
  app: { databaseUrl: string; dataDir: string; adminKey: string; llmUrl: string; seed: boolean },
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: app.databaseUrl,
    DATA_DIR: app.dataDir,
    ADMIN_API_KEY: app.adminKey,
    OPENAI_BASE_URL: app.llmUrl,
    OPENAI_API_KEY: 'sk-bench',
    LLM_MODEL: 'mock-model',
    LLM_MAX_RETRIES: '0',
    SEED: String(app.seed),
    LOG_LEVEL: 'info',
    // The benchmark measures throughput, not the per-key request limit.
    RATE_LIMIT_PER_MINUTE: '0',
    ...extra,
  };
}

/** The markers of the section `npm run bench:scale` writes (its own entry point; the full bench keeps it). */
export const SCALE_START = '<!-- scale: start (written by npm run bench:scale) -->';
export const SCALE_END = '<!-- scale: end -->';

/**
 * `markdown` with the section between `start` and `end` (markers included in `section`) replaced; a
 * file without it gets it before the notes of the last run, or at the end.
 */
export function spliceSection(markdown: string, section: string, markers: { start: string; end: string }): string {
  const start = markdown.indexOf(markers.start);
  const end = markdown.indexOf(markers.end);
  if (start >= 0 && end > start) return markdown.slice(0, start) + section + markdown.slice(end + markers.end.length);
  const notes = markdown.indexOf('## Notes from this run');
  if (notes >= 0) return `${markdown.slice(0, notes)}${section}\n\n${markdown.slice(notes)}`;
  return `${markdown.trimEnd()}\n\n${section}\n`;
}

/**
 * Settings from the bench's environment that reach the app process when set: BENCH_HEAP_SAMPLING_DIR (see
 * bench/server.ts) and MALLOC_ARENA_MAX (glibc's cap on malloc arenas, to try its effect on the resident set).
 */
function passedThrough(): Record<string, string> {
  const passed: Record<string, string> = {};
  for (const name of ['BENCH_HEAP_SAMPLING_DIR', 'MALLOC_ARENA_MAX']) {
    const value = process.env[name];
    if (value) passed[name] = value;
  }
  return passed;
}

/** The node flags of package.json's `start` script (`--enable-source-maps`, the young-generation size, ...). */
function startFlags(): string[] {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { scripts: { start: string } };
  return pkg.scripts.start.split(/\s+/).filter((token) => token.startsWith('--'));
}

/**
 * Statement counts and execution time in PostgreSQL (pg_stat_statements, loaded by the bench's own
 * cluster), to show how much of a request is database work and how many round trips it makes.
 */
export class DbStats {
  private constructor(
    private readonly client: Client,
    private readonly database: string,
  ) {}

  static async open(url: string, database: string): Promise<DbStats> {
    const client = new Client({ connectionString: url });
    await client.connect();
    await client.query('create extension if not exists pg_stat_statements');
    return new DbStats(client, database);
  }

  async reset(): Promise<void> {
    await this.client.query('select pg_stat_statements_reset()');
  }

  /** Statements of the app's database since the last reset, most called first (our own queries left out). */
  async read(): Promise<Array<{ query: string; calls: number; totalMs: number }>> {
    const { rows } = await this.client.query<{ query: string; calls: string; total_ms: number }>(
      `select s.query, s.calls, s.total_exec_time::float8 as total_ms
         from pg_stat_statements s join pg_database d on d.oid = s.dbid
        where d.datname = $1 and s.query not ilike '%pg_stat_statements%'
        order by s.calls desc, s.total_exec_time desc`,
      [this.database],
    );
    return rows.map((r) => ({ query: r.query, calls: Number(r.calls), totalMs: r.total_ms }));
  }

  close(): Promise<void> {
    return this.client.end();
  }
}

/** CPU time (user + system, every thread) a process has used so far, in ms, from /proc/<pid>/stat (Linux). */
export function processCpuMs(pid: number, task?: string): number {
  const stat = readFileSync(task ? `/proc/${pid}/task/${task}/stat` : `/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, so cut at its last closing parenthesis): utime, stime 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100; // USER_HZ, 100 on Linux x86 and arm
  return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1000;
}

/** CPU time V8's helper threads (named V8Worker: concurrent marking, parallel scavenges) have used so far, in ms. */
export function helperThreadsCpuMs(pid: number): number {
  let ms = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      if (readFileSync(`/proc/${pid}/task/${task}/comm`, 'utf8').trim() === 'V8Worker') ms += processCpuMs(pid, task);
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return ms;
}

/**
 * Forks `file` (a bench module that serves when started with `flag`), sends it `init` and waits for its first
 * message; one with an `error` rejects, as does the child's exit before it answers. The child keeps running.
 */
export function forkForAnswer<T extends object>(
  file: string,
  flag: string,
  init: unknown,
): Promise<{ child: ChildProcess; answer: T }> {
  const child = fork(file, [flag], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (answer: T | { error: string }) => {
      if ('error' in answer) {
        child.kill();
        reject(new Error(`${file}: ${answer.error}`));
      } else resolve({ child, answer });
    });
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
    child.send(init as object);
  });
}
