import { MikroORM } from '@mikro-orm/postgresql';
import { Injectable, OnModuleInit } from '@nestjs/common';
import type { Pool } from 'pg';
import { DataPool } from '../database/data-pool';
import { MetricsService, PoolStats } from './metrics.service';

/** Shows the pools of the app on the pool gauge: the ORM's, the data engine's and the data tools' (reader). */
@Injectable()
export class PoolMetricsCollector implements OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    private readonly orm: MikroORM,
    private readonly data: DataPool,
  ) {}

  onModuleInit(): void {
    this.metrics.collectPool('orm', async () => {
      // The pg pool beneath the ORM's Kysely dialect; opened with the ORM, so there by the first scrape.
      const pool: Pool = await this.orm.em.getConnection().getNativeClient();
      return poolStats(pool);
    });
    this.metrics.collectPool('data', () => Promise.resolve(this.data.stats()));
    this.metrics.collectPool('reader', () => Promise.resolve(this.data.stats(true)));
  }
}

function poolStats(pool: Pool): PoolStats {
  return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
}
