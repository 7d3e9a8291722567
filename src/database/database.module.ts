import { DynamicModule, Global, Module } from '@nestjs/common';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { PostgreSqlDriver } from '@mikro-orm/postgresql';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { CommitAnnouncer } from './commit-announcer.service';
import { DataPool } from './data-pool';
import { OrmPoolCloser } from './orm-pool-closer';
import { DATABASE_URL } from './database.constants';
import { MigrationRunner } from './migration.runner';
import { ormOptions } from './orm.config';
import { PgPubSub } from './pg-pubsub.service';

/**
 * MikroORM on the given PostgreSQL URL (the embedded cluster is started before Nest, in main.ts,
 * so that it outlives the application during shutdown), migrations on start, and the data engine's
 * own connection pool.
 */
@Global()
@Module({})
export class DatabaseModule {
  static forRoot(databaseUrl: string): DynamicModule {
    const urlProvider = { provide: DATABASE_URL, useValue: databaseUrl };
    return {
      module: DatabaseModule,
      imports: [
        MikroOrmModule.forRootAsync({
          driver: PostgreSqlDriver,
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({
            ...ormOptions(databaseUrl, config.ormAcquireTimeoutMs),
            autoLoadEntities: true,
            // Not MikroORM's middleware, which forks for every request: app.factory.ts installs a lazy context.
            registerRequestContext: false,
          }),
        }),
      ],
      providers: [urlProvider, MigrationRunner, PgPubSub, CommitAnnouncer, DataPool, OrmPoolCloser],
      exports: [urlProvider, PgPubSub, CommitAnnouncer, DataPool],
    };
  }
}
