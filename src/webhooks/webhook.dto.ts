import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayUnique, IsArray, IsIn, IsObject, IsOptional, IsString, MaxLength, ValidateIf } from 'class-validator';
import { schemaRef } from '../common/openapi.schemas';
import { QueryInt } from '../common/pagination.dto';
import type { ChangeOp } from '../data/change-outbox';
import type { DeliveryRow, DeliveryStatus, WebhookRow, WebhookStatus } from './webhook.repository';

export const WEBHOOK_EVENTS = ['create', 'update', 'delete'] as const;
export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed', 'skipped'] as const;
/** Most objects one webhook follows. */
export const MAX_WEBHOOK_OBJECTS = 50;
export const MAX_DELIVERIES_LIMIT = 500;

export class CreateWebhookDto {
  @ApiProperty({
    example: 'https://hooks.example.com/data',
    description:
      'http(s) URL the deliveries are POSTed to; private, loopback and link-local addresses are refused (also after DNS resolution) unless WEBHOOK_ALLOW_PRIVATE=true',
  })
  @IsString()
  @MaxLength(2048)
  url: string;

  @ApiProperty({
    type: [String],
    maxItems: MAX_WEBHOOK_OBJECTS,
    description: 'Objects whose record changes are delivered (each readable by the caller); empty: only schedule deliveries',
  })
  @IsArray()
  @ArrayMaxSize(MAX_WEBHOOK_OBJECTS)
  @ArrayUnique()
  @IsString({ each: true })
  @MaxLength(63, { each: true })
  objects: string[];

  @ApiProperty({
    type: 'array',
    items: { type: 'string', enum: [...WEBHOOK_EVENTS] },
    description: 'The kinds of change delivered',
  })
  @IsArray()
  @ArrayUnique()
  @IsIn(WEBHOOK_EVENTS, { each: true, message: 'each value in events must be one of create, update, delete' })
  events: ChangeOp[];

  @ApiPropertyOptional({
    allOf: [schemaRef('Where')],
    description: 'Only changes of records matching this filter (the record as the change left it, or as it was before a delete)',
  })
  @IsOptional()
  @IsObject()
  where?: Record<string, unknown>;

  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;
}

export class UpdateWebhookDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2048) url?: string;

  @ApiPropertyOptional({ type: [String], maxItems: MAX_WEBHOOK_OBJECTS })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_WEBHOOK_OBJECTS)
  @ArrayUnique()
  @IsString({ each: true })
  @MaxLength(63, { each: true })
  objects?: string[];

  @ApiPropertyOptional({ type: 'array', items: { type: 'string', enum: [...WEBHOOK_EVENTS] } })
  @IsOptional()
  @IsArray()
  @ArrayUnique()
  @IsIn(WEBHOOK_EVENTS, { each: true, message: 'each value in events must be one of create, update, delete' })
  events?: ChangeOp[];

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    nullable: true,
    description: 'A where filter (as in the records API), or null to remove it',
  })
  @IsOptional()
  @ValidateIf((_o, value) => value !== null)
  @IsObject()
  where?: Record<string, unknown> | null;

  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(2000) description?: string;

  @ApiPropertyOptional({
    enum: ['active', 'disabled'],
    description:
      '`active` enables a disabled webhook again (its changes since it was disabled are not sent); `disabled` pauses it',
  })
  @IsOptional()
  @IsIn(['active', 'disabled'])
  status?: WebhookStatus;
}

export class WebhookCreatedResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({
    example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    description: 'The signing secret (Standard Webhooks), shown only in this response',
  })
  secret: string;
}

export class WebhookResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() url: string;
  @ApiProperty({ type: [String] }) objects: string[];
  @ApiProperty({ type: 'array', items: { type: 'string', enum: [...WEBHOOK_EVENTS] } }) events: ChangeOp[];
  @ApiPropertyOptional({ allOf: [schemaRef('Where')] }) where?: Record<string, unknown>;
  @ApiPropertyOptional() description?: string;
  @ApiProperty({ enum: ['active', 'disabled'] }) status: WebhookStatus;
  @ApiPropertyOptional({ description: 'Why it is disabled' }) disabledReason?: string;
  @ApiPropertyOptional({ format: 'date-time', description: 'Every attempt failed since then (none succeeded since)' })
  failingSince?: string;
  @ApiProperty({ format: 'uuid', description: 'The API key (or user) that owns it: deliveries hold what it may read' })
  ownerKeyId: string;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) updatedAt: string;
}

export class WebhooksResponse {
  @ApiProperty({ type: [WebhookResponse] }) webhooks: WebhookResponse[];
}

export class DeliveriesQueryDto {
  @ApiPropertyOptional({ enum: [...DELIVERY_STATUSES] })
  @IsOptional()
  @IsIn(DELIVERY_STATUSES)
  status?: DeliveryStatus;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_DELIVERIES_LIMIT, default: 100 })
  @QueryInt(1, MAX_DELIVERIES_LIMIT, `limit must be an integer from 1 to ${MAX_DELIVERIES_LIMIT}`)
  limit?: number;
}

export class DeliveryResponse {
  @ApiProperty({ format: 'uuid', description: 'Also the `webhook-id` header of every attempt: the same on retries' }) id: string;
  @ApiProperty({ enum: ['record.created', 'record.updated', 'record.deleted'] }) type: string;
  @ApiProperty() object: string;
  @ApiProperty({ format: 'uuid' }) recordId: string;
  @ApiProperty({ description: "The change's cursor in the change feed" }) cursor: string;
  @ApiProperty({
    enum: [...DELIVERY_STATUSES],
    description:
      '`pending` (waiting for an attempt or its retry), `succeeded`, `failed` (no attempt succeeded in time), `skipped` (the owner may no longer read the change: not sent)',
  })
  status: DeliveryStatus;
  @ApiProperty({ type: 'integer' }) attempts: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'HTTP status of the last attempt (null: no response)' })
  responseStatus: number | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Duration of the last attempt, milliseconds' })
  durationMs: number | null;
  @ApiProperty({ type: 'string', nullable: true }) error: string | null;
  @ApiProperty({ type: 'string', nullable: true, description: 'The start of the last response body (at most 1 KB)' })
  responseBody: string | null;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true }) lastAttemptAt: string | null;
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true }) deliveredAt: string | null;
}

export class DeliveriesResponse {
  @ApiProperty({ type: [DeliveryResponse] }) deliveries: DeliveryResponse[];
}

const TYPES = { create: 'record.created', update: 'record.updated', delete: 'record.deleted' } as const;

export function toWebhookResponse(row: WebhookRow): WebhookResponse {
  const response: WebhookResponse = {
    id: row.id,
    url: row.url,
    objects: row.objects,
    events: row.events,
    status: row.status,
    ownerKeyId: row.ownerKeyId,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
  if (row.where) response.where = row.where as Record<string, unknown>;
  if (row.description) response.description = row.description;
  if (row.disabledReason) response.disabledReason = row.disabledReason;
  if (row.failingSince) response.failingSince = row.failingSince;
  return response;
}

export function toDeliveryResponse(row: DeliveryRow): DeliveryResponse {
  return {
    id: row.id,
    type: TYPES[row.op],
    object: row.object,
    recordId: row.recordId,
    cursor: row.cursor,
    status: row.status,
    attempts: row.attempts,
    responseStatus: row.responseStatus,
    durationMs: row.durationMs,
    error: row.error,
    responseBody: row.responseBody,
    createdAt: row.createdAt,
    lastAttemptAt: row.lastAttemptAt,
    deliveredAt: row.deliveredAt,
  };
}
