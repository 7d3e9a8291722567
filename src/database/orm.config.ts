import { Migrator } from '@mikro-orm/migrations';
import { defineConfig, PostgreSqlDriver } from '@mikro-orm/postgresql';
import { OrmLogger } from '../observability/orm.logger';
import { MIGRATIONS } from './migrations';

/** MikroORM options for a connection URL. Entities come from each module's `forFeature`. */
export function ormOptions(clientUrl: string) {
  return defineConfig({
    driver: PostgreSqlDriver,
    clientUrl,
    extensions: [Migrator],
    migrations: { migrationsList: MIGRATIONS, transactional: true, allOrNothing: true, snapshot: false },
    pool: { min: 0, max: 20 },
    // Entities are plain schemas (defineEntity); nothing to discover from the file system.
    discovery: { warnWhenNoEntities: false },
    ensureDatabase: false,
    debug: false,
    // Through the application's logger, in its line shape; no colour codes in anything it writes.
    loggerFactory: (options) => new OrmLogger(options),
    colors: false,
  });
}
