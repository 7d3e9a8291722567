import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Public } from '../auth/auth.decorators';
import { ApiRoute } from '../common/api-route.decorator';
import { HealthResponse, ReadinessResponse } from './health.dto';
import { HealthService } from './health.service';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(private readonly service: HealthService) {}

  /** 200 once the database answers and is migrated; its own connection, so busy pools never delay it. */
  @Get()
  @Public()
  @ApiRoute({
    summary: 'Liveness and readiness: the database answers and is migrated',
    type: HealthResponse,
    errors: ['database_unavailable'],
    public: true,
  })
  health(): Promise<HealthResponse> {
    return this.service.check();
  }

  @Get('live')
  @Public()
  @ApiRoute({
    summary: 'Liveness: the process answers (no database call; restart the replica when this fails)',
    type: HealthResponse,
    public: true,
  })
  live(): HealthResponse {
    return this.service.live();
  }

  @Get('ready')
  @Public()
  @ApiRoute({
    summary: 'Readiness: the database answers, every migration is applied and the chat worker runs',
    description:
      'A 503 `not_ready` names the failed checks in `details.checks` (and `details.pendingMigrations`); send no traffic to the replica meanwhile.',
    type: ReadinessResponse,
    errors: ['not_ready'],
    public: true,
  })
  ready(): Promise<ReadinessResponse> {
    return this.service.ready();
  }
}
