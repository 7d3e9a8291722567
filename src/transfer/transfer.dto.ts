import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, MaxLength } from 'class-validator';
import { ERRORS } from '../common/error-codes';
import type { JobKind, JobRow } from './job.repository';

export class ImportQueryDto {
  @ApiPropertyOptional({
    maxLength: 50_000,
    description:
      'Which field each CSV column fills, as JSON text: {"CSV column":"field name"}. Columns it does not name are skipped. ' +
      'Without it, each header names a field by name or label (case-insensitive), and an unknown one is a 400 unknown_column',
  })
  @IsOptional()
  @IsString()
  @MaxLength(50_000)
  mapping?: string;

  @ApiPropertyOptional({ enum: ['true', 'false'], description: 'true: check every row, write nothing (default false)' })
  @IsOptional()
  @IsIn(['true', 'false'])
  dryRun?: string;

  @ApiPropertyOptional({
    enum: ['true', 'false'],
    description:
      'true (the default): all or nothing, any rejected row writes nothing; false: write the good rows, reject the bad',
  })
  @IsOptional()
  @IsIn(['true', 'false'])
  atomic?: string;
}

export class ExportQueryDto {
  @ApiPropertyOptional({ maxLength: 20_000, description: 'A Where filter as JSON text, as for GET .../records' })
  @IsOptional()
  @IsString()
  @MaxLength(20_000)
  where?: string;

  @ApiPropertyOptional({ maxLength: 2_000, description: 'Sort order as JSON text, as for GET .../records (ties broken by id)' })
  @IsOptional()
  @IsString()
  @MaxLength(2_000)
  orderBy?: string;

  @ApiPropertyOptional({
    maxLength: 5_000,
    description: 'Comma-separated field names: the columns, in this order (default: every field)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(5_000)
  fields?: string;

  @ApiPropertyOptional({
    maxLength: 100,
    description: 'A saved view of the object: its where (ANDed with where), its orderBy and fields unless given here',
  })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  view?: string;

  @ApiPropertyOptional({
    enum: ['true', 'false'],
    description: 'true: start with a UTF-8 byte order mark (for spreadsheet apps)',
  })
  @IsOptional()
  @IsIn(['true', 'false'])
  bom?: string;
}

export class ImportStartedResponse {
  @ApiProperty({ format: 'uuid', description: 'Follow it at GET /api/v1/jobs/{id} or /api/v1/jobs/{id}/stream' }) jobId: string;
}

export class RowErrorResponse {
  @ApiProperty({ type: 'integer', description: 'The record number in the file: the header is row 1, the first data row 2' })
  row: number;
  @ApiPropertyOptional({ description: 'The field to blame, when one is' }) field?: string;
  @ApiProperty({ enum: Object.keys(ERRORS) }) code: string;
  @ApiProperty() error: string;
}

export class JobFailureResponse {
  @ApiProperty({ enum: Object.keys(ERRORS) }) code: string;
  @ApiProperty() error: string;
}

export class JobResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({
    enum: ['import', 'stored_fill'],
    description:
      'import: a CSV import; stored_fill: filling a stored computed field (rowsRead: records done, rowsWritten: values written)',
  })
  kind: JobKind;
  @ApiProperty() objectName: string;
  @ApiProperty({
    enum: ['running', 'done', 'failed', 'cancelled'],
    description: 'cancelled: stopped by DELETE /api/v1/jobs/{id} at a chunk boundary; the counts say what it did before',
  })
  status: string;
  @ApiProperty() dryRun: boolean;
  @ApiProperty() atomic: boolean;
  @ApiProperty({ type: 'integer', description: 'Data rows read so far' }) rowsRead: number;
  @ApiProperty({
    type: 'integer',
    description: 'Rows written (committed); 0 for an all-or-nothing import until it ends, and after it failed or was cancelled',
  })
  rowsWritten: number;
  @ApiProperty({ type: 'integer' }) rowsRejected: number;
  @ApiProperty({
    format: 'uuid',
    description: 'The change set of the rows it wrote (the job id): GET or revert it at /api/v1/change-sets/{id}',
  })
  changeSetId: string;
  @ApiProperty({ type: [RowErrorResponse], description: 'The first 1,000 rejected rows (rowsRejected counts them all)' })
  errors: RowErrorResponse[];
  @ApiPropertyOptional({ type: JobFailureResponse, description: 'Why the job failed as a whole (status failed)' })
  failure?: JobFailureResponse;
  @ApiProperty({ description: 'Whether DELETE /api/v1/jobs/{id} asked the job to stop' }) cancelRequested: boolean;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time', nullable: true }) finishedAt: string | null;
}

export function toJobResponse(job: JobRow): JobResponse {
  return {
    id: job.id,
    kind: job.kind,
    objectName: job.objectName,
    status: job.status,
    dryRun: job.dryRun,
    atomic: job.atomic,
    rowsRead: job.rowsRead,
    rowsWritten: job.rowsWritten,
    rowsRejected: job.rowsRejected,
    changeSetId: job.id,
    errors: job.errors,
    ...(job.failure ? { failure: job.failure } : {}),
    cancelRequested: job.cancelRequested,
    createdAt: job.createdAt.toISOString(),
    finishedAt: job.finishedAt?.toISOString() ?? null,
  };
}
