import { mkdtemp } from 'node:fs/promises';
import { freePort } from './free-port';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres, RunningPostgres } from '../../src/database/embedded-postgres.launcher';

declare global {
  var __TEST_POSTGRES__: RunningPostgres | undefined;
  var __TEST_POSTGRES_DIR__: string | undefined;
}

/**
 * One real Postgres for the whole run (the embedded one, unless TEST_DATABASE_URL names a server);
 * every test file then creates its own database on it, so files run in parallel without sharing data.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.TEST_DATABASE_URL) return;
  const dataDir = await mkdtemp(join(tmpdir(), 'data-copilot-test-'));
  const postgres = await startEmbeddedPostgres({ dataDir, port: await freePort(), persistent: false });
  globalThis.__TEST_POSTGRES__ = postgres;
  globalThis.__TEST_POSTGRES_DIR__ = dataDir;
  process.env.TEST_DATABASE_URL = postgres.url;
}
