import { Controller, Get, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute } from '../common/api-route.decorator';
import { UsageQueryDto, UsageReportResponse } from './usage.dto';
import { UsageService } from './usage.service';

@ApiTags('governance')
@Controller('api/v1/usage')
export class UsageController {
  constructor(private readonly usage: UsageService) {}

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Model calls and tokens per key, agent or UTC day (a member key sees its own only)',
    type: UsageReportResponse,
    errors: ['validation_failed'],
  })
  report(@Caller() caller: Caller, @Query() query: UsageQueryDto): Promise<UsageReportResponse> {
    return this.usage.report(caller, query);
  }
}
