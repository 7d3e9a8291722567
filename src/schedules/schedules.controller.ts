import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS, DATA_ERRORS, WHERE_ERRORS } from '../common/api-route.decorator';
import type { ErrorCode } from '../common/error-codes';
import {
  CreateScheduleDto,
  RunResponse,
  RunsQueryDto,
  RunsResponse,
  ScheduleResponse,
  SchedulesResponse,
  UpdateScheduleDto,
} from './schedule.dto';
import { SchedulesService } from './schedules.service';

/** What checking a schedule's definition as its owner may refuse. */
const DEFINITION_ERRORS: ErrorCode[] = [
  ...BODY_ERRORS,
  'invalid_cron',
  'invalid_timezone',
  'invalid_schedule',
  'agent_not_found',
  'agent_inactive',
  'agent_forbidden',
  'metric_not_found',
  'invalid_metric_query',
  'webhook_not_found',
  ...WHERE_ERRORS,
  ...DATA_ERRORS,
];

@ApiTags('schedules')
@Controller('api/v1/schedules')
export class SchedulesController {
  constructor(private readonly schedules: SchedulesService) {}

  @Post()
  @Roles('admin', 'member')
  @ApiRoute({
    summary:
      "Schedule a question to an agent or a metric alert (cron with a time zone, or an interval), run as the caller's key, delivered to its webhooks or by email",
    status: 201,
    type: ScheduleResponse,
    errors: DEFINITION_ERRORS,
  })
  create(@Caller() caller: Caller, @Body() dto: CreateScheduleDto): Promise<ScheduleResponse> {
    return this.schedules.create(caller, dto);
  }

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({ summary: "The caller's schedules (admins: every schedule)", type: SchedulesResponse })
  list(@Caller() caller: Caller): Promise<SchedulesResponse> {
    return this.schedules.list(caller);
  }

  @Get(':id')
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'Read a schedule', type: ScheduleResponse, errors: ['schedule_not_found'] })
  get(@Caller() caller: Caller, @Param('id') id: string): Promise<ScheduleResponse> {
    return this.schedules.get(caller, id);
  }

  @Patch(':id')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Change a schedule (checked as its owner), or enable/disable it',
    type: ScheduleResponse,
    errors: ['schedule_not_found', ...DEFINITION_ERRORS],
  })
  update(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: UpdateScheduleDto): Promise<ScheduleResponse> {
    return this.schedules.update(caller, id, dto);
  }

  @Delete(':id')
  @HttpCode(204)
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'Delete a schedule with its runs', status: 204, errors: ['schedule_not_found'] })
  delete(@Caller() caller: Caller, @Param('id') id: string): Promise<void> {
    return this.schedules.delete(caller, id);
  }

  @Get(':id/runs')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "A schedule's runs, newest first: status, times, the chat of a question, the rows an alert fired, deliveries",
    type: RunsResponse,
    errors: ['schedule_not_found', 'validation_failed'],
  })
  runs(@Caller() caller: Caller, @Param('id') id: string, @Query() query: RunsQueryDto): Promise<RunsResponse> {
    return this.schedules.runs(caller, id, query);
  }

  @Post(':id/run')
  @HttpCode(202)
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Run a schedule now (queued): the run, to follow in its runs',
    status: 202,
    type: RunResponse,
    errors: ['schedule_not_found'],
  })
  run(@Caller() caller: Caller, @Param('id') id: string): Promise<RunResponse> {
    return this.schedules.runNow(caller, id);
  }
}
