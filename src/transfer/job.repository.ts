import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { ColumnType, Kysely, Selectable, sql } from 'kysely';
import type { ErrorCode } from '../common/error-codes';

/** One rejected row of an import: its number in the file (the header is row 1), the field to blame, why. */
export interface RowError {
  row: number;
  field?: string;
  code: ErrorCode;
  error: string;
}

export type JobStatus = 'running' | 'done' | 'failed' | 'cancelled';

/** What a job does: a CSV import, or filling a stored computed field's column (StoredFillService). */
export type JobKind = 'import' | 'stored_fill';

/** How a job ended: all its rows handled, stopped by a failure, or cancelled by its key or an admin. */
export type JobEnding = { status: 'done' } | { status: 'failed'; failure: JobFailure } | { status: 'cancelled' };

/** Why a job failed as a whole (a malformed file, a body too large, the server stopping). */
export interface JobFailure {
  code: ErrorCode;
  error: string;
}

export interface JobRow {
  id: string;
  kind: JobKind;
  /** The key that started it; null for a job the server started itself (admins only see it). */
  keyId: string | null;
  objectName: string;
  status: JobStatus;
  dryRun: boolean;
  atomic: boolean;
  rowsRead: number;
  rowsWritten: number;
  rowsRejected: number;
  errors: RowError[];
  failure: JobFailure | null;
  /** DELETE /jobs/:id asked the job to stop; it does at its next batch boundary. */
  cancelRequested: boolean;
  createdAt: Date;
  finishedAt: Date | null;
}

/** Progress of a running job, written as it goes. */
export interface JobProgress {
  rowsRead: number;
  rowsWritten: number;
  rowsRejected: number;
  /** Errors found since the last update (appended, up to MAX_STORED_ERRORS in all). */
  newErrors: RowError[];
}

/** The most row errors a job keeps; rowsRejected still counts them all. */
export const MAX_STORED_ERRORS = 1_000;
/** A running job whose heartbeat is older than this lost its process (every replica beats every few seconds). */
export const JOB_STALE_SECONDS = 60;

interface JobDatabase {
  jobs: {
    id: string;
    key_id: string | null;
    kind: JobKind;
    object_name: string;
    status: JobStatus;
    dry_run: boolean;
    atomic: boolean;
    rows_read: ColumnType<number, number | undefined, number>;
    rows_written: ColumnType<number, number | undefined, number>;
    rows_rejected: ColumnType<number, number | undefined, number>;
    errors: ColumnType<RowError[], string | undefined, string>;
    failure: ColumnType<JobFailure | null, string | null | undefined, string | null>;
    heartbeat_at: ColumnType<Date | string, never, never>;
    cancel_requested_at: ColumnType<Date | string | null, never, never>;
    created_at: ColumnType<Date | string, never, never>;
    finished_at: ColumnType<Date | string | null, never, never>;
  };
}

/** Every SQL statement about jobs. Times are the database's (`now()`), the same on every replica. */
@Injectable()
export class JobRepository {
  constructor(private readonly em: EntityManager) {}

  async create(job: {
    id: string;
    keyId: string | null;
    objectName: string;
    dryRun: boolean;
    atomic: boolean;
    kind?: JobKind;
  }): Promise<void> {
    await this.db()
      .insertInto('jobs')
      .values({
        id: job.id,
        key_id: job.keyId,
        kind: job.kind ?? 'import',
        object_name: job.objectName,
        status: 'running',
        dry_run: job.dryRun,
        atomic: job.atomic,
      })
      .execute();
  }

  /** A job as its key (or an admin, `keyId` undefined) may see it; a running job whose process died reads as failed. */
  async find(id: string, keyId: string | undefined): Promise<JobRow | undefined> {
    await this.failStale(id);
    let query = this.db().selectFrom('jobs').selectAll().where('id', '=', id);
    if (keyId !== undefined) query = query.where('key_id', '=', keyId);
    const row = await query.executeTakeFirst();
    return row && toJobRow(row);
  }

  /**
   * Asks a running job to stop (a second ask keeps the first's time): the job as it is then, or
   * undefined when no running job has this id (for this key; `keyId` undefined: an admin).
   */
  async requestCancel(id: string, keyId: string | undefined): Promise<JobRow | undefined> {
    let query = this.db()
      .updateTable('jobs')
      .set({ cancel_requested_at: sql`coalesce(cancel_requested_at, now())` } as never)
      .where('id', '=', id)
      .where('status', '=', 'running');
    if (keyId !== undefined) query = query.where('key_id', '=', keyId);
    const row = await query.returningAll().executeTakeFirst();
    return row && toJobRow(row);
  }

  /**
   * Records progress (and beats the heartbeat); new errors are appended while fewer than
   * MAX_STORED_ERRORS are kept. Answers whether the job was asked to stop meanwhile (on any replica).
   */
  async progress(id: string, progress: JobProgress): Promise<{ cancelRequested: boolean }> {
    const row = await this.db()
      .updateTable('jobs')
      .set({
        rows_read: progress.rowsRead,
        rows_written: progress.rowsWritten,
        rows_rejected: progress.rowsRejected,
        errors: sql<string>`case when jsonb_array_length(errors) >= ${MAX_STORED_ERRORS} then errors
          else (select coalesce(jsonb_agg(e), '[]'::jsonb) from (
            select e from jsonb_array_elements(errors || ${JSON.stringify(progress.newErrors)}::jsonb) with ordinality as t(e, n)
            order by n limit ${MAX_STORED_ERRORS}) kept) end`,
        heartbeat_at: sql`now()`,
      } as never)
      .where('id', '=', id)
      .where('status', '=', 'running')
      .returning(sql<boolean>`cancel_requested_at is not null`.as('cancel_requested'))
      .executeTakeFirst();
    return { cancelRequested: row?.cancel_requested === true };
  }

  /** Keeps running jobs of this process alive between progress updates; the ids of those asked to stop. */
  async beat(ids: readonly string[]): Promise<string[]> {
    if (!ids.length) return [];
    const rows = await this.db()
      .updateTable('jobs')
      .set({ heartbeat_at: sql`now()` } as never)
      .where('id', 'in', [...ids])
      .where('status', '=', 'running')
      .returning(['id', sql<boolean>`cancel_requested_at is not null`.as('cancel_requested')])
      .execute();
    return rows.filter((row) => row.cancel_requested).map((row) => row.id);
  }

  /**
   * A job taken up again by another attempt (a fill handed on by a replica that stopped or died): running again,
   * unless it ended meanwhile (done, cancelled, or failed other than by losing its process). Answers whether it runs.
   */
  async resume(id: string): Promise<boolean> {
    const row = await this.db()
      .updateTable('jobs')
      .set({ status: 'running', failure: null, heartbeat_at: sql`now()`, finished_at: sql`null` } as never)
      .where('id', '=', id)
      .where((eb) =>
        eb.or([
          eb('status', '=', 'running'),
          eb.and([eb('status', '=', 'failed'), eb(sql<string>`failure->>'code'`, '=', 'internal_error')]),
        ]),
      )
      .returning('id')
      .executeTakeFirst();
    return row !== undefined;
  }

  /** A job that never ran (its work was already queued under another job). */
  async remove(id: string): Promise<void> {
    await this.db().deleteFrom('jobs').where('id', '=', id).execute();
  }

  async finish(id: string, progress: JobProgress, ending: JobEnding): Promise<void> {
    await this.progress(id, progress);
    await this.db()
      .updateTable('jobs')
      .set({
        status: ending.status,
        failure: ending.status === 'failed' ? JSON.stringify(ending.failure) : null,
        finished_at: sql`now()`,
      } as never)
      .where('id', '=', id)
      .where('status', '=', 'running')
      .execute();
  }

  /** Running jobs whose heartbeat stopped (their process died) become failed; `id` narrows it to one job. */
  async failStale(id?: string): Promise<void> {
    let query = this.db()
      .updateTable('jobs')
      .set({
        status: 'failed',
        failure: JSON.stringify({ code: 'internal_error', error: 'The server running this job stopped before it ended' }),
        finished_at: sql`now()`,
      } as never)
      .where('status', '=', 'running')
      .where('heartbeat_at', '<', sql<Date>`now() - make_interval(secs => ${JOB_STALE_SECONDS})`);
    if (id !== undefined) query = query.where('id', '=', id);
    await query.execute();
  }

  private db(): Kysely<JobDatabase> {
    return this.em.fork().getKysely<JobDatabase>();
  }
}

function toJobRow(row: Selectable<JobDatabase['jobs']>): JobRow {
  return {
    id: row.id,
    kind: row.kind,
    keyId: row.key_id,
    objectName: row.object_name,
    status: row.status,
    dryRun: row.dry_run,
    atomic: row.atomic,
    rowsRead: row.rows_read,
    rowsWritten: row.rows_written,
    rowsRejected: row.rows_rejected,
    errors: row.errors,
    failure: row.failure,
    cancelRequested: row.cancel_requested_at !== null,
    createdAt: new Date(row.created_at),
    finishedAt: row.finished_at === null ? null : new Date(row.finished_at),
  };
}
