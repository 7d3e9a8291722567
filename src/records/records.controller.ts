import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Patch, Post, Query, Res } from '@nestjs/common';
import { ApiBody, ApiHeader, ApiTags } from '@nestjs/swagger';
import { newChangeSet } from '../data/change-outbox';
import type { FastifyReply } from 'fastify';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS, DATA_ERRORS, WHERE_ERRORS } from '../common/api-route.decorator';
import type { ErrorCode } from '../common/error-codes';
import { ClientSignal } from '../common/fastify-reply';
import { schemaRef } from '../common/openapi.schemas';
import { DataService } from '../data/data.service';
import { CHANGE_SET_HEADER, parseIfMatch, sendVersioned } from '../data/record-version';
import {
  AggregateDto,
  AggregateResponse,
  BatchRecordsDto,
  BatchRecordsResponse,
  FieldValuesQueryDto,
  FieldValuesResponse,
  RecordListResponse,
  RecordsQueryDto,
} from './records.dto';
import { RecordsService } from './records.service';

const RECORD_BODY = { schema: schemaRef('RecordInput') };

const CHANGE_SET = {
  'Change-Set-Id': {
    description: 'The change set of the write: see it at /api/v1/change-sets/{id}, undo it with POST …/revert',
    schema: { type: 'string', format: 'uuid' },
  },
};
const ETAG_HEADER = {
  ETag: {
    description: 'The version of the record, e.g. "1234"; send it back in If-Match to change only that version',
    schema: { type: 'string' },
  },
};
const WRITE_HEADERS = { ...ETAG_HEADER, ...CHANGE_SET };
const IF_MATCH = {
  name: 'If-Match',
  required: false,
  description:
    'ETag(s) of the record as last read: the write happens only if the record is still at one of them, else 412 ' +
    'precondition_failed. Not a list of quoted entity tags (nor "*"): 400 invalid_if_match. Absent: last write wins.',
};

const IF_NONE_MATCH = {
  name: 'If-None-Match',
  required: false,
  description:
    'ETag(s) of the record as last read or written: the record is read on the primary database, never on a read ' +
    'replica that may not have the latest write yet (the response is the record with its current ETag either way).',
};

/** Errors of a record's field values (create and update). */
const VALUE_ERRORS: ErrorCode[] = [
  'invalid_record',
  'unknown_field',
  'read_only_field',
  'invalid_value',
  'invalid_reference',
  'unique_violation',
  'metadata_changed',
];

@ApiTags('records')
@Controller('api/v1/objects/:name')
export class RecordsController {
  constructor(
    private readonly records: RecordsService,
    private readonly data: DataService,
  ) {}

  @Get('records')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Query records: filter, sort, project and page',
    description:
      "Offset pages: total is exact up to RECORDS_COUNT_CAP (default 10000), else the planner's estimate, with " +
      'totalExact saying which; ?total=exact counts every match, ?total=none omits total. Pages after a cursor ' +
      '(nextCursor) have no total.',
    type: RecordListResponse,
    errors: [
      'validation_failed',
      'object_not_found',
      'view_not_found',
      ...WHERE_ERRORS,
      'invalid_order_by',
      'invalid_fields',
      'invalid_cursor',
      'search_not_available',
      ...DATA_ERRORS,
    ],
  })
  list(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Query() query: RecordsQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<RecordListResponse> {
    return this.records.list(caller, name, query, signal);
  }

  @Get('fields/:field/values')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "Distinct values of a field with their counts (a grid's filter drop-down)",
    description:
      'Over the records the caller may read, filtered by where and view; q keeps values containing it (ignoring ' +
      'case). Most frequent first, then by value; limit default 50, at most 1000.',
    type: FieldValuesResponse,
    errors: ['validation_failed', 'object_not_found', 'view_not_found', ...WHERE_ERRORS, ...DATA_ERRORS],
  })
  fieldValues(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('field') field: string,
    @Query() query: FieldValuesQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<FieldValuesResponse> {
    return this.records.fieldValues(caller, name, field, query, signal);
  }

  @Post('records')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  @ApiRoute({
    summary: 'Create a record',
    description:
      'A key under a row filter on the object cannot choose the id (400 validation_failed). A lookup to a record ' +
      'the key may not read is 400 invalid_reference, exactly as to a record that does not exist.',
    status: 201,
    schema: schemaRef('RecordResponse'),
    responseDescription: 'The created record, with the changeSetId of the write',
    headers: WRITE_HEADERS,
    errors: [...BODY_ERRORS, 'object_not_found', ...VALUE_ERRORS, 'missing_required_field', ...DATA_ERRORS],
  })
  async create(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Body() body: unknown,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    return sendVersioned(reply, await this.data.insert(caller, name, body, { signal }));
  }

  @Post('records/batch')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiRoute({
    summary: 'Create, update and delete up to 1,000 records in one transaction',
    description:
      'Each operation is checked like its single-record request. All or nothing by default: any failure writes ' +
      'nothing and answers with the status and code of the first failing operation, every failing one listed in ' +
      'details.errors ({ index, code, field?, error }). With "atomic": false, what can be applied is, and each ' +
      "result carries its operation's status or error.",
    type: BatchRecordsResponse,
    errors: [
      ...BODY_ERRORS,
      'object_not_found',
      'invalid_operation',
      'invalid_if_match',
      'record_not_found',
      ...VALUE_ERRORS,
      'missing_required_field',
      'record_referenced',
      'precondition_failed',
      'forbidden',
      ...DATA_ERRORS,
    ],
  })
  async batch(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Body() dto: BatchRecordsDto,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<BatchRecordsResponse> {
    const changeSet = newChangeSet('batch');
    const results = await this.data.batch(caller, name, dto.operations, dto.atomic ?? true, { signal, changeSet });
    void reply.header(CHANGE_SET_HEADER, changeSet.id);
    return { results, changeSetId: changeSet.id };
  }

  @Get('records/:id')
  @Roles('admin', 'member')
  @ApiHeader(IF_NONE_MATCH)
  @ApiRoute({
    summary: 'Read a record',
    schema: schemaRef('RecordResponse'),
    responseDescription: 'The record',
    headers: ETAG_HEADER,
    errors: ['object_not_found', 'record_not_found', ...DATA_ERRORS],
  })
  async get(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    const fresh = ifNoneMatch !== undefined;
    return sendVersioned(reply, await this.data.findOneVersioned(caller, name, id, undefined, { signal, fresh }));
  }

  @Patch('records/:id')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  @ApiHeader(IF_MATCH)
  @ApiRoute({
    summary: 'Update some fields of a record',
    schema: schemaRef('RecordResponse'),
    responseDescription: 'The updated record, with the changeSetId of the write',
    headers: WRITE_HEADERS,
    errors: [
      ...BODY_ERRORS,
      'invalid_if_match',
      'object_not_found',
      'record_not_found',
      ...VALUE_ERRORS,
      'precondition_failed',
      ...DATA_ERRORS,
    ],
  })
  async update(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Body() body: unknown,
    @Headers('if-match') ifMatch: string | undefined,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Record<string, unknown>> {
    return sendVersioned(reply, await this.data.update(caller, name, id, body, parseIfMatch(ifMatch), { signal }));
  }

  @Delete('records/:id')
  @Roles('admin', 'member')
  @HttpCode(204)
  @ApiHeader(IF_MATCH)
  @ApiRoute({
    summary: 'Move a record to the trash',
    description:
      'The record leaves every read, count and export at once; GET /api/v1/objects/{name}/trash lists it, ' +
      'POST …/trash/{id}/restore brings it back, and it is purged after TRASH_RETENTION_DAYS.',
    status: 204,
    headers: CHANGE_SET,
    errors: [
      'invalid_if_match',
      'object_not_found',
      'record_not_found',
      'record_referenced',
      'precondition_failed',
      ...DATA_ERRORS,
    ],
  })
  async delete(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('id') id: string,
    @Headers('if-match') ifMatch: string | undefined,
    @ClientSignal() signal: AbortSignal,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<void> {
    void reply.header(CHANGE_SET_HEADER, await this.data.delete(caller, name, id, parseIfMatch(ifMatch), { signal }));
  }

  @Post('aggregate')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiRoute({
    summary: 'Aggregate records: count, sum, avg, min, max, count_distinct, optionally grouped',
    type: AggregateResponse,
    errors: [
      ...BODY_ERRORS,
      'object_not_found',
      ...WHERE_ERRORS,
      'invalid_group_by',
      'invalid_aggregation',
      'invalid_aggregate_function',
      'invalid_order_by',
      ...DATA_ERRORS,
    ],
  })
  aggregate(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Body() dto: AggregateDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<AggregateResponse> {
    return this.records.aggregate(caller, name, dto, signal);
  }
}
