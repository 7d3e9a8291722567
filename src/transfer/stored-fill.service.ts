import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { runSql } from '../database/sql';
import { JobQueue, type QueuedJob } from '../jobs/job-queue.service';
import { objectTable } from '../database/sql-identifier';
import { MetadataService } from '../metadata/metadata.service';
import { recomputeFormulaSql, recomputeSql } from '../metadata/stored-fields';
import { JobProgress, JobRepository } from './job.repository';

/** Records filled per transaction: each batch holds its records' locks only while it recomputes them. */
export const FILL_BATCH = 500;

/** The job queue of fills: one job per field at a time (`exclusive` by field), handed on when its replica dies. */
export const STORED_FILL_QUEUE = 'stored-fill';
/** A worker beats this often while it fills; a job whose beats stop for this long is retried elsewhere. */
const FILL_HEARTBEAT_S = 10;
/** Attempts of a fill that fails on an unexpected error (a stop or a lost replica counts as one). */
const FILL_RETRY_LIMIT = 5;

interface FillJobData {
  /** The job of GET /api/v1/jobs/:id that shows its progress. */
  jobId: string;
  object: string;
  field: string;
  keyId: string | null;
}

/** The replica stopped in the middle of a fill: the attempt ends and the queue hands the fill on. */
class FillInterrupted extends Error {}

/**
 * Fills the column of a stored rollup or count added to an object that has records: a job (kind
 * `stored_fill`, GET/DELETE /api/v1/jobs/:id) that walks the records by id in batches. The field's triggers
 * are committed before it starts, so a record whose related records change meanwhile is kept right by them;
 * the job only fills values as of now. Each batch locks its records (`for no key update`, in order of id, in a
 * statement of its own) and recomputes them in a new statement, exactly as the triggers do (metadata/
 * stored-fields.ts), so a batch and a concurrent writer never lose each other's update and never deadlock.
 * No lock is held between batches and none on the table: writers go on. When every record is done the field
 * is marked filled and reads use its column; cancelled, it stays computed when read.
 * Filling writes no change events: no input changed.
 *
 * The work runs on the job queue (pg-boss), so a fill outlives the replica that started it: a replica that
 * stops hands it back (a failed attempt, retried at once by any replica), one that dies stops beating and
 * the queue retries the job after FILL_HEARTBEAT_S. A retry starts over from the first record: each batch
 * only recomputes, so doing a record twice is harmless. At boot every replica also queues the fills that no
 * job holds (fieldsToFill: the server stopped between a field's commit and its job, or every attempt failed);
 * the queue keeps one job per field.
 */
@Injectable()
export class StoredFillService implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger(StoredFillService.name);
  private stopping = false;

  constructor(
    private readonly em: EntityManager,
    private readonly metadata: MetadataService,
    private readonly jobs: JobRepository,
    private readonly queue: JobQueue,
  ) {}

  onModuleInit(): void {
    this.metadata.registerStoredFill((objectName, fieldName, actor) => this.start(objectName, fieldName, actor?.keyId ?? null));
    this.queue.define<FillJobData>({
      queue: {
        name: STORED_FILL_QUEUE,
        policy: 'exclusive',
        retryLimit: FILL_RETRY_LIMIT,
        retryDelay: 1,
        retryBackoff: true,
        retryDelayMax: 60,
        heartbeatSeconds: FILL_HEARTBEAT_S,
        retentionSeconds: 7 * 24 * 3600,
        // The heartbeat finds a lost replica; the lease only bounds a fill that hangs.
        expireInSeconds: 24 * 3600,
      },
      handler: (job) => this.run(job),
    });
  }

  onApplicationBootstrap(): void {
    // Not awaited: the queue may start after this hook (JobQueue.send waits for it).
    void this.queueUnfinished();
  }

  private async queueUnfinished(): Promise<void> {
    try {
      for (const { object, field } of await this.metadata.fieldsToFill()) await this.start(object, field, null);
    } catch (error) {
      if (!this.stopping) this.log.warn(`could not queue the stored fields' fills: ${String(error)}`);
    }
  }

  onApplicationShutdown(): void {
    this.stopping = true;
  }

  /**
   * Queues the fill of `objectName.fieldName`; answers the id of its job (GET /api/v1/jobs/:id). When a job
   * of that field is already queued or running, the queue keeps it and this one is never run (and never shown).
   */
  async start(objectName: string, fieldName: string, keyId: string | null): Promise<string> {
    const id = randomUUID();
    await this.jobs.create({ id, keyId, objectName, dryRun: false, atomic: false, kind: 'stored_fill' });
    const data: FillJobData = { jobId: id, object: objectName, field: fieldName, keyId };
    const queued = await this.queue.send(STORED_FILL_QUEUE, data, { singletonKey: `${objectName}.${fieldName}` });
    if (!queued) await this.jobs.remove(id);
    return id;
  }

  private async run(job: QueuedJob<FillJobData>): Promise<void> {
    const { jobId: id, object: objectName, field: fieldName } = job.data;
    const progress: JobProgress = { rowsRead: 0, rowsWritten: 0, rowsRejected: 0, newErrors: [] };
    // A retry after a lost replica: its job shows as running again (a read may have marked it failed meanwhile).
    if (!(await this.jobs.resume(id))) return;
    try {
      let after: string | null = null;
      for (;;) {
        if (this.stopping || job.signal?.aborted) throw new FillInterrupted('the server stopped before the field was filled');
        const batch = await this.batch(objectName, fieldName, after);
        if (!batch) break;
        after = batch.last;
        progress.rowsRead += batch.read;
        progress.rowsWritten += batch.written;
        const { cancelRequested } = await this.jobs.progress(id, progress);
        if (cancelRequested) {
          await this.metadata.endFill(objectName, fieldName, 'cancelled');
          await this.jobs.finish(id, progress, { status: 'cancelled' });
          return;
        }
      }
      await this.metadata.endFill(objectName, fieldName, 'filled');
      await this.jobs.finish(id, progress, { status: 'done' });
    } catch (caught) {
      // A batch that waited for a delete of the field fails on its column: that is the delete, not a fault to retry.
      const error =
        caught instanceof DomainError || caught instanceof FillInterrupted || (await this.stillStored(objectName, fieldName))
          ? caught
          : new DomainError('field_not_found', `Field "${fieldName}" not found on "${objectName}"`);
      // Handed on: another attempt (on any replica) fills it.
      if (error instanceof FillInterrupted || (!(error instanceof DomainError) && job.retryCount < job.retryLimit)) {
        if (!(error instanceof FillInterrupted))
          this.log.warn(`stored fill ${id} of ${objectName}.${fieldName} will be retried: ${String(error)}`);
        throw error;
      }
      const failure =
        error instanceof DomainError
          ? { code: error.code, error: error.message }
          : { code: 'internal_error' as const, error: 'The fill stopped on an unexpected error' };
      if (!(error instanceof DomainError))
        this.log.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
      await this.jobs.finish(id, progress, { status: 'failed', failure });
    }
  }

  /** Whether the field is still a stored field, as the database says now (not the cache). */
  private async stillStored(objectName: string, fieldName: string): Promise<boolean> {
    const object = await this.metadata.readObject(objectName, this.em.fork()).catch(() => undefined);
    return object?.fields.some((f) => f.name === fieldName && (f.related?.stored || f.formula?.stored)) === true;
  }

  /** One batch after `after` (by id): its records locked, then recomputed; undefined when none are left. */
  private async batch(
    objectName: string,
    fieldName: string,
    after: string | null,
  ): Promise<{ last: string; read: number; written: number } | undefined> {
    // Read each batch: the field may have been deleted meanwhile (then the job fails with field_not_found).
    const object = await this.metadata.getObject(objectName);
    const field = object.fields.find((f) => f.name === fieldName && (f.related?.stored || f.formula?.stored));
    if (!field) throw new DomainError('field_not_found', `Field "${fieldName}" not found on "${objectName}"`);
    const recompute = (ids: string) =>
      field.formula
        ? Promise.resolve(recomputeFormulaSql(objectName, field, ids))
        : this.metadata.getObject(field.related!.target).then((target) => recomputeSql(objectName, [field], target, ids));
    const statement = await recompute('$1::uuid[]');
    return this.em.fork().transactional(async (em) => {
      // The table lock the update takes, taken first: never upgraded behind a waiting DDL (a deadlock).
      await runSql(em, `lock table ${objectTable(objectName)} in row exclusive mode`);
      const locked = await runSql<{ id: string }>(
        em,
        `select "id" from ${objectTable(objectName)} where $1::uuid is null or "id" > $1::uuid order by "id" limit ${FILL_BATCH} for no key update`,
        [after],
      );
      if (!locked.length) return undefined;
      const ids = locked.map((row) => row.id);
      const written = await runSql(em, `${statement} returning 1`, [ids]);
      return { last: ids[ids.length - 1], read: ids.length, written: written.length };
    });
  }
}
