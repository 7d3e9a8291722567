import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Public } from '../auth/auth.decorators';
import { HealthService } from './health.service';

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(private readonly service: HealthService) {}

  /** 200 once the database answers and is migrated; its own connection, so busy pools never delay it. */
  @Get()
  @Public()
  health(): Promise<{ status: 'ok' }> {
    return this.service.check();
  }
}
