import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Public } from '../auth/auth.decorators';
import { ApiRoute } from '../common/api-route.decorator';
import { HealthResponse } from './health.dto';
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
}
