import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { runSql } from '../database/sql';
import { objectTable } from '../database/sql-identifier';
import { MetadataService } from '../metadata/metadata.service';
import { recomputeSql } from '../metadata/stored-fields';
import { JobProgress, JobRepository } from './job.repository';

/** Records filled per transaction: each batch holds its records' locks only while it recomputes them. */
export const FILL_BATCH = 500;

/**
 * Fills the column of a stored rollup or count added to an object that has records: a job (kind
 * `stored_fill`, GET/DELETE /api/v1/jobs/:id) that walks the records by id in batches. The field's triggers
 * are committed before it starts, so a record whose related records change meanwhile is kept right by them;
 * the job only fills values as of now. Each batch locks its records (`for no key update`, in order of id, in a
 * statement of its own) and recomputes them in a new statement, exactly as the triggers do (metadata/
 * stored-fields.ts), so a batch and a concurrent writer never lose each other's update and never deadlock.
 * No lock is held between batches and none on the table: writers go on. When every record is done the field
 * is marked filled and reads use its column; cancelled or failed, it stays computed when read.
 * Filling writes no change events: no input changed.
 */
@Injectable()
export class StoredFillService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger(StoredFillService.name);
  private readonly running = new Set<Promise<void>>();
  private stopping = false;

  constructor(
    private readonly em: EntityManager,
    private readonly metadata: MetadataService,
    private readonly jobs: JobRepository,
  ) {}

  onModuleInit(): void {
    this.metadata.registerStoredFill((objectName, fieldName, actor) => this.start(objectName, fieldName, actor?.keyId ?? ''));
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    await Promise.allSettled([...this.running]);
  }

  /** Starts filling `objectName.fieldName`; answers the job's id at once. */
  async start(objectName: string, fieldName: string, keyId: string): Promise<string> {
    const id = randomUUID();
    await this.jobs.create({ id, keyId, objectName, dryRun: false, atomic: false, kind: 'stored_fill' });
    const run = this.run(id, objectName, fieldName).catch((error: unknown) => {
      this.log.error(`stored fill ${id} of ${objectName}.${fieldName} failed: ${String(error)}`);
    });
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return id;
  }

  private async run(id: string, objectName: string, fieldName: string): Promise<void> {
    const progress: JobProgress = { rowsRead: 0, rowsWritten: 0, rowsRejected: 0, newErrors: [] };
    try {
      let after: string | null = null;
      for (;;) {
        if (this.stopping) {
          await this.jobs.finish(id, progress, {
            status: 'failed',
            failure: { code: 'internal_error', error: 'The server stopped before the field was filled' },
          });
          return;
        }
        const batch = await this.batch(objectName, fieldName, after);
        if (!batch) break;
        after = batch.last;
        progress.rowsRead += batch.read;
        progress.rowsWritten += batch.written;
        const { cancelRequested } = await this.jobs.progress(id, progress);
        if (cancelRequested) {
          await this.jobs.finish(id, progress, { status: 'cancelled' });
          return;
        }
      }
      await this.metadata.markFilled(objectName, fieldName);
      await this.jobs.finish(id, progress, { status: 'done' });
    } catch (error) {
      const failure =
        error instanceof DomainError
          ? { code: error.code, error: error.message }
          : { code: 'internal_error' as const, error: 'The fill stopped on an unexpected error' };
      if (!(error instanceof DomainError))
        this.log.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
      await this.jobs.finish(id, progress, { status: 'failed', failure });
    }
  }

  /** One batch after `after` (by id): its records locked, then recomputed; undefined when none are left. */
  private async batch(
    objectName: string,
    fieldName: string,
    after: string | null,
  ): Promise<{ last: string; read: number; written: number } | undefined> {
    // Read each batch: the field may have been deleted meanwhile (then the job fails with field_not_found).
    const object = await this.metadata.getObject(objectName);
    const field = object.fields.find((f) => f.name === fieldName && f.related?.stored);
    if (!field) throw new DomainError('field_not_found', `Field "${fieldName}" not found on "${objectName}"`);
    const target = await this.metadata.getObject(field.related!.target);
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
      const written = await runSql(em, `${recomputeSql(objectName, [field], target, '$1::uuid[]')} returning 1`, [ids]);
      return { last: ids[ids.length - 1], read: ids.length, written: written.length };
    });
  }
}
