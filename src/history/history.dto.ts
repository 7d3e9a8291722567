import { ApiProperty, ApiPropertyOptional, type SchemaObject } from '@nestjs/swagger';
import { IsOptional, IsString, Matches } from 'class-validator';
import { QueryInt } from '../common/pagination.dto';
import { CHANGE_ACTORS, type ChangeActor } from '../data/change-actor';
import type { ChangeVia } from '../data/change-outbox';

export const CHANGE_VIAS: readonly ChangeVia[] = ['api', 'batch', 'import', 'approval', 'revert', 'restore'];
export const HISTORY_OPS = ['create', 'update', 'delete', 'restore'] as const;

export class HistoryQueryDto {
  @ApiPropertyOptional({ description: 'A nextCursor of this history: the versions older than it' })
  @IsOptional()
  @Matches(/^\d{1,18}$/, { message: 'cursor must be a nextCursor of this history (an integer)' })
  cursor?: string;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 })
  @QueryInt(1, 100, 'limit must be an integer from 1 to 100')
  limit?: number;
}

/** FieldChange as a schema object, for maps of field → change. */
const FIELD_CHANGE_SCHEMA: SchemaObject = {
  type: 'object',
  properties: { before: { $ref: '#/components/schemas/FieldValue' }, after: { $ref: '#/components/schemas/FieldValue' } },
  required: ['before', 'after'],
};

export class FieldChange {
  @ApiProperty({ description: 'The value before the change (null: none, or not kept)' }) before: unknown;
  @ApiProperty({ description: 'The value after the change (null on delete)' }) after: unknown;
}

export class VersionResponse {
  @ApiProperty({ description: 'The version: GET …/history/{version} reads the record as it was then' }) version: string;
  @ApiProperty({ format: 'date-time' }) at: string;
  @ApiProperty({ enum: HISTORY_OPS, description: 'restore: brought back from the trash' })
  op: (typeof HISTORY_OPS)[number];
  @ApiProperty({ enum: CHANGE_ACTORS }) actor: ChangeActor;
  @ApiPropertyOptional({ type: String, nullable: true, description: 'The API key that wrote it (admins only)' }) keyId?:
    string | null;
  @ApiProperty({
    type: String,
    format: 'uuid',
    nullable: true,
    description: 'The change set it belongs to (null for changes older than change sets)',
  })
  changeSetId: string | null;
  @ApiProperty({ enum: CHANGE_VIAS }) via: ChangeVia;
  @ApiProperty({
    type: 'object',
    additionalProperties: FIELD_CHANGE_SCHEMA,
    description: 'Each field it changed that the caller may see: { before, after }',
  })
  changes: Record<string, FieldChange>;
}

export class HistoryResponse {
  @ApiProperty({ type: [VersionResponse], description: 'Newest first' }) versions: VersionResponse[];
  @ApiProperty({ nullable: true, type: String, description: 'The next (older) page: pass it as cursor' }) nextCursor:
    string | null;
}

export class RestoreVersionDto {
  @ApiProperty({ description: 'The version to write back (a `version` of the history)', example: '1042' })
  @IsString({ message: 'version must be a version of the record history, as a string' })
  @Matches(/^\d{1,18}$/, { message: 'version must be a version of the record history (an integer, as a string)' })
  version: string;
}

export class TrashQueryDto {
  @ApiPropertyOptional({ description: 'A nextCursor of the trash' })
  @IsOptional()
  @IsString()
  cursor?: string;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 200, default: 50 })
  @QueryInt(1, 200, 'limit must be an integer from 1 to 200')
  limit?: number;
}

export class TrashedRecordResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({ format: 'date-time' }) deletedAt: string;
  @ApiProperty({ enum: CHANGE_ACTORS }) actor: ChangeActor;
  @ApiPropertyOptional({ type: String, nullable: true, description: 'The API key that deleted it (admins only)' }) keyId?:
    string | null;
  @ApiProperty({ type: String, format: 'uuid', nullable: true }) changeSetId: string | null;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'The record as it was deleted (the fields the caller may see)',
  })
  record: Record<string, unknown>;
}

export class TrashResponse {
  @ApiProperty({ type: [TrashedRecordResponse], description: 'Most recently deleted first' }) records: TrashedRecordResponse[];
  @ApiProperty({ nullable: true, type: String }) nextCursor: string | null;
}

export class ChangeSetQueryDto {
  @ApiPropertyOptional({ description: 'Only change sets of this object' })
  @IsOptional()
  @IsString()
  object?: string;

  @ApiPropertyOptional({
    enum: ['self', 'any'],
    default: 'any',
    description: 'self: only those of this key (its writes and approvals)',
  })
  @IsOptional()
  @Matches(/^(self|any)$/, { message: 'actor must be "self" or "any"' })
  actor?: 'self' | 'any';

  @ApiPropertyOptional({ description: 'A nextCursor of this list' })
  @IsOptional()
  @IsString()
  cursor?: string;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 })
  @QueryInt(1, 100, 'limit must be an integer from 1 to 100')
  limit?: number;
}

export class ChangeSetRecordResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({ enum: ['create', 'update', 'delete'] }) op: 'create' | 'update' | 'delete';
  @ApiProperty({ type: 'object', additionalProperties: FIELD_CHANGE_SCHEMA })
  changes: Record<string, FieldChange>;
}

export class ChangeSetResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({ format: 'date-time' }) at: string;
  @ApiProperty({ enum: CHANGE_ACTORS }) actor: ChangeActor;
  @ApiPropertyOptional({ type: String, nullable: true, description: 'The API key that wrote it (admins only)' }) keyId?:
    string | null;
  @ApiProperty({ enum: CHANGE_VIAS }) via: ChangeVia;
  @ApiProperty() object: string;
  @ApiProperty({ type: 'integer', description: 'Records it changed that the caller may read' }) records: number;
  @ApiPropertyOptional({ description: 'The tool call of an approved agent write' }) toolCallId?: string;
  @ApiPropertyOptional({ description: 'The chat of an approved agent write' }) chatId?: string;
  @ApiPropertyOptional({ format: 'uuid', description: 'The change set that reverted it' }) revertedBy?: string;
  @ApiPropertyOptional({ format: 'uuid', description: 'The change set this one reverted' }) reverts?: string;
  @ApiPropertyOptional({ type: [ChangeSetRecordResponse], description: 'Each record it changed (GET by id; the first 1,000)' })
  changes?: ChangeSetRecordResponse[];
}

export class ChangeSetsResponse {
  @ApiProperty({ type: [ChangeSetResponse], description: 'Newest first' }) changeSets: ChangeSetResponse[];
  @ApiProperty({ nullable: true, type: String }) nextCursor: string | null;
}

export class RevertResponse {
  @ApiProperty({ format: 'uuid', description: "The revert's own change set (revert it to redo)" }) changeSetId: string;
}
