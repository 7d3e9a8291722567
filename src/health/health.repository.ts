import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { DATABASE_URL } from '../database/database.constants';
import { StandaloneConnection } from '../database/standalone-connection';

/** How long a health check may take, connecting included, before it answers 503. */
const HEALTH_TIMEOUT_MS = 3_000;

/**
 * The SQL of the health routes, on a connection of its own: user queries can fill every pool without
 * making the health check wait behind them.
 */
@Injectable()
export class HealthRepository implements OnApplicationShutdown {
  private readonly connection: StandaloneConnection;

  constructor(@Inject(DATABASE_URL) databaseUrl: string) {
    this.connection = new StandaloneConnection(databaseUrl, 'data-copilot:health', HEALTH_TIMEOUT_MS);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.connection.close();
  }

  /** How many migrations the database has recorded (MikroORM's table); throws when it is unreachable. */
  async appliedMigrations(): Promise<number> {
    const [row] = await this.connection.query<{ applied: number }>('select count(*)::int as applied from mikro_orm_migrations');
    return row.applied;
  }

  /** The names of the migrations the database has recorded; throws when it is unreachable. */
  async appliedMigrationNames(): Promise<string[]> {
    const rows = await this.connection.query<{ name: string }>('select name from mikro_orm_migrations');
    return rows.map((row) => row.name);
  }
}
