import { Controller, Get, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { ApiRoute } from '../common/api-route.decorator';
import { AuditListResponse, AuditQueryDto } from '../audit/audit.dto';
import { AuditLog } from '../audit/audit-log.service';

@ApiTags('governance')
@Controller('api/v1/audit')
export class AuditController {
  constructor(private readonly audit: AuditLog) {}

  @Get()
  @Roles('admin')
  @ApiRoute({
    summary: 'The audit trail: tool calls and admin changes, newest first',
    type: AuditListResponse,
    errors: ['validation_failed'],
  })
  list(@Query() query: AuditQueryDto): Promise<AuditListResponse> {
    return this.audit.query(query);
  }
}
