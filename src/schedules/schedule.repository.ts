import { Injectable } from '@nestjs/common';
import { CompiledQuery } from 'kysely';
import { DataPool, type DataSession } from '../database/data-pool';
import type { DeliverTarget, RunStatus, ScheduleAction, ScheduleDeliveryStatus, ScheduleStatus } from './schedule.dto';
import { columnSets } from '../database/column-sets';

export interface ScheduleRow {
  id: string;
  ownerKeyId: string;
  name: string;
  cron: string | null;
  everySeconds: number | null;
  timezone: string;
  action: ScheduleAction;
  deliver: DeliverTarget[];
  status: ScheduleStatus;
  disabledReason: string | null;
  nextRunAt: string | null;
  lastRunAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface RunRow {
  id: string;
  scheduleId: string;
  trigger: 'tick' | 'manual';
  tickAt: string | null;
  status: RunStatus;
  error: string | null;
  chatId: string | null;
  fired: Record<string, unknown>[] | null;
  payload: Record<string, unknown> | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface ScheduleDeliveryRow {
  id: string;
  runId: string;
  kind: 'webhook' | 'email';
  target: string;
  status: ScheduleDeliveryStatus;
  attempts: number;
  responseStatus: number | null;
  errorCode: string | null;
  error: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

/** A statement with its bound values, typed by the rows it returns. */
function raw<T = unknown>(text: string, values: readonly unknown[] = []): CompiledQuery<T> {
  return CompiledQuery.raw(text, [...values]);
}

const iso = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

const SCHEDULE_COLUMNS =
  `s."id"::text as "id", s."owner_key_id"::text as "ownerKeyId", s."name", s."cron", s."every_seconds" as "everySeconds", ` +
  `s."timezone", s."action", s."deliver", s."status", s."disabled_reason" as "disabledReason", ` +
  `${iso('s."next_run_at"')} as "nextRunAt", ${iso('s."last_run_at"')} as "lastRunAt", ` +
  `${iso('s."created_at"')} as "createdAt", ${iso('s."updated_at"')} as "updatedAt"`;

const RUN_COLUMNS =
  `r."id"::text as "id", r."schedule_id"::text as "scheduleId", r."trigger", ${iso('r."tick_at"')} as "tickAt", r."status", ` +
  `r."error", r."chat_id"::text as "chatId", r."fired", r."payload", ${iso('r."created_at"')} as "createdAt", ` +
  `${iso('r."started_at"')} as "startedAt", ${iso('r."finished_at"')} as "finishedAt"`;

const DELIVERY_COLUMNS =
  `d."id"::text as "id", d."run_id"::text as "runId", d."kind", d."target", d."status", d."attempts", ` +
  `d."response_status" as "responseStatus", d."error_code" as "errorCode", d."error", ` +
  `${iso('d."created_at"')} as "createdAt", ${iso('d."delivered_at"')} as "deliveredAt"`;

/** The schedules' tables: schedules, their runs, the runs' deliveries, alert states per dimension value. */
@Injectable()
export class ScheduleRepository {
  constructor(private readonly pool: DataPool) {}

  /** Writes schedules and their runs only: no record changes, so no change feed reader is woken (the dispatcher would wake itself). */
  transaction<T>(work: (session: DataSession) => Promise<T>): Promise<T> {
    return this.pool.transaction(work, { changes: [] });
  }

  async insert(
    schedule: Pick<ScheduleRow, 'id' | 'ownerKeyId' | 'name' | 'cron' | 'everySeconds' | 'timezone' | 'action' | 'deliver'> & {
      nextRunAt: Date | null;
    },
  ): Promise<void> {
    await this.pool
      .session()
      .query(
        raw(
          `insert into "schedules" ("id", "owner_key_id", "name", "cron", "every_seconds", "timezone", "action", "deliver", "next_run_at") ` +
            `values ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9)`,
          [
            schedule.id,
            schedule.ownerKeyId,
            schedule.name,
            schedule.cron,
            schedule.everySeconds,
            schedule.timezone,
            JSON.stringify(schedule.action),
            JSON.stringify(schedule.deliver),
            schedule.nextRunAt,
          ],
        ),
      );
  }

  async find(id: string, session: DataSession = this.pool.session()): Promise<ScheduleRow | undefined> {
    const [row] = await session.query(raw<ScheduleRow>(`select ${SCHEDULE_COLUMNS} from "schedules" s where s."id" = $1`, [id]));
    return row;
  }

  /** Schedules of one owner key (every schedule without one), newest first. */
  async list(ownerKeyId?: string): Promise<ScheduleRow[]> {
    return this.pool
      .session()
      .query(
        raw<ScheduleRow>(
          `select ${SCHEDULE_COLUMNS} from "schedules" s where ($1::uuid is null or s."owner_key_id" = $1::uuid) ` +
            `order by s."created_at" desc, s."id" desc limit 1000`,
          [ownerKeyId ?? null],
        ),
      );
  }

  async update(
    id: string,
    patch: Partial<Pick<ScheduleRow, 'name' | 'cron' | 'everySeconds' | 'timezone' | 'action' | 'deliver' | 'status'>> & {
      nextRunAt?: Date | null;
    },
  ): Promise<void> {
    const values: unknown[] = [id];
    const { sets, set } = columnSets(values);
    if (patch.name !== undefined) set('name', patch.name);
    if (patch.cron !== undefined) set('cron', patch.cron);
    if (patch.everySeconds !== undefined) set('every_seconds', patch.everySeconds);
    if (patch.timezone !== undefined) set('timezone', patch.timezone);
    if (patch.action !== undefined) set('action', JSON.stringify(patch.action), '::jsonb');
    if (patch.deliver !== undefined) set('deliver', JSON.stringify(patch.deliver), '::jsonb');
    if (patch.status !== undefined) {
      set('status', patch.status);
      if (patch.status === 'active') sets.push(`"disabled_reason" = null`);
    }
    if (patch.nextRunAt !== undefined) set('next_run_at', patch.nextRunAt);
    sets.push(`"updated_at" = now()`);
    await this.pool.session().query(raw(`update "schedules" set ${sets.join(', ')} where "id" = $1`, values));
  }

  async delete(id: string): Promise<void> {
    await this.pool.session().query(raw(`delete from "schedules" where "id" = $1`, [id]));
  }

  /** Stops a schedule: no tick is due any more. */
  async disable(id: string, reason: string): Promise<void> {
    await this.pool
      .session()
      .query(
        raw(
          `update "schedules" set "status" = 'disabled', "disabled_reason" = $2, "next_run_at" = null, "updated_at" = now() where "id" = $1`,
          [id, reason],
        ),
      );
  }

  /**
   * Active schedules whose next tick is due, locked for this transaction; rows another replica holds
   * are skipped (it is queueing their tick).
   */
  async lockDue(session: DataSession, limit: number): Promise<ScheduleRow[]> {
    return session.query(
      raw<ScheduleRow>(
        `select ${SCHEDULE_COLUMNS} from "schedules" s where s."status" = 'active' and s."next_run_at" <= now() ` +
          `order by s."next_run_at" limit $1 for update skip locked`,
        [limit],
      ),
    );
  }

  /** Moves a schedule's next tick (null: it has none). */
  async advance(session: DataSession, id: string, nextRunAt: Date | null): Promise<void> {
    await session.query(raw(`update "schedules" set "next_run_at" = $2, "last_run_at" = now() where "id" = $1`, [id, nextRunAt]));
  }

  /** A queued run; false when the schedule already has a run for this tick. */
  async insertRun(
    session: DataSession,
    run: { id: string; scheduleId: string; trigger: 'tick' | 'manual'; tickAt: string | null },
  ): Promise<boolean> {
    const rows = await session.query(
      raw(
        `insert into "schedule_runs" ("id", "schedule_id", "trigger", "tick_at") values ($1, $2, $3, $4) ` +
          `on conflict ("schedule_id", "tick_at") do nothing returning "id"`,
        [run.id, run.scheduleId, run.trigger, run.tickAt],
      ),
    );
    return rows.length > 0;
  }

  async findRun(id: string, session: DataSession = this.pool.session()): Promise<RunRow | undefined> {
    const [row] = await session.query(raw<RunRow>(`select ${RUN_COLUMNS} from "schedule_runs" r where r."id" = $1`, [id]));
    return row;
  }

  /** A schedule's runs, newest first. */
  async runs(scheduleId: string, limit: number): Promise<RunRow[]> {
    return this.pool
      .session()
      .query(
        raw<RunRow>(
          `select ${RUN_COLUMNS} from "schedule_runs" r where r."schedule_id" = $1 order by r."created_at" desc, r."id" desc limit $2`,
          [scheduleId, limit],
        ),
      );
  }

  /** Claims a queued run for this attempt; false when it already ended (an earlier attempt finished it). */
  async startRun(id: string): Promise<boolean> {
    const rows = await this.pool
      .session()
      .query(
        raw(
          `update "schedule_runs" set "status" = 'running', "started_at" = coalesce("started_at", now()) ` +
            `where "id" = $1 and "status" in ('queued', 'running') returning "id"`,
          [id],
        ),
      );
    return rows.length > 0;
  }

  async setChat(runId: string, chatId: string): Promise<void> {
    await this.pool.session().query(raw(`update "schedule_runs" set "chat_id" = $2 where "id" = $1`, [runId, chatId]));
  }

  /** Ends a run; in `session` with what it fired and queued, when given. */
  async finishRun(
    id: string,
    outcome: { status: RunStatus; error?: string; fired?: Record<string, unknown>[]; payload?: Record<string, unknown> },
    session: DataSession = this.pool.session(),
  ): Promise<void> {
    await session.query(
      raw(
        `update "schedule_runs" set "status" = $2, "error" = $3, "fired" = $4::jsonb, "payload" = $5::jsonb, "finished_at" = now() where "id" = $1`,
        [
          id,
          outcome.status,
          outcome.error ?? null,
          outcome.fired === undefined ? null : JSON.stringify(outcome.fired),
          outcome.payload === undefined ? null : JSON.stringify(outcome.payload),
        ],
      ),
    );
  }

  /**
   * Whether each dimension value's condition held at the alert's last run, by dimension key, read under a lock
   * on the schedule held until `session` ends: two runs of one alert (a run now beside a tick, a retry beside a
   * late tick) take turns, so the second sees what the first stored and does not fire the same rows again.
   */
  async lockAlertStates(session: DataSession, scheduleId: string): Promise<Map<string, boolean>> {
    await session.query(raw(`select 1 from "schedules" where "id" = $1 for no key update`, [scheduleId]));
    const rows = await session.query(
      raw<{ dimension: string; holds: boolean }>(
        `select "dimension", "holds" from "schedule_alert_states" where "schedule_id" = $1`,
        [scheduleId],
      ),
    );
    return new Map(rows.map((r) => [r.dimension, r.holds]));
  }

  /**
   * Stores what held at this run: each dimension value seen, and every other one stored before as not
   * holding (a group that is gone, or no longer visible, fires again when it comes back holding).
   */
  async saveAlertStates(
    session: DataSession,
    scheduleId: string,
    states: { dimension: string; holds: boolean }[],
  ): Promise<void> {
    await session.query(
      raw(
        `update "schedule_alert_states" set "holds" = false, "updated_at" = now() ` +
          `where "schedule_id" = $1 and "holds" and not ("dimension" = any($2::text[]))`,
        [scheduleId, states.map((s) => s.dimension)],
      ),
    );
    if (!states.length) return;
    await session.query(
      raw(
        `insert into "schedule_alert_states" ("schedule_id", "dimension", "holds") ` +
          `select $1, d, h from unnest($2::text[], $3::boolean[]) as x(d, h) ` +
          `on conflict ("schedule_id", "dimension") do update set "holds" = excluded."holds", "updated_at" = now()`,
        [scheduleId, states.map((s) => s.dimension), states.map((s) => s.holds)],
      ),
    );
  }

  async insertDeliveries(
    session: DataSession,
    runId: string,
    deliveries: { id: string; kind: 'webhook' | 'email'; target: string }[],
  ): Promise<void> {
    if (!deliveries.length) return;
    await session.query(
      raw(
        `insert into "schedule_deliveries" ("id", "run_id", "kind", "target", "position") ` +
          `select i, $1, k, t, p from unnest($2::uuid[], $3::text[], $4::text[]) with ordinality as x(i, k, t, p)`,
        [runId, deliveries.map((d) => d.id), deliveries.map((d) => d.kind), deliveries.map((d) => d.target)],
      ),
    );
  }

  /** The deliveries of some runs, each run's in the order of its targets. */
  async deliveriesOf(runIds: string[]): Promise<ScheduleDeliveryRow[]> {
    if (!runIds.length) return [];
    return this.pool
      .session()
      .query(
        raw<ScheduleDeliveryRow>(
          `select ${DELIVERY_COLUMNS} from "schedule_deliveries" d where d."run_id" = any($1::uuid[]) order by d."run_id", d."position"`,
          [runIds],
        ),
      );
  }

  /** A delivery with its run's payload and its schedule's owner, for sending it. */
  async deliveryToSend(
    id: string,
  ): Promise<
    (ScheduleDeliveryRow & { payload: Record<string, unknown> | null; ownerKeyId: string; scheduleId: string }) | undefined
  > {
    const [row] = await this.pool
      .session()
      .query(
        raw<ScheduleDeliveryRow & { payload: Record<string, unknown> | null; ownerKeyId: string; scheduleId: string }>(
          `select ${DELIVERY_COLUMNS}, r."payload", s."owner_key_id"::text as "ownerKeyId", s."id"::text as "scheduleId" ` +
            `from "schedule_deliveries" d join "schedule_runs" r on r."id" = d."run_id" join "schedules" s on s."id" = r."schedule_id" ` +
            `where d."id" = $1`,
          [id],
        ),
      );
    return row;
  }

  /** Counts an attempt before it is made. */
  async startAttempt(id: string): Promise<number> {
    const [row] = await this.pool
      .session()
      .query(
        raw<{ attempts: number }>(
          `update "schedule_deliveries" set "attempts" = "attempts" + 1 where "id" = $1 returning "attempts"`,
          [id],
        ),
      );
    return row?.attempts ?? 0;
  }

  async recordAttempt(
    id: string,
    outcome: { status: ScheduleDeliveryStatus; responseStatus?: number; errorCode?: string; error?: string },
  ): Promise<void> {
    await this.pool
      .session()
      .query(
        raw(
          `update "schedule_deliveries" set "status" = $2::text, "response_status" = $3, "error_code" = $4, "error" = $5, ` +
            `"delivered_at" = case when $2::text = 'succeeded' then now() else "delivered_at" end where "id" = $1`,
          [id, outcome.status, outcome.responseStatus ?? null, outcome.errorCode ?? null, outcome.error ?? null],
        ),
      );
  }
}
