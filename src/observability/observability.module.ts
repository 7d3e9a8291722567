import { DynamicModule, Global, Module } from '@nestjs/common';
import { PrometheusController } from './prometheus.controller';
import { PrometheusService } from './prometheus.service';
import { PoolStatsCollector } from './pool-stats.collector';
import { JobsModule } from '../jobs/jobs.module';
import { JobQueueCollector } from './job-queue.collector';

/**
 * Prometheus metrics at GET /metrics. The PrometheusService is made with the app (createApp), so that
 * the request log hook, which Fastify holds before Nest exists, records into the same registry.
 */
@Global()
@Module({})
export class ObservabilityModule {
  static forRoot(metrics: PrometheusService): DynamicModule {
    return {
      module: ObservabilityModule,
      imports: [JobsModule],
      controllers: [PrometheusController],
      providers: [{ provide: PrometheusService, useValue: metrics }, PoolStatsCollector, JobQueueCollector],
      exports: [PrometheusService],
    };
  }
}
