import { Migrator } from '@mikro-orm/migrations';
import { defineConfig, PostgreSqlDriver } from '@mikro-orm/postgresql';
import { OrmLogger } from './orm.logger';
import { contextEntityManager } from './request-context';
import { MIGRATIONS } from './migrations';

/** Connections of the ORM's pool (API keys, metadata, chats, jobs). */
export const ORM_POOL_SIZE = 20;

/**
 * MikroORM options for a connection URL. Entities come from each module's `forFeature`. Waiting for a
 * connection of its pool ends after `acquireTimeoutMs` (pg's `connectionTimeoutMillis`, passed to the
 * pool through `driverOptions`): a starved pool answers database_busy instead of holding requests.
 */
export function ormOptions(clientUrl: string, acquireTimeoutMs: number) {
  return defineConfig({
    driver: PostgreSqlDriver,
    clientUrl,
    extensions: [Migrator],
    migrations: { migrationsList: MIGRATIONS, transactional: true, allOrNothing: true, snapshot: false },
    pool: { min: 0, max: ORM_POOL_SIZE },
    driverOptions: { connectionTimeoutMillis: acquireTimeoutMs },
    // Entities are plain schemas (defineEntity); nothing to discover from the file system.
    discovery: { warnWhenNoEntities: false },
    ensureDatabase: false,
    debug: false,
    // Through the application's logger, in its line shape; no colour codes in anything it writes.
    loggerFactory: (options) => new OrmLogger(options),
    colors: false,
    // A request's EntityManager: forked when the request first uses it (request-context.ts).
    context: contextEntityManager,
  });
}
