import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: run tests through jest (globalSetup starts Postgres)');
  return url;
}

async function withAdmin<T>(work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A fresh, empty database on the test server, for one test file (or one test). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  await withAdmin((client) => client.query(`create database "${name}"`));
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => withAdmin((client) => client.query(`drop database if exists "${name}" with (force)`)).then(() => undefined),
  };
}

/**
 * Refuses (or allows again) new connections to a test database, from the server's side: connections
 * already open stay, any new one fails, as when the database went away.
 */
export async function allowConnections(database: TestDatabase, allowed: boolean): Promise<void> {
  const name = new URL(database.url).pathname.slice(1);
  await withAdmin((client) => client.query(`alter database "${name}" allow_connections ${allowed ? 'true' : 'false'}`));
}
