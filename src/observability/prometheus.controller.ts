import { Controller, Get, Header, Headers } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { Registry } from 'prom-client';
import { Public } from '../auth/auth.decorators';
import { PrometheusService } from './prometheus.service';

/**
 * Prometheus metrics in the text format, for scrapers rather than API clients: public unless
 * METRICS_TOKEN is set (then that token as Bearer), and described by the README, not by the
 * OpenAPI document, since the answer is not JSON.
 */
@ApiExcludeController()
@Controller('metrics')
export class PrometheusController {
  constructor(private readonly metrics: PrometheusService) {}

  @Get()
  @Public()
  @Header('content-type', Registry.PROMETHEUS_CONTENT_TYPE)
  @Header('cache-control', 'no-store')
  scrape(@Headers('authorization') authorization: string | undefined): Promise<string> {
    return this.metrics.scrape(authorization);
  }
}
