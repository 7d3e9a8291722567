import { MikroORM } from '@mikro-orm/postgresql';
import { Injectable, OnModuleInit } from '@nestjs/common';
import type { Pool } from 'pg';
import { DataPool } from '../database/data-pool';
import { PrometheusService, PoolStats } from './prometheus.service';

/**
 * Shows the pools of the app on the pool gauge (the ORM's, the data engine's and the data tools'
 * (reader), on the read replica too), and the read replica's lag and fallbacks.
 */
@Injectable()
export class PoolStatsCollector implements OnModuleInit {
  constructor(
    private readonly metrics: PrometheusService,
    private readonly orm: MikroORM,
    private readonly data: DataPool,
  ) {}

  onModuleInit(): void {
    this.metrics.collectPool('orm', async () => {
      // The pg pool beneath the ORM's Kysely dialect; opened with the ORM, so there by the first scrape.
      const pool: Pool = await this.orm.em.getConnection().getNativeClient();
      return poolStats(pool);
    });
    this.metrics.collectPool('data', () => Promise.resolve(this.data.stats('data')));
    this.metrics.collectPool('reader', () => Promise.resolve(this.data.stats('readers')));
    this.metrics.collectPool('data_replica', () => Promise.resolve(this.data.stats('data', 'replica')));
    this.metrics.collectPool('reader_replica', () => Promise.resolve(this.data.stats('readers', 'replica')));
    this.metrics.collectReadReplica(() => {
      const replica = this.data.readReplica();
      return replica && { lagMs: replica.status.lagMs, fallbacks: replica.fallbacks };
    });
  }
}

function poolStats(pool: Pool): PoolStats {
  return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
}
