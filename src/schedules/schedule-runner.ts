import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Caller } from '../auth/caller';
import { ChatService } from '../chats/durable/chat.service';
import type { ChatMessageResponse } from '../chats/durable/chat.dto';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataPool, type DataSession } from '../database/data-pool';
import { AccessService } from '../governance/access.service';
import { JobQueue, type QueuedJob } from '../jobs/job-queue.service';
import { MetricService } from '../metrics/metric.service';
import { comparedPeriods, evaluate, newlyFired, type EvaluatedRow } from './alert-condition';
import type { DeliverTarget, ScheduleAction } from './schedule.dto';
import { RUN_QUEUE, SCHEDULE_DELIVERY_QUEUE, type RunJobData, type ScheduleDeliveryJobData } from './schedule-jobs';
import { ScheduleRepository, type RunRow, type ScheduleRow } from './schedule.repository';

/** Groups one alert reads at most. */
const MAX_ALERT_ROWS = 1_000;
/** How often a question run looks at its chat while the turn runs, milliseconds. */
const CHAT_POLL_MS = 250;
/** Chat statuses of a turn still in progress. */
const IN_PROGRESS = new Set(['pending', 'running']);

/** A run that ended without its result; not retried. */
class RunFailed extends Error {}

type QuestionAction = Extract<ScheduleAction, { type: 'question' }>;
type AlertAction = Extract<ScheduleAction, { type: 'metric_alert' }>;

/** What a run delivers: the body of a schedule event. */
export type ScheduleEvent =
  | {
      type: 'question.answered';
      timestamp: string;
      data: { schedule: { id: string; name: string }; chatId: string; answer: string; grounding: unknown };
    }
  | {
      type: 'alert.fired';
      timestamp: string;
      data: {
        schedule: { id: string; name: string };
        metric: string;
        condition: AlertAction['condition'];
        rows: Record<string, unknown>[];
      };
    };

/**
 * Works the run jobs: each run as the schedule's owner, the caller built afresh from its key (a key
 * revoked since: the run is `skipped` and the schedule disabled; a policy narrowed since: the run
 * reads under the narrower access). A question starts a durable chat as the owner and waits (at most
 * SCHEDULE_QUESTION_TIMEOUT_S) for its answer; a metric alert queries the metric and fires the groups
 * whose condition became true since its last run. What a run delivers is stored on the run and one
 * delivery job per target is queued in the transaction that ends the run.
 */
@Injectable()
export class ScheduleRunner {
  private readonly logger = new Logger(ScheduleRunner.name);

  constructor(
    private readonly repo: ScheduleRepository,
    private readonly access: AccessService,
    private readonly chats: ChatService,
    private readonly metrics: MetricService,
    private readonly pool: DataPool,
    private readonly jobs: JobQueue,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    jobs.define<RunJobData>({
      queue: {
        name: RUN_QUEUE,
        // A run whose replica died is retried once its lease ends; a question run then waits for the chat it started.
        retryLimit: 2,
        retryDelay: 5,
        retryBackoff: true,
        retryDelayMax: 60,
        // The wait for the answer, then reading it and ending the run: twice the margin beyond the wait.
        expireInSeconds: config.scheduleQuestionTimeoutS + 2 * config.jobLeaseMarginS,
        retentionSeconds: 7 * 86_400,
        notify: true,
      },
      groupConcurrency: config.webhookOwnerConcurrency,
      handler: (job) => this.run(job),
    });
  }

  async run(job: QueuedJob<RunJobData>): Promise<void> {
    const run = await this.repo.findRun(job.data.runId);
    if (!run || !(await this.repo.startRun(run.id))) return; // deleted with its schedule, or ended by an earlier attempt
    const schedule = await this.repo.find(run.scheduleId);
    if (!schedule) return;
    let owner: Caller;
    try {
      owner = await this.access.keyCaller(schedule.ownerKeyId, { fresh: true });
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      const reason = "The owner's API key was revoked";
      await this.repo.disable(schedule.id, reason);
      await this.repo.finishRun(run.id, { status: 'skipped', error: `Not run: ${reason}` });
      return;
    }
    try {
      if (schedule.action.type === 'question') await this.ask(owner, schedule, run, schedule.action);
      else await this.alert(owner, schedule, run, schedule.action);
    } catch (error) {
      const retried = !(error instanceof DomainError) && !(error instanceof RunFailed) && job.retryCount < job.retryLimit;
      this.logger.warn({
        msg: 'schedule run failed',
        scheduleId: schedule.id,
        runId: run.id,
        retried,
        error: (error as Error).message,
      });
      if (retried) throw error;
      await this.repo.finishRun(run.id, { status: 'failed', error: (error as Error).message });
    }
  }

  private async ask(owner: Caller, schedule: ScheduleRow, run: RunRow, action: QuestionAction): Promise<void> {
    // The chat's id is stored on the run before the chat is made: a replica that dies in between leaves
    // the id, and the retry makes the chat under it rather than a second chat (a second turn) for one run.
    let chatId = run.chatId;
    if (!chatId) {
      chatId = randomUUID();
      await this.repo.setChat(run.id, chatId);
    }
    let chat = await this.chats.view(owner, chatId).catch((error: unknown) => {
      if (error instanceof DomainError && error.code === 'chat_not_found') return undefined;
      throw error;
    });
    chat ??= await this.chats.create(owner, { agent: action.agent, message: action.message, title: schedule.name }, chatId);
    const deadline = Date.now() + this.config.scheduleQuestionTimeoutS * 1000;
    while (IN_PROGRESS.has(chat.status) && Date.now() < deadline) {
      await sleep(CHAT_POLL_MS);
      chat = await this.chats.view(owner, chatId);
    }
    if (chat.status === 'error') {
      throw new RunFailed(`The chat failed: ${chat.lastError?.message ?? 'no error given'}`);
    }
    if (chat.status !== 'waiting') {
      throw new RunFailed(
        IN_PROGRESS.has(chat.status)
          ? `No answer within ${this.config.scheduleQuestionTimeoutS} s (the chat goes on)`
          : `The chat stopped in ${chat.status}: a scheduled question cannot answer client tools or approvals`,
      );
    }
    const { messages } = await this.chats.messages(owner, chatId, {});
    const answer = [...messages].reverse().find((m) => m.role === 'assistant' && textOf(m));
    const event: ScheduleEvent = {
      type: 'question.answered',
      timestamp: new Date().toISOString(),
      data: {
        schedule: { id: schedule.id, name: schedule.name },
        chatId,
        answer: answer ? textOf(answer) : '',
        grounding: answer?.metadata?.grounding ?? null,
      },
    };
    await this.finish(schedule, run, () => Promise.resolve({ event }));
  }

  private async alert(owner: Caller, schedule: ScheduleRow, run: RunRow, action: AlertAction): Promise<void> {
    const groupBy = action.groupBy ?? [];
    const query = (range: { from?: string; to?: string }) =>
      this.metrics.query(
        owner,
        { metrics: [action.metric], groupBy, where: action.where, ...range, limit: MAX_ALERT_ROWS },
        this.pool.session(),
      );
    let rows: EvaluatedRow[];
    if (action.condition.op === 'change_pct_gt') {
      const periods = comparedPeriods(action.condition.period ?? 'day', new Date(), schedule.timezone);
      const [current, previous] = [await query(periods.current), await query(periods.previous)];
      rows = evaluate(action.metric, groupBy, action.condition, current.rows, previous.rows);
    } else {
      rows = evaluate(action.metric, groupBy, action.condition, (await query({})).rows);
    }
    await this.finish(schedule, run, async (tx) => {
      const before = await this.repo.lockAlertStates(tx, schedule.id);
      const fired = newlyFired(rows, before).map((row) => ({
        ...row.dimensions,
        [action.metric]: row.value,
        ...(row.previous !== undefined && { previous: row.previous, changePct: row.changePct }),
      }));
      await this.repo.saveAlertStates(
        tx,
        schedule.id,
        rows.map((r) => ({ dimension: r.key, holds: r.holds })),
      );
      const event: ScheduleEvent | undefined = fired.length
        ? {
            type: 'alert.fired',
            timestamp: new Date().toISOString(),
            data: {
              schedule: { id: schedule.id, name: schedule.name },
              metric: action.metric,
              condition: action.condition,
              rows: fired,
            },
          }
        : undefined;
      return { event, fired };
    });
  }

  /**
   * Ends the run as succeeded in one transaction: what `outcome` decides in it (the event to deliver, an alert's
   * newly fired rows), the run, one delivery (and its job) per target.
   */
  private async finish(
    schedule: ScheduleRow,
    run: RunRow,
    outcome: (tx: DataSession) => Promise<{ event?: ScheduleEvent; fired?: Record<string, unknown>[] }>,
  ): Promise<void> {
    await this.repo.transaction(async (tx) => {
      const { event, fired } = await outcome(tx);
      const deliveries = event ? schedule.deliver.map((target) => ({ id: randomUUID(), ...kindOf(target) })) : [];
      await this.repo.finishRun(run.id, { status: 'succeeded', fired, payload: event }, tx);
      await this.repo.insertDeliveries(tx, run.id, deliveries);
      await this.jobs.insert(
        SCHEDULE_DELIVERY_QUEUE,
        deliveries.map((d) => ({
          id: d.id,
          data: { deliveryId: d.id } satisfies ScheduleDeliveryJobData,
          group: { id: schedule.ownerKeyId },
        })),
        tx,
      );
    });
  }
}

function kindOf(target: DeliverTarget): { kind: 'webhook' | 'email'; target: string } {
  return 'webhook' in target ? { kind: 'webhook', target: target.webhook } : { kind: 'email', target: target.email };
}

function textOf(message: ChatMessageResponse): string {
  return (message.parts as { type: string; text?: string }[])
    .filter((p) => p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('');
}
