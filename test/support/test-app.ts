import 'reflect-metadata';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import type { DestinationStream } from 'pino';
import request from 'supertest';
import { createApp } from '../../src/app.factory';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { createTestDatabase, TestDatabase } from './test-database';

export const TEST_ADMIN_KEY = 'test-admin-key-0123456789abcdef';

export interface TestApp {
  app: NestFastifyApplication;
  /** supertest against the app's server */
  http: ReturnType<typeof request>;
  config: AppConfig;
  database: TestDatabase;
  adminKey: string;
  /** A direct connection to the test database, for asserting on tables as psql would. */
  sql<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  /** Environment variables, as a user would set them (SEED and PLAYGROUND default to false in tests). */
  env?: Record<string, string>;
  /** Reuse a database (a second replica on the same data). */
  database?: TestDatabase;
  /** Where the app's log lines go instead of stdout. */
  logDestination?: DestinationStream;
}

/** Starts the real application on its own database, initialised and ready for requests. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const database = options.database ?? (await createTestDatabase());
  const dataDir = await mkdtemp(join(tmpdir(), 'data-copilot-app-'));
  const config = loadConfig({
    SEED: 'false',
    // The page's files exist only after npm run build; the tests about it turn it on.
    PLAYGROUND: 'false',
    LOG_LEVEL: 'silent',
    ADMIN_API_KEY: TEST_ADMIN_KEY,
    DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    ...options.env,
  });
  const app = await createApp(config, database.url, { logDestination: options.logDestination });
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  const client = new Client({ connectionString: database.url });
  await client.connect();
  return {
    app,
    http: request(app.getHttpServer()),
    config,
    database,
    adminKey: TEST_ADMIN_KEY,
    sql: async <T>(text: string, params?: unknown[]) => (await client.query(text, params)).rows as T[],
    async close() {
      await app.close();
      await client.end();
      await rm(dataDir, { recursive: true, force: true });
      if (!options.database) await database.drop();
    },
  };
}

/** `Authorization` header for a key. */
export function bearer(key: string): { Authorization: string } {
  return { Authorization: `Bearer ${key}` };
}
