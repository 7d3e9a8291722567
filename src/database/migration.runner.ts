import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { MikroORM } from '@mikro-orm/postgresql';
import { Client } from 'pg';
import { DATABASE_URL } from './database.constants';

/** Advisory lock key shared by every replica: one of them migrates and seeds at a time. */
const STARTUP_LOCK_KEY = 727_001;

/**
 * Applies committed migrations before anything else touches the database. Replicas starting
 * together serialise on a Postgres advisory lock, so each migration runs exactly once.
 */
@Injectable()
export class MigrationRunner implements OnModuleInit {
  private readonly logger = new Logger(MigrationRunner.name);

  constructor(
    private readonly orm: MikroORM,
    @Inject(DATABASE_URL) private readonly databaseUrl: string,
  ) {}

  async onModuleInit(): Promise<void> {
    await withStartupLock(this.databaseUrl, async () => {
      const applied = await this.orm.migrator.up();
      if (applied.length) this.logger.log({ msg: 'applied migrations', migrations: applied.map((m) => m.name) });
    });
  }
}

/** Runs `work` while holding the cluster-wide startup lock (a session advisory lock on its own connection). */
export async function withStartupLock<T>(databaseUrl: string, work: () => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [STARTUP_LOCK_KEY]);
    return await work();
  } finally {
    await client.query('select pg_advisory_unlock($1)', [STARTUP_LOCK_KEY]).catch(() => undefined);
    await client.end().catch(() => undefined);
  }
}
