import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { freePort } from './free-port';
import { TEST_ADMIN_KEY } from './test-app';

/** The built app (`npm test`'s pretest step). */
const MAIN_JS = join(__dirname, '../../dist/src/main.js');

/** A replica in an OS process of its own, listening on 127.0.0.1: one that a test can SIGKILL. */
export interface AppProcess {
  url: string;
  /** supertest against the process's server. */
  http: ReturnType<typeof request>;
  adminKey: string;
  /** What it wrote to stdout and stderr so far. */
  output(): string;
  /** SIGKILL: no shutdown hook runs, connections and claims are left as they are. Resolves once it exited. */
  kill(): Promise<void>;
  /** Kills it if it still runs and removes its files. */
  cleanUp(): Promise<void>;
}

/** Starts the built app on `databaseUrl` (as a second replica would), with the test admin key; resolves once it listens. */
export async function spawnApp(databaseUrl: string, env: Record<string, string> = {}): Promise<AppProcess> {
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run npm run build`);
  const dataDir = await mkdtemp(join(tmpdir(), 'data-copilot-process-'));
  const port = await freePort();
  const child: ChildProcess = spawn(join(__dirname, '../../node_modules/.bin/node'), [MAIN_JS], {
    env: {
      ...process.env,
      SEED: 'false',
      PLAYGROUND: 'false',
      LOG_LEVEL: 'info',
      ...env,
      NODE_OPTIONS: '',
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      PORT: String(port),
      ADMIN_API_KEY: TEST_ADMIN_KEY,
      DATA_DIR: dataDir,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  const until = Date.now() + 60_000;
  while (!output.includes('listening on')) {
    if (child.exitCode !== null || Date.now() > until) {
      await kill();
      await rm(dataDir, { recursive: true, force: true });
      throw new Error(`the app process did not start listening; its output:\n${output}`);
    }
    await sleep(50);
  }
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    http: request(url),
    adminKey: TEST_ADMIN_KEY,
    output: () => output,
    kill,
    async cleanUp() {
      await kill();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
