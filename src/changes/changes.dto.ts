import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, Matches } from 'class-validator';
import { QueryInt } from '../common/pagination.dto';
import { CHANGE_ACTORS, type ChangeActor } from '../data/change-actor';
import type { ChangeOp } from '../data/change-outbox';

/** Largest page of GET /changes. */
export const MAX_CHANGES_LIMIT = 1000;
export const DEFAULT_CHANGES_LIMIT = 100;
/** A cursor as clients send it: a non-negative integer of at most 18 digits (bigint, exact in text). */
export const CURSOR_PATTERN = /^\d{1,18}$/;

const AFTER_DOC = {
  pattern: CURSOR_PATTERN.source,
  description:
    "Only changes after this cursor (a change's `cursor`, or a page's `nextCursor`). Older than the retention kept: " +
    '410 cursor_expired (reload the records, then follow from a fresh cursor)',
};

export class ChangesQueryDto {
  @ApiPropertyOptional({ ...AFTER_DOC, description: `${AFTER_DOC.description}. Absent: from the oldest change kept` })
  @IsOptional()
  @Matches(CURSOR_PATTERN, { message: 'after must be a change cursor (an integer)' })
  after?: string;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_CHANGES_LIMIT, default: DEFAULT_CHANGES_LIMIT })
  @QueryInt(1, MAX_CHANGES_LIMIT, `limit must be an integer from 1 to ${MAX_CHANGES_LIMIT}`)
  limit?: number;
}

export class ChangesStreamQueryDto {
  @ApiPropertyOptional({
    ...AFTER_DOC,
    description: `${AFTER_DOC.description}. Last-Event-ID wins over it; neither: only changes from now on`,
  })
  @IsOptional()
  @Matches(CURSOR_PATTERN, { message: 'after must be a change cursor (an integer)' })
  after?: string;
}

export class ChangeResponse {
  @ApiProperty({ pattern: CURSOR_PATTERN.source, description: 'Position in the feed (increasing in commit order), as text' })
  cursor: string;
  @ApiProperty() object: string;
  @ApiProperty({ enum: ['create', 'update', 'delete'] }) op: ChangeOp;
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({
    type: [String],
    description: 'Fields the write set (every field on create, none on delete), those the caller may see',
  })
  changedFields: string[];
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'The record as the write left it, with the fields the caller may see (absent on delete)',
  })
  record?: Record<string, unknown>;
  @ApiProperty({ format: 'date-time' }) at: string;
  @ApiProperty({
    enum: CHANGE_ACTORS,
    description: 'Who wrote: `self` (the calling key), `other` (another key) or `system` (the server, with no key: sample data)',
  })
  actor: ChangeActor;
  @ApiProperty({
    format: 'uuid',
    nullable: true,
    type: String,
    description: 'The change set the write belongs to (null for changes older than change sets)',
  })
  changeSetId: string | null;
  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    description: 'Admins only: the API key that wrote (`system` for the server)',
  })
  keyId?: string | null;
}

export class ChangesResponse {
  @ApiProperty({ type: [ChangeResponse] }) changes: ChangeResponse[];
  @ApiProperty({
    pattern: CURSOR_PATTERN.source,
    description: 'Send as `after` for the next page: the last change read (changes the caller may not see count), or `after`',
  })
  nextCursor: string;
}
