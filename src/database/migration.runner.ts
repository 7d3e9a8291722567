import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { MikroORM } from '@mikro-orm/postgresql';
import { ADVISORY_LOCK, withSessionLock } from './advisory-locks';
import { DATABASE_URL } from './database.constants';

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
    await withSessionLock(this.databaseUrl, ADVISORY_LOCK.startup, async () => {
      const applied = await this.orm.migrator.up();
      if (applied.length) this.logger.log({ msg: 'applied migrations', migrations: applied.map((m) => m.name) });
    });
  }
}
