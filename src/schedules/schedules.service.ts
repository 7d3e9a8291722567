import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { AgentService } from '../agents/agent.service';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataPool } from '../database/data-pool';
import { AccessService } from '../governance/access.service';
import { JobQueue } from '../jobs/job-queue.service';
import { MetricService } from '../metrics/metric.service';
import { WebhooksService } from '../webhooks/webhooks.service';
import { comparedPeriods } from './alert-condition';
import {
  CreateScheduleDto,
  DeliverTarget,
  DeliverTargetDto,
  RunResponse,
  RunsQueryDto,
  RunsResponse,
  ScheduleAction,
  ScheduleActionDto,
  ScheduleResponse,
  SchedulesResponse,
  UpdateScheduleDto,
} from './schedule.dto';
import { RUN_QUEUE, type RunJobData } from './schedule-jobs';
import { toRunResponse, toScheduleResponse } from './schedule.mapper';
import { ScheduleRepository, type ScheduleRow } from './schedule.repository';
import { checkCron, checkTimezone, nextTick, parseEvery, type Timing } from './schedule-timing';

/** A schedule's timing, action and targets as checked and stored. */
interface Definition {
  cron: string | null;
  everySeconds: number | null;
  timezone: string;
  action: ScheduleAction;
  deliver: DeliverTarget[];
}

/** The timing of a stored schedule. */
export function timingOf(row: Pick<ScheduleRow, 'cron' | 'everySeconds' | 'timezone'>): Timing {
  return row.cron !== null ? { cron: row.cron, timezone: row.timezone } : { everySeconds: row.everySeconds! };
}

/**
 * Schedules as their owners manage them: a member sees and changes only its own key's schedules (any
 * other is schedule_not_found), an admin every one. What a schedule runs is checked as its owner: the
 * agent it may use, the metric it may query (with the where and groupBy), the webhooks it owns.
 */
@Injectable()
export class SchedulesService {
  constructor(
    private readonly repo: ScheduleRepository,
    private readonly access: AccessService,
    private readonly agents: AgentService,
    private readonly metrics: MetricService,
    private readonly webhooks: WebhooksService,
    private readonly pool: DataPool,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async create(caller: Caller, dto: CreateScheduleDto): Promise<ScheduleResponse> {
    const definition = await this.check(caller, {
      cron: dto.cron,
      every: dto.every,
      timezone: dto.timezone,
      action: dto.action,
      deliver: dto.deliver,
    });
    const id = randomUUID();
    await this.repo.insert({
      id,
      ownerKeyId: caller.keyId,
      name: dto.name,
      ...definition,
      nextRunAt: nextTick(timingOf(definition), new Date()),
    });
    return toScheduleResponse((await this.repo.find(id))!);
  }

  async list(caller: Caller): Promise<SchedulesResponse> {
    const rows = await this.repo.list(caller.role === 'admin' ? undefined : caller.keyId);
    return { schedules: rows.map(toScheduleResponse) };
  }

  async get(caller: Caller, id: string): Promise<ScheduleResponse> {
    return toScheduleResponse(await this.owned(caller, id));
  }

  /**
   * Changes what is given, checked as the schedule's owner whoever edits it. A new timing, or enabling
   * it again, sets its next tick from now; disabling it clears it.
   */
  async update(caller: Caller, id: string, dto: UpdateScheduleDto): Promise<ScheduleResponse> {
    const schedule = await this.owned(caller, id);
    if (dto.cron !== undefined && dto.every !== undefined) {
      throw new DomainError('invalid_schedule', 'Give cron or every, not both', { field: 'cron' });
    }
    const owner = await this.ownerOf(schedule);
    const retimed = dto.cron !== undefined || dto.every !== undefined || dto.timezone !== undefined;
    const definition = await this.check(owner, {
      cron: dto.every !== undefined ? undefined : (dto.cron ?? schedule.cron ?? undefined),
      every:
        dto.every !== undefined
          ? dto.every
          : dto.cron === undefined && schedule.everySeconds !== null
            ? `${schedule.everySeconds / 60}m`
            : undefined,
      timezone: dto.timezone ?? schedule.timezone,
      action: dto.action ?? schedule.action,
      deliver: dto.deliver ?? schedule.deliver,
      // Only what changed is checked again: an unchanged action or target list stands as it was accepted.
      skipAction: dto.action === undefined,
      skipDeliver: dto.deliver === undefined,
    });
    const status = dto.status ?? schedule.status;
    const enabling = dto.status === 'active' && schedule.status !== 'active';
    let nextRunAt: Date | null | undefined;
    if (status === 'disabled') nextRunAt = null;
    else if (retimed || enabling) nextRunAt = nextTick(timingOf(definition), new Date());
    await this.repo.update(id, {
      name: dto.name,
      ...(retimed ? { cron: definition.cron, everySeconds: definition.everySeconds, timezone: definition.timezone } : {}),
      action: dto.action === undefined ? undefined : definition.action,
      deliver: dto.deliver === undefined ? undefined : definition.deliver,
      status: dto.status,
      nextRunAt,
    });
    return toScheduleResponse((await this.repo.find(id))!);
  }

  async delete(caller: Caller, id: string): Promise<void> {
    await this.owned(caller, id);
    await this.repo.delete(id);
  }

  async runs(caller: Caller, id: string, query: RunsQueryDto): Promise<RunsResponse> {
    await this.owned(caller, id);
    const runs = await this.repo.runs(id, query.limit ?? 50);
    const deliveries = await this.repo.deliveriesOf(runs.map((r) => r.id));
    return { runs: runs.map((run) => toRunResponse(run, deliveries)) };
  }

  /** Queues a run now, whatever its timing (a disabled schedule too); its ticks are not moved. */
  async runNow(caller: Caller, id: string): Promise<RunResponse> {
    const schedule = await this.owned(caller, id);
    const runId = randomUUID();
    // Read in the transaction that queues it: the run as queued, whatever a worker does with it once committed.
    const run = await this.repo.transaction(async (tx) => {
      await this.repo.insertRun(tx, { id: runId, scheduleId: schedule.id, trigger: 'manual', tickAt: null });
      await this.jobs.insert(
        RUN_QUEUE,
        [{ id: runId, data: { runId } satisfies RunJobData, group: { id: schedule.ownerKeyId } }],
        tx,
      );
      return (await this.repo.findRun(runId, tx))!;
    });
    return toRunResponse(run, []);
  }

  /** The schedule, when the caller may manage it; schedule_not_found otherwise. */
  private async owned(caller: Caller, id: string): Promise<ScheduleRow> {
    const schedule = isUuid(id) ? await this.repo.find(id) : undefined;
    if (!schedule || (caller.role !== 'admin' && schedule.ownerKeyId !== caller.keyId)) {
      throw new DomainError('schedule_not_found', `No schedule ${id}`);
    }
    return schedule;
  }

  private async ownerOf(schedule: ScheduleRow): Promise<Caller> {
    try {
      return await this.access.keyCaller(schedule.ownerKeyId, { fresh: true });
    } catch {
      throw new DomainError('validation_failed', "The schedule's owner key was revoked: the schedule can no longer change");
    }
  }

  /** The timing, action and targets checked as `owner`. */
  private async check(
    owner: Caller,
    input: {
      cron?: string;
      every?: string;
      timezone?: string;
      action: ScheduleActionDto | ScheduleAction;
      deliver: (DeliverTargetDto | DeliverTarget)[];
      skipAction?: boolean;
      skipDeliver?: boolean;
    },
  ): Promise<Definition> {
    if ((input.cron === undefined) === (input.every === undefined)) {
      throw new DomainError('invalid_schedule', 'Give exactly one of cron (5 fields) or every (e.g. "15m")', { field: 'cron' });
    }
    const timezone = checkTimezone(input.timezone ?? 'UTC');
    const cron = input.cron === undefined ? null : checkCron(input.cron, timezone);
    const everySeconds = input.every === undefined ? null : parseEvery(input.every, this.config.scheduleMinIntervalS);
    const action = input.skipAction ? (input.action as ScheduleAction) : await this.checkAction(owner, input.action);
    const deliver = input.skipDeliver ? (input.deliver as DeliverTarget[]) : await this.checkDeliver(owner, input.deliver);
    return { cron, everySeconds, timezone, action, deliver };
  }

  private async checkAction(owner: Caller, action: ScheduleActionDto | ScheduleAction): Promise<ScheduleAction> {
    if (action.type === 'question') {
      const agent = await this.agents.loadForRun(action.agent!, owner);
      return { type: 'question', agent: agent.name, message: action.message! };
    }
    const condition = action.condition!;
    const groupBy = action.groupBy ?? [];
    const metric = (await this.metrics.listFor(owner)).find((m) => m.name === action.metric);
    if (!metric) throw new DomainError('metric_not_found', `Unknown metric "${action.metric}"`, { metric: action.metric });
    if (condition.op === 'change_pct_gt' && !metric.timeField) {
      throw new DomainError('invalid_schedule', `change_pct_gt needs a metric with a time field; "${metric.name}" has none`, {
        field: 'action.condition.op',
      });
    }
    // The query the alert will run, run once now as the owner: an unknown dimension or a bad where is refused here.
    const period = condition.op === 'change_pct_gt' ? comparedPeriods(condition.period ?? 'day', new Date()).current : {};
    await this.metrics.query(
      owner,
      { metrics: [metric.name], groupBy, where: action.where, ...period, limit: 1 },
      this.pool.session(),
    );
    return {
      type: 'metric_alert',
      metric: metric.name,
      ...(action.where !== undefined && { where: action.where }),
      ...(groupBy.length && { groupBy }),
      condition: {
        op: condition.op,
        value: condition.value,
        ...(condition.op === 'change_pct_gt' && { period: condition.period ?? 'day' }),
      },
    };
  }

  /** Each target is one webhook of the owner or one email address. */
  private async checkDeliver(owner: Caller, deliver: (DeliverTargetDto | DeliverTarget)[]): Promise<DeliverTarget[]> {
    const targets: DeliverTarget[] = [];
    for (const [index, target] of deliver.entries()) {
      const { webhook, email } = target as DeliverTargetDto;
      if ((webhook === undefined) === (email === undefined)) {
        throw new DomainError('validation_failed', `deliver.${index} must have exactly one of webhook or email`, {
          errors: [`deliver.${index} must have exactly one of webhook or email`],
        });
      }
      if (webhook !== undefined) {
        if (!(await this.webhooks.targetOf(webhook, owner.keyId))) {
          throw new DomainError('webhook_not_found', `No webhook ${webhook} of the schedule's owner`, {
            field: `deliver.${index}.webhook`,
          });
        }
        targets.push({ webhook });
      } else {
        targets.push({ email: email! });
      }
    }
    return targets;
  }
}
