import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import { CreateMetricDto, MetricListResponse, MetricResponse, ReplaceMetricDto } from './metric.dto';
import { MetricService } from './metric.service';

@ApiTags('metrics')
@Controller('api/v1/metrics')
export class MetricController {
  constructor(private readonly metrics: MetricService) {}

  @Post()
  @Roles('admin')
  @ApiRoute({
    summary: 'Define a metric (a named aggregate over one object), checked against its fields',
    status: 201,
    type: MetricResponse,
    errors: [...BODY_ERRORS, 'invalid_metric', 'metric_exists'],
  })
  create(@Body() dto: CreateMetricDto): Promise<MetricResponse> {
    return this.metrics.create(dto);
  }

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'List the metric definitions the caller may see: every object and field they use is visible to it',
    type: MetricListResponse,
  })
  list(@Caller() caller: Caller): Promise<MetricListResponse> {
    return this.metrics.list(caller);
  }

  @Get(':name')
  @Roles('admin', 'member')
  @ApiRoute({
    summary:
      'Read a metric definition (404 metric_not_found, like an unknown one, when it uses an object or field hidden from the caller)',
    type: MetricResponse,
    errors: ['metric_not_found'],
  })
  get(@Caller() caller: Caller, @Param('name') name: string): Promise<MetricResponse> {
    return this.metrics.get(caller, name);
  }

  @Put(':name')
  @Roles('admin')
  @ApiRoute({
    summary: 'Replace a metric definition',
    type: MetricResponse,
    errors: [...BODY_ERRORS, 'invalid_metric', 'metric_not_found', 'metric_in_use'],
  })
  replace(@Param('name') name: string, @Body() dto: ReplaceMetricDto): Promise<MetricResponse> {
    return this.metrics.replace(name, dto);
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({ summary: 'Delete a metric no ratio metric divides', status: 204, errors: ['metric_not_found', 'metric_in_use'] })
  async delete(@Param('name') name: string): Promise<void> {
    await this.metrics.delete(name);
  }
}
