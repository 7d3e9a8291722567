import { Controller, Delete, Get, Header, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Readable } from 'node:stream';
import { AcceptsStreamToken, Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, DATA_ERRORS, WHERE_ERRORS } from '../common/api-route.decorator';
import { abortWhenClientLeaves, hijack } from '../common/fastify-reply';
import { ContentLength, CsvBody } from './csv-body.parser';
import { ExportService } from './export.service';
import { ImportService } from './import.service';
import { JobsService } from './jobs.service';
import { ExportQueryDto, ImportQueryDto, ImportStartedResponse, JobResponse } from './transfer.dto';

const JOB_EVENTS =
  'Server-Sent Events, each `data:` one JSON object: `progress` `{ status, rowsRead, rowsWritten, rowsRejected }` as the ' +
  'counts change, then `done` (the whole job, as GET /jobs/{id} returns it) once it has ended, and the stream closes. ' +
  'Comments (`: keep-alive`) keep idle streams open.';

@ApiTags('records')
@Controller('api/v1/objects/:name')
export class TransferController {
  constructor(
    private readonly imports: ImportService,
    private readonly exports: ExportService,
  ) {}

  @Post('import')
  @Roles('admin', 'member')
  @HttpCode(202)
  @ApiConsumes('text/csv')
  @ApiBody({
    description:
      'A CSV file (RFC 4180, UTF-8, an optional BOM): a header row, then one row per record. Cells are read per field ' +
      'type: numbers plain, booleans true/false (yes/no, 1/0), dates ISO, multiselect "a;b" or a JSON array, json as ' +
      'JSON text, lookups by id; an empty cell leaves the field unset. created_at and updated_at columns are skipped; ' +
      'an id column keeps the ids, except for a key under a row filter on the object (such a row: validation_failed).',
    schema: { type: 'string' },
  })
  @ApiRoute({
    summary: 'Import records from CSV as a job',
    description:
      'The header is checked before the 202 (unknown columns: 400 unknown_column); the rows are then written in the ' +
      'background, as the caller, through the same checks as single writes. Follow GET /api/v1/jobs/{jobId}. An upload ' +
      'that sends nothing for IMPORT_STALL_TIMEOUT_MS while the import waits for it fails (upload_stalled: the job, or ' +
      'this request before the header arrived); one whose connection closes first fails as invalid_csv.',
    status: 202,
    type: ImportStartedResponse,
    errors: [
      'validation_failed',
      'unsupported_media_type',
      'payload_too_large',
      'invalid_csv',
      'upload_stalled',
      'unknown_column',
      'invalid_mapping',
      'object_not_found',
    ],
  })
  start(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Query() query: ImportQueryDto,
    @CsvBody() body: Readable,
    @ContentLength() contentLength: number | undefined,
  ): Promise<ImportStartedResponse> {
    return this.imports.start(caller, name, body, query, contentLength);
  }

  @Get('records/export.csv')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Export every matching record as CSV, streamed',
    description:
      'Header: the field names. Values: numbers plain, booleans true/false, dates and datetimes ISO, multiselect "a;b" ' +
      '(a JSON array when an option holds ";"), json as JSON text, null empty. With ?bom=true the file starts with a ' +
      'UTF-8 byte order mark. A key streams at most EXPORT_MAX_PER_KEY exports at once and a server EXPORT_CONCURRENCY ' +
      '(beyond: 429 too_many_exports with Retry-After). An export whose client reads nothing for EXPORT_STALL_TIMEOUT_MS, ' +
      'or that runs past EXPORT_MAX_DURATION_MS, is cut short: the response ends without its last chunk.',
    responseDescription: 'The CSV file',
    csv: 'A header row of field names, then one row per record',
    errors: [
      'validation_failed',
      'object_not_found',
      ...WHERE_ERRORS,
      'invalid_order_by',
      'invalid_fields',
      'too_many_exports',
      ...DATA_ERRORS,
    ],
  })
  async export(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Query() query: ExportQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.exports.export(caller, name, query, () => hijack(reply), abortWhenClientLeaves(reply));
  }
}

@ApiTags('jobs')
@Controller('api/v1/jobs')
export class JobsController {
  constructor(private readonly jobs: JobsService) {}

  @Get(':id')
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'Read a job: status, counts and rejected rows', type: JobResponse, errors: ['job_not_found'] })
  get(@Caller() caller: Caller, @Param('id') id: string): Promise<JobResponse> {
    return this.jobs.get(caller, id);
  }

  @Delete(':id')
  @Roles('admin', 'member')
  @HttpCode(202)
  @ApiRoute({
    summary: 'Cancel a running import',
    description:
      'The job stops at its next chunk boundary (1,000 rows), never inside a chunk, and ends with status cancelled. ' +
      'An all-or-nothing import (atomic, the default, or dryRun) writes nothing; with atomic=false the chunks committed ' +
      'before stay and rowsWritten counts them. The rest of a CSV body still uploading is refused. Answers the job as ' +
      'it is when the cancel is recorded (cancelRequested true, usually still running): follow GET /api/v1/jobs/{id} ' +
      "or its stream until it ends. A member cancels its key's jobs (another key's job is 404), an admin any job; a " +
      'job that has already ended is 409 job_finished.',
    status: 202,
    type: JobResponse,
    errors: ['job_not_found', 'job_finished'],
  })
  cancel(@Caller() caller: Caller, @Param('id') id: string): Promise<JobResponse> {
    return this.jobs.cancel(caller, id);
  }

  @Get(':id/errors.csv')
  @Roles('admin', 'member')
  @Header('content-type', 'text/csv; charset=utf-8')
  @ApiRoute({
    summary: "A job's rejected rows as CSV (row, field, code, error)",
    responseDescription: 'The CSV file',
    csv: 'A header row (row, field, code, error), then one row per rejected row kept',
    errors: ['job_not_found'],
  })
  errors(@Caller() caller: Caller, @Param('id') id: string): Promise<string> {
    return this.jobs.errorsCsv(caller, id);
  }

  @Get(':id/stream')
  @Roles('admin', 'member')
  @AcceptsStreamToken()
  @ApiRoute({ summary: "Follow a job's progress (SSE)", events: JOB_EVENTS, errors: ['job_not_found', 'too_many_streams'] })
  async stream(@Caller() caller: Caller, @Param('id') id: string, @Res() reply: FastifyReply): Promise<void> {
    await this.jobs.stream(caller, id, () => hijack(reply));
  }
}
