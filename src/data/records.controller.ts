import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Patch, Post, Query, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiHeader, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Roles } from '../auth/auth.decorators';
import { ClientSignal } from '../common/fastify-reply';
import type { VersionedRecord } from './data.types';
import { DataService } from './data.service';
import { etagOf, parseIfMatch } from './record-version';
import { AggregateDto, AggregateResponse, RecordListResponse, RecordsQueryDto } from './records.dto';
import { RecordsService } from './records.service';

const RECORD_BODY = { schema: { type: 'object', additionalProperties: true, example: { name: 'Acme', stage: 'won' } } };

const ETAG_HEADER = {
  ETag: {
    description: 'The version of the record, e.g. "1234"; send it back in If-Match to change only that version',
    schema: { type: 'string' },
  },
};
const IF_MATCH = {
  name: 'If-Match',
  required: false,
  description:
    'ETag(s) of the record as last read: the write happens only if the record is still at one of them, else 412 ' +
    'precondition_failed. Not a list of quoted entity tags (nor "*"): 400 invalid_if_match. Absent: last write wins.',
};
const PRECONDITION_FAILED = { status: 412, description: 'precondition_failed: the record changed since the If-Match version' };

/** Answers with the record and its version as ETag. */
function sendVersioned(reply: FastifyReply, { record, version }: VersionedRecord): Record<string, unknown> {
  void reply.header('etag', etagOf(version));
  return record;
}

@ApiTags('records')
@ApiBearerAuth()
@Controller('api/v1/objects/:name')
export class RecordsController {
  constructor(
    private readonly records: RecordsService,
    private readonly data: DataService,
  ) {}

  @Get('records')
  @Roles('admin', 'member')
  list(
    @Param('name') name: string,
    @Query() query: RecordsQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<RecordListResponse> {
    return this.records.list(name, query, signal);
  }

  @Post('records')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  @ApiResponse({ status: 201, description: 'The created record', headers: ETAG_HEADER })
  async create(
    @Param('name') name: string,
    @Body() body: unknown,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    return sendVersioned(reply, await this.data.insert(name, body, { signal }));
  }

  @Get('records/:id')
  @Roles('admin', 'member')
  @ApiResponse({ status: 200, description: 'The record', headers: ETAG_HEADER })
  async get(
    @Param('name') name: string,
    @Param('id') id: string,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    return sendVersioned(reply, await this.data.findOneVersioned(name, id, undefined, { signal }));
  }

  @Patch('records/:id')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  @ApiHeader(IF_MATCH)
  @ApiResponse({ status: 200, description: 'The updated record', headers: ETAG_HEADER })
  @ApiResponse(PRECONDITION_FAILED)
  async update(
    @Param('name') name: string,
    @Param('id') id: string,
    @Body() body: unknown,
    @Headers('if-match') ifMatch: string | undefined,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    return sendVersioned(reply, await this.data.update(name, id, body, parseIfMatch(ifMatch), { signal }));
  }

  @Delete('records/:id')
  @Roles('admin', 'member')
  @HttpCode(204)
  @ApiHeader(IF_MATCH)
  @ApiResponse(PRECONDITION_FAILED)
  async delete(
    @Param('name') name: string,
    @Param('id') id: string,
    @Headers('if-match') ifMatch: string | undefined,
    @ClientSignal() signal: AbortSignal,
  ): Promise<void> {
    await this.data.delete(name, id, parseIfMatch(ifMatch), { signal });
  }

  @Post('aggregate')
  @Roles('admin', 'member')
  @HttpCode(200)
  aggregate(
    @Param('name') name: string,
    @Body() dto: AggregateDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<AggregateResponse> {
    return this.records.aggregate(name, dto, signal);
  }
}
