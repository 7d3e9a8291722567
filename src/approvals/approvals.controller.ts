import { Body, Controller, HttpCode, Param, Post } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import { ApprovalDecisionDto } from './approval.dto';
import { ApprovalService } from './approval.service';

@ApiTags('chats')
@Controller('api/v1/chats')
export class ApprovalsController {
  constructor(private readonly approvals: ApprovalService) {}

  @Post(':id/approvals')
  @Roles('admin', 'member')
  @HttpCode(202)
  @ApiRoute({
    summary: 'Approve or reject a write proposal of a chat waiting in requires_approval',
    description:
      "Approve: the write runs as this key, under If-Match on every record's proposed version, in one transaction; " +
      'a record changed since the proposal writes nothing and the model reads `version_changed` with the current ' +
      'values. Reject: the model reads the rejection and the reason. Either way the chat then goes on. A token that ' +
      'is forged, for another proposal, already used or expired, or a key that may not make the write itself (only ' +
      "the chat's owner with the grant, or an admin): 403 `approval_invalid`, nothing written. Another person's chat " +
      '(to a key that is not an admin) is 404 `chat_not_found`, as a chat that does not exist.',
    status: 202,
    errors: [...BODY_ERRORS, 'key_revoked', 'chat_not_found', 'approval_invalid'],
  })
  async decide(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: ApprovalDecisionDto): Promise<void> {
    await this.approvals.decide(caller, id, dto);
  }
}
