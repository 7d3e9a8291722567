import { Injectable } from '@nestjs/common';
import { CompiledQuery } from 'kysely';
import { DataPool, type DataSession } from '../database/data-pool';
import type { ChangeOp } from '../data/change-outbox';
import { columnSets } from '../database/column-sets';

export type WebhookStatus = 'active' | 'disabled';
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'skipped';

export interface WebhookRow {
  id: string;
  ownerKeyId: string;
  url: string;
  objects: string[];
  events: ChangeOp[];
  where: unknown;
  description: string | null;
  secret: string;
  status: WebhookStatus;
  disabledReason: string | null;
  failingSince: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface DeliveryRow {
  id: string;
  webhookId: string;
  object: string;
  recordId: string;
  cursor: string;
  op: ChangeOp;
  status: DeliveryStatus;
  attempts: number;
  responseStatus: number | null;
  responseBody: string | null;
  durationMs: number | null;
  error: string | null;
  createdAt: string;
  queuedAt: string;
  lastAttemptAt: string | null;
  deliveredAt: string | null;
  /** Seconds since the delivery was (re)queued. */
  ageSeconds: number;
  /** A page's job handed it to a job of its record (WebhookDeliveryWorker.handOn): that job sends it. */
  handedOn: boolean;
}

/** A change to deliver, found by the dispatcher. */
export interface NewDelivery {
  id: string;
  object: string;
  recordId: string;
  cursor: string;
  op: ChangeOp;
}

/**
 * How one run of a job ended a delivery, for recordOutcomes: an attempt made (`sent`, its response), none
 * made (`settled`: its status and why), or the attempt counted by startAttempts not made after all (`unsent`:
 * the count and the time of the attempt before it are put back; it stays pending).
 */
export type DeliveryOutcome =
  | {
      id: string;
      kind: 'sent';
      status: DeliveryStatus;
      responseStatus?: number;
      responseBody?: string;
      durationMs: number;
      error?: string;
    }
  | { id: string; kind: 'settled'; status: 'failed' | 'skipped'; error: string }
  | { id: string; kind: 'unsent'; lastAttemptAt: string | null };

/** A subscription's place in one object's change feed, locked for its dispatch. */
export interface LockedCursor {
  webhook: WebhookRow;
  object: string;
  cursor: string;
  /** False when another dispatch committed after this transaction began (see WebhookDispatcher). */
  inOrder: boolean;
}

/** A statement with its bound values, typed by the rows it returns. */
function raw<T = unknown>(text: string, values: readonly unknown[] = []): CompiledQuery<T> {
  return CompiledQuery.raw(text, [...values]);
}

const iso = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

const WEBHOOK_COLUMNS =
  `w."id"::text as "id", w."owner_key_id"::text as "ownerKeyId", w."url", w."objects", w."events", w."where", ` +
  `w."description", w."secret", w."status", w."disabled_reason" as "disabledReason", ${iso('w."failing_since"')} as "failingSince", ` +
  `${iso('w."created_at"')} as "createdAt", ${iso('w."updated_at"')} as "updatedAt"`;

const DELIVERY_COLUMNS =
  `d."id"::text as "id", d."webhook_id"::text as "webhookId", d."object", d."record_id"::text as "recordId", ` +
  `d."cursor"::text as "cursor", d."op", d."status", d."attempts", d."response_status" as "responseStatus", ` +
  `d."response_body" as "responseBody", d."duration_ms" as "durationMs", d."error", ${iso('d."created_at"')} as "createdAt", ` +
  `${iso('d."queued_at"')} as "queuedAt", ${iso('d."last_attempt_at"')} as "lastAttemptAt", ${iso('d."delivered_at"')} as "deliveredAt", ` +
  `extract(epoch from now() - d."queued_at")::float8 as "ageSeconds", d."handed_on" as "handedOn"`;

/** The webhooks' tables: subscriptions, their cursors in the change feed, their deliveries. */
@Injectable()
export class WebhookRepository {
  constructor(private readonly pool: DataPool) {}

  /** Writes webhooks, their cursors and deliveries only: no record changes, so no change feed reader is woken (the dispatcher would wake itself). */
  transaction<T>(work: (session: DataSession) => Promise<T>): Promise<T> {
    return this.pool.transaction(work, { changes: [] });
  }

  async insert(
    session: DataSession,
    webhook: Pick<WebhookRow, 'id' | 'ownerKeyId' | 'url' | 'objects' | 'events' | 'where' | 'description' | 'secret'>,
    cursors: { object: string; cursor: string }[],
  ): Promise<void> {
    await session.query(
      raw(
        `insert into "webhooks" ("id", "owner_key_id", "url", "objects", "events", "where", "description", "secret") ` +
          `values ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)`,
        [
          webhook.id,
          webhook.ownerKeyId,
          webhook.url,
          webhook.objects,
          webhook.events,
          webhook.where === undefined || webhook.where === null ? null : JSON.stringify(webhook.where),
          webhook.description,
          webhook.secret,
        ],
      ),
    );
    await this.addCursors(session, webhook.id, cursors);
  }

  async addCursors(session: DataSession, webhookId: string, cursors: { object: string; cursor: string }[]): Promise<void> {
    if (!cursors.length) return;
    await session.query(
      raw(
        `insert into "webhook_cursors" ("webhook_id", "object", "cursor") ` +
          `select $1, o, c::bigint from unnest($2::text[], $3::text[]) as x(o, c) on conflict do nothing`,
        [webhookId, cursors.map((c) => c.object), cursors.map((c) => c.cursor)],
      ),
    );
  }

  async removeCursorsExcept(session: DataSession, webhookId: string, objects: string[]): Promise<void> {
    await session.query(
      raw(`delete from "webhook_cursors" where "webhook_id" = $1 and not ("object" = any($2::text[]))`, [webhookId, objects]),
    );
  }

  async find(id: string, session: DataSession = this.pool.session()): Promise<WebhookRow | undefined> {
    const [row] = await session.query(raw<WebhookRow>(`select ${WEBHOOK_COLUMNS} from "webhooks" w where w."id" = $1`, [id]));
    return row;
  }

  /** Webhooks of `ownerKeyId` (all of them when undefined), newest first. */
  list(ownerKeyId: string | undefined): Promise<WebhookRow[]> {
    return this.pool
      .session()
      .query(
        raw<WebhookRow>(
          `select ${WEBHOOK_COLUMNS} from "webhooks" w where ($1::uuid is null or w."owner_key_id" = $1) ` +
            `order by w."created_at" desc, w."id" desc limit 1000`,
          [ownerKeyId ?? null],
        ),
      );
  }

  async update(
    session: DataSession,
    id: string,
    patch: Partial<Pick<WebhookRow, 'url' | 'objects' | 'events' | 'where' | 'description' | 'status'>>,
  ): Promise<void> {
    const values: unknown[] = [id];
    const { sets, set } = columnSets(values);
    if (patch.url !== undefined) set('url', patch.url);
    if (patch.objects !== undefined) set('objects', patch.objects);
    if (patch.events !== undefined) set('events', patch.events);
    if (patch.where !== undefined) set('where', patch.where === null ? null : JSON.stringify(patch.where), '::jsonb');
    if (patch.description !== undefined) set('description', patch.description);
    if (patch.status !== undefined) {
      set('status', patch.status);
      // Enabled again: its failures start over; disabled by its owner: that is the reason.
      sets.push(`"failing_since" = null`);
      set('disabled_reason', patch.status === 'disabled' ? 'Disabled by its owner' : null);
    }
    await session.query(raw(`update "webhooks" set ${[...sets, `"updated_at" = now()`].join(', ')} where "id" = $1`, values));
  }

  async delete(id: string): Promise<void> {
    await this.pool.session().query(raw(`delete from "webhooks" where "id" = $1`, [id]));
  }

  async disable(id: string, reason: string, session: DataSession = this.pool.session()): Promise<void> {
    await session.query(
      raw(
        `update "webhooks" set "status" = 'disabled', "disabled_reason" = $2, "updated_at" = now() where "id" = $1 and "status" = 'active'`,
        [id, reason],
      ),
    );
  }

  /** Every (active webhook, object) whose cursor the dispatcher follows, of `objects` only when given. */
  activeCursors(objects?: readonly string[]): Promise<{ webhookId: string; object: string }[]> {
    // After every commit, on every replica: on the server's own connections, not a request's.
    return this.pool
      .systemSession()
      .query(
        raw<{ webhookId: string; object: string }>(
          `select c."webhook_id"::text as "webhookId", c."object" from "webhook_cursors" c ` +
            `join "webhooks" w on w."id" = c."webhook_id" where w."status" = 'active' and ($1::text[] is null or c."object" = any($1)) ` +
            `order by c."webhook_id", c."object"`,
          [objects ? [...objects] : null],
        ),
      );
  }

  /**
   * Locks the cursor of an active webhook's object for this transaction; undefined when another replica
   * holds it (it dispatches those changes) or the webhook is gone or disabled.
   */
  async lockCursor(session: DataSession, webhookId: string, object: string): Promise<LockedCursor | undefined> {
    const [row] = await session.query(
      raw<WebhookRow & { cursor: string; inOrder: boolean }>(
        `select ${WEBHOOK_COLUMNS}, c."cursor"::text as "cursor", c."dispatched_at" <= now() as "inOrder" ` +
          `from "webhook_cursors" c join "webhooks" w on w."id" = c."webhook_id" ` +
          `where c."webhook_id" = $1 and c."object" = $2 and w."status" = 'active' for update of c skip locked`,
        [webhookId, object],
      ),
    );
    if (!row) return undefined;
    const { cursor, inOrder, ...webhook } = row;
    return { webhook, object, cursor, inOrder };
  }

  /** Inserts the deliveries (each change once: a repeated dispatch adds nothing), returning those inserted. */
  async insertDeliveries(session: DataSession, webhookId: string, deliveries: NewDelivery[]): Promise<NewDelivery[]> {
    if (!deliveries.length) return [];
    const inserted = await session.query(
      raw<{ id: string }>(
        `insert into "webhook_deliveries" ("id", "webhook_id", "object", "record_id", "cursor", "op") ` +
          `select i::uuid, $1, o, r::uuid, c::bigint, op from unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) as x(i, o, r, c, op) ` +
          `on conflict do nothing returning "id"::text as "id"`,
        [
          webhookId,
          deliveries.map((d) => d.id),
          deliveries.map((d) => d.object),
          deliveries.map((d) => d.recordId),
          deliveries.map((d) => d.cursor),
          deliveries.map((d) => d.op),
        ],
      ),
    );
    const ids = new Set(inserted.map((r) => r.id));
    return deliveries.filter((d) => ids.has(d.id));
  }

  async moveCursor(session: DataSession, webhookId: string, object: string, cursor: string): Promise<void> {
    await session.query(
      raw(
        `update "webhook_cursors" set "cursor" = $3::bigint, "dispatched_at" = clock_timestamp() where "webhook_id" = $1 and "object" = $2`,
        [webhookId, object, cursor],
      ),
    );
  }

  async findDelivery(webhookId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
    const [row] = await this.pool
      .session()
      .query(
        raw<DeliveryRow>(`select ${DELIVERY_COLUMNS} from "webhook_deliveries" d where d."id" = $1 and d."webhook_id" = $2`, [
          deliveryId,
          webhookId,
        ]),
      );
    return row;
  }

  /** Marks deliveries as handed to a job of their record, in the transaction that queues that job. */
  async markHandedOn(session: DataSession, ids: readonly string[]): Promise<void> {
    if (!ids.length) return;
    await session.query(raw(`update "webhook_deliveries" set "handed_on" = true where "id" = any($1::uuid[])`, [[...ids]]));
  }

  /** The deliveries of `ids` that still exist, in order of their cursors. */
  deliveriesByIds(ids: readonly string[]): Promise<DeliveryRow[]> {
    return this.pool
      .session()
      .query(
        raw<DeliveryRow>(
          `select ${DELIVERY_COLUMNS} from "webhook_deliveries" d where d."id" = any($1::uuid[]) order by d."cursor", d."id"`,
          [[...ids]],
        ),
      );
  }

  /**
   * The records of `deliveries` (of one webhook) that have a pending delivery of an earlier change
   * outside them: another job has it, and the record's later changes go after it.
   */
  async heldRecords(
    webhookId: string,
    deliveries: readonly Pick<DeliveryRow, 'id' | 'recordId' | 'cursor'>[],
  ): Promise<Set<string>> {
    const first = new Map<string, string>();
    for (const d of deliveries) if (!first.has(d.recordId)) first.set(d.recordId, d.cursor);
    if (!first.size) return new Set();
    const rows = await this.pool
      .session()
      .query(
        raw<{ recordId: string }>(
          `select distinct d."record_id"::text as "recordId" from unnest($2::uuid[], $3::bigint[]) as x(r, c) ` +
            `join "webhook_deliveries" d on d."webhook_id" = $1 and d."record_id" = x.r and d."cursor" < x.c and d."status" = 'pending' ` +
            `where not (d."id" = any($4::uuid[]))`,
          [webhookId, [...first.keys()], [...first.values()], deliveries.map((d) => d.id)],
        ),
      );
    return new Set(rows.map((r) => r.recordId));
  }

  /** The webhook's deliveries, newest first, optionally of one status, after a position (keyset). */
  listDeliveries(webhookId: string, query: { status?: DeliveryStatus; limit: number }): Promise<DeliveryRow[]> {
    return this.pool
      .session()
      .query(
        raw<DeliveryRow>(
          `select ${DELIVERY_COLUMNS} from "webhook_deliveries" d where d."webhook_id" = $1 and ($2::text is null or d."status" = $2) ` +
            `order by d."created_at" desc, d."cursor" desc limit $3`,
          [webhookId, query.status ?? null, query.limit],
        ),
      );
  }

  /**
   * Counts an attempt of each pending delivery of `ids` before any is made (a replica that dies during
   * one has still used it), in one statement; the attempts now, by id.
   */
  async startAttempts(ids: readonly string[]): Promise<Map<string, number>> {
    if (!ids.length) return new Map();
    const rows = await this.pool
      .session()
      .query(
        raw<{ id: string; attempts: number }>(
          `update "webhook_deliveries" set "attempts" = "attempts" + 1, "last_attempt_at" = now() ` +
            `where "id" = any($1::uuid[]) and "status" = 'pending' returning "id"::text as "id", "attempts"`,
          [[...ids]],
        ),
      );
    return new Map(rows.map((r) => [r.id, r.attempts]));
  }

  /** Records how a job's run ended each of its deliveries (see DeliveryOutcome), in one statement. */
  async recordOutcomes(outcomes: readonly DeliveryOutcome[]): Promise<void> {
    if (!outcomes.length) return;
    const column = <T>(pick: (o: DeliveryOutcome) => T | undefined) => outcomes.map((o) => pick(o) ?? null);
    await this.pool
      .session()
      .query(
        raw(
          `update "webhook_deliveries" d set ` +
            `"status" = case when x.kind = 'unsent' then d."status" else x.status end, ` +
            `"attempts" = case when x.kind = 'unsent' then d."attempts" - 1 else d."attempts" end, ` +
            `"last_attempt_at" = case when x.kind = 'unsent' then x.previous::timestamptz else d."last_attempt_at" end, ` +
            `"response_status" = case when x.kind = 'sent' then x.response_status else d."response_status" end, ` +
            `"response_body" = case when x.kind = 'sent' then x.response_body else d."response_body" end, ` +
            `"duration_ms" = case when x.kind = 'sent' then x.duration_ms else d."duration_ms" end, ` +
            `"error" = case when x.kind = 'unsent' then d."error" else x.error end, ` +
            `"delivered_at" = case when x.kind = 'sent' and x.status = 'succeeded' then now() else d."delivered_at" end ` +
            `from unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::int[], $7::text[], $8::text[]) ` +
            `as x(id, kind, status, response_status, response_body, duration_ms, error, previous) where d."id" = x.id`,
          [
            column((o) => o.id),
            column((o) => o.kind),
            column((o) => (o.kind === 'unsent' ? undefined : o.status)),
            column((o) => (o.kind === 'sent' ? o.responseStatus : undefined)),
            column((o) => (o.kind === 'sent' ? o.responseBody : undefined)),
            column((o) => (o.kind === 'sent' ? o.durationMs : undefined)),
            column((o) => (o.kind === 'unsent' ? undefined : o.error)),
            column((o) => (o.kind === 'unsent' ? o.lastAttemptAt : undefined)),
          ],
        ),
      );
  }

  /**
   * Back to pending for a redelivery: attempts and the 24 h window start over. False when it is
   * pending already (its job will run it).
   */
  async requeue(session: DataSession, deliveryId: string): Promise<boolean> {
    const rows = await session.query(
      raw(
        `update "webhook_deliveries" set "status" = 'pending', "attempts" = 0, "queued_at" = now(), "error" = null, ` +
          `"response_status" = null, "response_body" = null, "duration_ms" = null where "id" = $1 and "status" <> 'pending' returning 1`,
        [deliveryId],
      ),
    );
    return rows.length > 0;
  }

  /** The webhook answered: its failures end. */
  async succeeded(webhookId: string): Promise<void> {
    await this.pool
      .session()
      .query(raw(`update "webhooks" set "failing_since" = null where "id" = $1 and "failing_since" is not null`, [webhookId]));
  }

  /**
   * An attempt failed: the webhook is failing since its first failure after its last success; once that
   * is `disableAfterHours` ago, it is disabled. True when it is disabled now.
   */
  async failed(webhookId: string, disableAfterHours: number): Promise<boolean> {
    const [row] = await this.pool
      .session()
      .query(
        raw<{ disabled: boolean }>(
          `update "webhooks" set "failing_since" = coalesce("failing_since", now()), ` +
            `"status" = case when "failing_since" <= now() - make_interval(hours => $2) then 'disabled' else "status" end, ` +
            `"disabled_reason" = case when "failing_since" <= now() - make_interval(hours => $2) ` +
            `then 'Every delivery attempt failed for ' || $2 || ' hours' else "disabled_reason" end ` +
            `where "id" = $1 returning "status" = 'disabled' as "disabled"`,
          [webhookId, disableAfterHours],
        ),
      );
    return row?.disabled ?? false;
  }
}
