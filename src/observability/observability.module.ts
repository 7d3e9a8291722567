import { DynamicModule, Global, Module } from '@nestjs/common';
import { MetricsController } from './prometheus.controller';
import { MetricsService } from './prometheus.service';
import { PoolMetricsCollector } from './pool-metrics.collector';

/**
 * Prometheus metrics at GET /metrics. The MetricsService is made with the app (createApp), so that
 * the request log hook, which Fastify holds before Nest exists, records into the same registry.
 */
@Global()
@Module({})
export class ObservabilityModule {
  static forRoot(metrics: MetricsService): DynamicModule {
    return {
      module: ObservabilityModule,
      controllers: [MetricsController],
      providers: [{ provide: MetricsService, useValue: metrics }, PoolMetricsCollector],
      exports: [MetricsService],
    };
  }
}
