import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayUnique,
  IsArray,
  IsEmail,
  IsIn,
  IsNotEmpty,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  IsUUID,
  MaxLength,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { schemaRef } from '../common/openapi.schemas';
import { QueryInt } from '../common/pagination.dto';
import { ALERT_OPS, ALERT_PERIODS, type AlertOp, type AlertPeriod } from './alert-condition';

export const ACTION_TYPES = ['question', 'metric_alert'] as const;
export type ActionType = (typeof ACTION_TYPES)[number];
export const SCHEDULE_STATUSES = ['active', 'disabled'] as const;
export type ScheduleStatus = (typeof SCHEDULE_STATUSES)[number];
export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'skipped'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type ScheduleDeliveryStatus = (typeof DELIVERY_STATUSES)[number];
/** Most targets one schedule delivers to. */
export const MAX_DELIVER_TARGETS = 20;
export const MAX_GROUP_BY = 5;
export const MAX_RUNS_LIMIT = 200;
const MAX_MESSAGE = 20_000;

export class AlertConditionDto {
  @ApiProperty({
    enum: [...ALERT_OPS],
    description:
      'A threshold on the metric (`>`, `>=`, `<`, `<=`), or `change_pct_gt`: the last complete period grew by more than `value` percent over the one before it',
  })
  @IsIn(ALERT_OPS)
  op: AlertOp;

  @ApiProperty({ description: 'The threshold, or the change in percent for change_pct_gt' })
  @IsNumber({ allowNaN: false, allowInfinity: false })
  value: number;

  @ApiPropertyOptional({
    enum: [...ALERT_PERIODS],
    default: 'day',
    description: 'change_pct_gt only: the period compared (UTC days, ISO weeks, calendar months), on the metric time field',
  })
  @IsOptional()
  @IsIn(ALERT_PERIODS)
  period?: AlertPeriod;
}

export class ScheduleActionDto {
  @ApiProperty({ enum: [...ACTION_TYPES] })
  @IsIn(ACTION_TYPES)
  type: ActionType;

  @ApiPropertyOptional({ description: 'question: the agent asked', example: 'data_chat' })
  @ValidateIf((o: ScheduleActionDto) => o.type === 'question')
  @IsString()
  @IsNotEmpty()
  @MaxLength(63)
  agent?: string;

  @ApiPropertyOptional({
    description: 'question: the message sent to the agent',
    example: 'How many deals did we win yesterday?',
  })
  @ValidateIf((o: ScheduleActionDto) => o.type === 'question')
  @IsString()
  @IsNotEmpty()
  @MaxLength(MAX_MESSAGE)
  message?: string;

  @ApiPropertyOptional({ description: 'metric_alert: the metric queried (see GET /api/v1/metrics)' })
  @ValidateIf((o: ScheduleActionDto) => o.type === 'metric_alert')
  @IsString()
  @IsNotEmpty()
  @MaxLength(63)
  metric?: string;

  @ApiPropertyOptional({ allOf: [schemaRef('Where')], description: 'metric_alert: a filter on the metric dimensions' })
  @ValidateIf((o: ScheduleActionDto) => o.type === 'metric_alert' && o.where !== undefined)
  @IsObject()
  where?: Record<string, unknown>;

  @ApiPropertyOptional({
    type: [String],
    maxItems: MAX_GROUP_BY,
    description: 'metric_alert: dimensions; the condition is kept and fires per dimension value',
  })
  @ValidateIf((o: ScheduleActionDto) => o.type === 'metric_alert' && o.groupBy !== undefined)
  @IsArray()
  @ArrayMaxSize(MAX_GROUP_BY)
  @ArrayUnique()
  @IsString({ each: true })
  groupBy?: string[];

  @ApiPropertyOptional({ type: AlertConditionDto, description: 'metric_alert: when it fires' })
  @ValidateIf((o: ScheduleActionDto) => o.type === 'metric_alert')
  @IsObject()
  @ValidateNested()
  @Type(() => AlertConditionDto)
  condition?: AlertConditionDto;
}

export class DeliverTargetDto {
  @ApiPropertyOptional({
    format: 'uuid',
    description: "One of the owner's webhooks (one with empty objects and events receives only schedule deliveries)",
  })
  @ValidateIf((o: DeliverTargetDto) => o.webhook !== undefined || o.email === undefined)
  @IsUUID('all', { message: 'webhook must be a webhook id (or give email)' })
  webhook?: string;

  @ApiPropertyOptional({ format: 'email', description: 'An address the result is emailed to (SMTP_URL)' })
  @ValidateIf((o: DeliverTargetDto) => o.email !== undefined)
  @IsEmail({}, { message: 'email must be an email address' })
  @MaxLength(320)
  email?: string;
}

export class CreateScheduleDto {
  @ApiProperty({ example: 'Daily revenue alert' }) @IsString() @IsNotEmpty() @MaxLength(200) name: string;

  @ApiPropertyOptional({
    example: '0 9 * * 1-5',
    description: '5 fields (minute hour day month weekday), read in `timezone`; or give `every`',
  })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  cron?: string;

  @ApiPropertyOptional({
    example: '15m',
    description: 'An interval: a number and m, h or d (at least SCHEDULE_MIN_INTERVAL_S); or give `cron`',
  })
  @IsOptional()
  @IsString()
  @MaxLength(16)
  every?: string;

  @ApiPropertyOptional({ example: 'Europe/Paris', default: 'UTC', description: 'IANA time zone the cron is read in' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  timezone?: string;

  @ApiProperty({ type: ScheduleActionDto })
  @IsObject()
  @ValidateNested()
  @Type(() => ScheduleActionDto)
  action: ScheduleActionDto;

  @ApiProperty({ type: [DeliverTargetDto], maxItems: MAX_DELIVER_TARGETS })
  @IsArray()
  @ArrayMaxSize(MAX_DELIVER_TARGETS)
  @ValidateNested({ each: true })
  @Type(() => DeliverTargetDto)
  deliver: DeliverTargetDto[];
}

export class UpdateScheduleDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @IsNotEmpty() @MaxLength(200) name?: string;
  @ApiPropertyOptional({ description: 'A 5-field cron; replaces `every`' })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  cron?: string;
  @ApiPropertyOptional({ description: 'An interval; replaces `cron`' }) @IsOptional() @IsString() @MaxLength(16) every?: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(64) timezone?: string;

  @ApiPropertyOptional({ type: ScheduleActionDto })
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => ScheduleActionDto)
  action?: ScheduleActionDto;

  @ApiPropertyOptional({ type: [DeliverTargetDto], maxItems: MAX_DELIVER_TARGETS })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_DELIVER_TARGETS)
  @ValidateNested({ each: true })
  @Type(() => DeliverTargetDto)
  deliver?: DeliverTargetDto[];

  @ApiPropertyOptional({
    enum: [...SCHEDULE_STATUSES],
    description: '`disabled` pauses it; `active` runs it again from its next tick',
  })
  @IsOptional()
  @IsIn(SCHEDULE_STATUSES)
  status?: ScheduleStatus;
}

export class RunsQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_RUNS_LIMIT, default: 50 })
  @QueryInt(1, MAX_RUNS_LIMIT, `limit must be an integer from 1 to ${MAX_RUNS_LIMIT}`)
  limit?: number;
}

/** A schedule's action as stored and shown. */
export type ScheduleAction =
  | { type: 'question'; agent: string; message: string }
  | {
      type: 'metric_alert';
      metric: string;
      where?: Record<string, unknown>;
      groupBy?: string[];
      condition: { op: AlertOp; value: number; period?: AlertPeriod };
    };

/** A delivery target as stored and shown. */
export type DeliverTarget = { webhook: string } | { email: string };

export class ScheduleResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty() name: string;
  @ApiPropertyOptional({ description: 'Set when it runs on a cron' }) cron?: string;
  @ApiPropertyOptional({ description: 'Set when it runs on an interval' }) every?: string;
  @ApiProperty() timezone: string;
  @ApiProperty({ type: ScheduleActionDto }) action: ScheduleAction;
  @ApiProperty({ type: [DeliverTargetDto] }) deliver: DeliverTarget[];
  @ApiProperty({ enum: [...SCHEDULE_STATUSES] }) status: ScheduleStatus;
  @ApiPropertyOptional({ description: 'Why it is disabled' }) disabledReason?: string;
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true, description: 'The next tick (null while disabled)' })
  nextRunAt: string | null;
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true }) lastRunAt: string | null;
  @ApiProperty({ format: 'uuid', description: 'The API key (or user) it runs as' }) ownerKeyId: string;
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ format: 'date-time' }) updatedAt: string;
}

export class SchedulesResponse {
  @ApiProperty({ type: [ScheduleResponse] }) schedules: ScheduleResponse[];
}

export class RunDeliveryResponse {
  @ApiProperty({ format: 'uuid', description: 'Also the `webhook-id` header of a webhook delivery: the same on retries' })
  id: string;
  @ApiProperty({ enum: ['webhook', 'email'] }) kind: 'webhook' | 'email';
  @ApiProperty({ description: 'The webhook id or the email address' }) target: string;
  @ApiProperty({ enum: [...DELIVERY_STATUSES] }) status: ScheduleDeliveryStatus;
  @ApiProperty({ type: 'integer' }) attempts: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'HTTP status of the last webhook attempt' }) responseStatus:
    number | null;
  @ApiProperty({ type: 'string', nullable: true, description: 'e.g. email_not_configured' }) errorCode: string | null;
  @ApiProperty({ type: 'string', nullable: true }) error: string | null;
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true }) deliveredAt: string | null;
}

export class RunResponse {
  @ApiProperty({ format: 'uuid' }) id: string;
  @ApiProperty({ format: 'uuid' }) scheduleId: string;
  @ApiProperty({ enum: ['tick', 'manual'], description: '`tick`: the schedule was due; `manual`: POST /run' }) trigger:
    'tick' | 'manual';
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true, description: 'The tick it ran for' }) tickAt: string | null;
  @ApiProperty({
    enum: [...RUN_STATUSES],
    description: '`skipped`: not run (the owner key was revoked: the schedule is disabled)',
  })
  status: RunStatus;
  @ApiProperty({ type: 'string', nullable: true }) error: string | null;
  @ApiProperty({ type: 'string', format: 'uuid', nullable: true, description: 'question: the durable chat holding the answer' })
  chatId: string | null;
  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'object', additionalProperties: true },
    description: 'metric_alert: the rows that newly fired (empty: nothing fired)',
  })
  fired?: Record<string, unknown>[];
  @ApiProperty({ type: [RunDeliveryResponse] }) deliveries: RunDeliveryResponse[];
  @ApiProperty({ format: 'date-time' }) createdAt: string;
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true }) startedAt: string | null;
  @ApiProperty({ type: 'string', format: 'date-time', nullable: true }) finishedAt: string | null;
}

export class RunsResponse {
  @ApiProperty({ type: [RunResponse] }) runs: RunResponse[];
}
