import type { RunResponse, ScheduleResponse } from './schedule.dto';
import type { RunRow, ScheduleDeliveryRow, ScheduleRow } from './schedule.repository';
import { formatEvery } from './schedule-timing';

export function toScheduleResponse(row: ScheduleRow): ScheduleResponse {
  const response: ScheduleResponse = {
    id: row.id,
    name: row.name,
    timezone: row.timezone,
    action: row.action,
    deliver: row.deliver,
    status: row.status,
    nextRunAt: row.nextRunAt,
    lastRunAt: row.lastRunAt,
    ownerKeyId: row.ownerKeyId,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
  if (row.cron !== null) response.cron = row.cron;
  if (row.everySeconds !== null) response.every = formatEvery(row.everySeconds);
  if (row.disabledReason) response.disabledReason = row.disabledReason;
  return response;
}

export function toRunResponse(row: RunRow, deliveries: readonly ScheduleDeliveryRow[]): RunResponse {
  const response: RunResponse = {
    id: row.id,
    scheduleId: row.scheduleId,
    trigger: row.trigger,
    tickAt: row.tickAt,
    status: row.status,
    error: row.error,
    chatId: row.chatId,
    deliveries: deliveries
      .filter((d) => d.runId === row.id)
      .map((d) => ({
        id: d.id,
        kind: d.kind,
        target: d.target,
        status: d.status,
        attempts: d.attempts,
        responseStatus: d.responseStatus,
        errorCode: d.errorCode,
        error: d.error,
        deliveredAt: d.deliveredAt,
      })),
    createdAt: row.createdAt,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
  };
  if (row.fired !== null) response.fired = row.fired;
  return response;
}
