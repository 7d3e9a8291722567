import { Controller, Get, Headers, Param, Query, Res } from '@nestjs/common';
import { ApiHeader, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { AcceptsStreamToken, Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, DATA_ERRORS } from '../common/api-route.decorator';
import { ClientSignal, hijack } from '../common/fastify-reply';
import { ChangesQueryDto, ChangesResponse, ChangesStreamQueryDto, CURSOR_PATTERN } from './changes.dto';
import { ChangesService } from './changes.service';

/** The events of GET /changes/stream. */
const CHANGE_STREAM_EVENTS =
  'Server-Sent Events `change`, each `data:` one change as in GET /changes (its SSE `id:` is the cursor, for ' +
  'Last-Event-ID), in commit order: the writes of every replica, only of records and fields the caller may read. ' +
  'Comments (`: keep-alive`) keep idle streams open.';

@ApiTags('changes')
@Controller('api/v1/objects/:name/changes')
export class ChangesController {
  constructor(private readonly changes: ChangesService) {}

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "Page an object's record changes (creates, updates, deletes) in commit order, after a cursor",
    type: ChangesResponse,
    errors: ['validation_failed', 'object_not_found', 'cursor_expired', ...DATA_ERRORS],
  })
  list(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Query() query: ChangesQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<ChangesResponse> {
    return this.changes.page(caller, name, query, signal);
  }

  /** SSE `change` events (id: = cursor); resumes from Last-Event-ID or ?after, then follows live. */
  @Get('stream')
  @Roles('admin', 'member')
  @AcceptsStreamToken()
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description: 'The last cursor received: resume after it (wins over ?after)',
    schema: { type: 'string', pattern: CURSOR_PATTERN.source },
  })
  @ApiRoute({
    summary: "Follow an object's record changes (SSE), resumable",
    events: CHANGE_STREAM_EVENTS,
    errors: ['validation_failed', 'object_not_found', 'cursor_expired', 'too_many_streams', ...DATA_ERRORS],
  })
  async stream(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Query() query: ChangesStreamQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.changes.stream(caller, name, { lastEventId, after: query.after }, () => hijack(reply));
  }
}
