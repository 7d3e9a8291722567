import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import { ApiHeader, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, DATA_ERRORS } from '../common/api-route.decorator';
import { schemaRef } from '../common/openapi.schemas';
import { ClientSignal } from '../common/fastify-reply';
import { parseIfMatch, sendVersioned } from '../data/record-version';
import { HistoryQueryDto, HistoryResponse, RestoreVersionDto, TrashQueryDto, TrashResponse } from './history.dto';
import { HistoryService } from './history.service';
import { TrashService } from './trash.service';

const CHANGE_SET_HEADERS = {
  ETag: { description: 'The version of the record', schema: { type: 'string' } },
  'Change-Set-Id': { description: 'The change set of the write', schema: { type: 'string', format: 'uuid' } },
};

@ApiTags('history')
@Controller('api/v1/objects/:name')
export class HistoryController {
  constructor(
    private readonly history: HistoryService,
    private readonly trash: TrashService,
  ) {}

  @Get('records/:id/history')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "A record's versions, newest first: who, when, how, its change set, each field before → after",
    description:
      'Fields the key may not see are left out (and versions that changed only those); a record outside its ' +
      'row filter is 404, live or in the trash.',
    type: HistoryResponse,
    errors: ['validation_failed', 'object_not_found', 'record_not_found', 'invalid_cursor', 'unknown_field', ...DATA_ERRORS],
  })
  versions(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Query() query: HistoryQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<HistoryResponse> {
    return this.history.versions(caller, name, id, query, { signal });
  }

  @Get('records/:id/history/:version')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'The record as it was at a version (a delete: as it was deleted)',
    schema: schemaRef('RecordResponse'),
    responseDescription: 'The record then, with the fields the key may see',
    errors: ['object_not_found', 'record_not_found', 'version_not_found', ...DATA_ERRORS],
  })
  async versionAt(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Param('version') version: string,
    @ClientSignal() signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    return (await this.history.versionAt(caller, name, id, version, { signal })).record;
  }

  @Post('records/:id/restore')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiHeader({ name: 'If-Match', required: false, description: 'Restore only over this version of the record (its ETag)' })
  @ApiRoute({
    summary: 'Write a record back to a version of its history, as a new version (via: restore)',
    description:
      'Every field the key may write that differs from now takes the value it had then; one equal to now writes nothing.',
    schema: schemaRef('RecordResponse'),
    responseDescription: 'The record, with the changeSetId of the restore',
    headers: CHANGE_SET_HEADERS,
    errors: [
      'validation_failed',
      'invalid_if_match',
      'object_not_found',
      'record_not_found',
      'version_not_found',
      'precondition_failed',
      'forbidden',
      'invalid_value',
      'invalid_reference',
      'unique_violation',
      ...DATA_ERRORS,
    ],
  })
  async restore(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Body() dto: RestoreVersionDto,
    @Headers('if-match') ifMatch: string | undefined,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    return sendVersioned(reply, await this.history.restore(caller, name, id, dto.version, parseIfMatch(ifMatch), { signal }));
  }

  @Get('trash')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "The object's trash: deleted records the key may read, most recent first",
    description: 'Purged after TRASH_RETENTION_DAYS (default 30).',
    type: TrashResponse,
    errors: ['validation_failed', 'object_not_found', 'invalid_cursor', ...DATA_ERRORS],
  })
  listTrash(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Query() query: TrashQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<TrashResponse> {
    return this.trash.list(caller, name, query, signal);
  }

  @Post('trash/:id/restore')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiRoute({
    summary: 'Bring a record back from the trash, as it was deleted',
    description:
      'Its links come back with it, to the records on the other side that still exist. 409 unique_violation when a live ' +
      'record took one of its unique values meanwhile.',
    schema: schemaRef('RecordResponse'),
    responseDescription: 'The record, with the changeSetId of the restore',
    headers: CHANGE_SET_HEADERS,
    errors: ['object_not_found', 'record_not_found', 'unique_violation', 'invalid_reference', 'forbidden', ...DATA_ERRORS],
  })
  async restoreTrashed(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    return sendVersioned(reply, await this.trash.restore(caller, name, id, signal));
  }

  @Delete('trash/:id')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Purge a record from the trash for good (admins)',
    status: 204,
    errors: ['object_not_found', 'record_not_found', ...DATA_ERRORS],
  })
  async purge(@Caller() caller: Caller, @Param('name') name: string, @Param('id') id: string): Promise<void> {
    await this.trash.purge(caller, name, id);
  }
}
