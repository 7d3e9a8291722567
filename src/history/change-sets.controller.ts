import { Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, DATA_ERRORS } from '../common/api-route.decorator';
import { ClientSignal } from '../common/fastify-reply';
import { ChangeSetService } from './change-sets.service';
import { ChangeSetQueryDto, ChangeSetResponse, ChangeSetsResponse, RevertResponse } from './history.dto';

@ApiTags('history')
@Controller('api/v1/change-sets')
export class ChangeSetsController {
  constructor(private readonly changeSets: ChangeSetService) {}

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Change sets of the objects the key may read, newest first',
    type: ChangeSetsResponse,
    errors: ['validation_failed', 'object_not_found', 'invalid_cursor', ...DATA_ERRORS],
  })
  list(
    @Caller() caller: Caller,
    @Query() query: ChangeSetQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<ChangeSetsResponse> {
    return this.changeSets.list(caller, query, signal);
  }

  @Get(':id')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'A change set and each record it changed (before → after)',
    type: ChangeSetResponse,
    errors: ['change_set_not_found', ...DATA_ERRORS],
  })
  get(@Caller() caller: Caller, @Param('id') id: string, @ClientSignal() signal: AbortSignal): Promise<ChangeSetResponse> {
    return this.changeSets.get(caller, id, signal);
  }

  @Post(':id/revert')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiRoute({
    summary: 'Undo a change set as one, all or nothing (a change set of its own: revert it to redo)',
    description:
      'A record changed since the change set: 409 revert_conflict with details.records [{ id, field, expected, current }], ' +
      'nothing written. Members revert their own change sets and those their approvals made; admins any.',
    type: RevertResponse,
    errors: [
      'change_set_not_found',
      'revert_conflict',
      'forbidden',
      'change_set_too_large',
      'unique_violation',
      'invalid_reference',
      ...DATA_ERRORS,
    ],
  })
  revert(@Caller() caller: Caller, @Param('id') id: string, @ClientSignal() signal: AbortSignal): Promise<RevertResponse> {
    return this.changeSets.revert(caller, id, signal);
  }
}
