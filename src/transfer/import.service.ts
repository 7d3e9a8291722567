import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { CsvError, parse, type Parser } from 'csv-parse';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { pipeline, Transform, type Readable } from 'node:stream';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { parseFlagParam } from '../common/query-params';
import { isPlainObject } from '../common/plain-object';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataPool, DataSession } from '../database/data-pool';
import type { ChangeSetStamp } from '../data/change-outbox';
import { DataService } from '../data/data.service';
import { operationError, type BatchOperationError } from '../data/record-batch';
import { AccessService } from '../governance/access.service';
import type { FieldMeta } from '../metadata/object-metadata.types';
import { cellToValue } from './csv-values';
import { JobProgress, JobRepository, RowError } from './job.repository';

/** Rows written per batch (DataService.batch takes at most 1,000 operations). */
const CHUNK_ROWS = 1_000;
/** Longest CSV record (all its cells), so one bad line cannot hold unbounded memory. */
const MAX_RECORD_BYTES = 4 * 1024 * 1024;
/** Most columns of a header, and entries of a mapping. */
const MAX_COLUMNS = 1_000;
const HEARTBEAT_MS = 10_000;
/**
 * System fields that an import skips: the server sets them. `id` is imported (a record may keep its id),
 * except by a key under a row filter on the object: the data engine refuses those rows.
 */
const SKIPPED_SYSTEM_FIELDS = new Set(['created_at', 'updated_at']);

export interface ImportOptions {
  mapping?: string;
  dryRun?: string;
  atomic?: string;
}

/** Aborted a job's transaction on purpose: nothing it wrote stays. */
class RollBack extends Error {}

/** The job was asked to stop (DELETE /jobs/:id): it ends at this batch boundary as `cancelled`. */
class Cancelled extends Error {}

/**
 * CSV imports as jobs. The request's body streams into the job: the header row is read and mapped to
 * fields before the 202 (an unknown column is a 400 then, before any row), the rest is parsed as it
 * arrives and written through DataService.batch a chunk at a time, as the caller, with its policies.
 * All or nothing by default: every chunk in one transaction, committed only when no row was rejected
 * (every row is still checked, to report each bad one). `atomic=false` commits each chunk's good rows;
 * `dryRun=true` checks every row and writes nothing.
 *
 * A job asked to stop (`cancel`, or a request on another replica seen in its row at each progress
 * update and heartbeat) stops at its next chunk boundary: never inside a chunk's write. An all-or-nothing
 * import then rolls everything back; with `atomic=false` the chunks committed before stay, and the job
 * says how many rows they wrote.
 */
@Injectable()
export class ImportService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(ImportService.name);
  private readonly running = new Map<string, RunningImport>();
  private heartbeat?: NodeJS.Timeout;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly jobs: JobRepository,
    private readonly data: DataService,
    private readonly access: AccessService,
    private readonly pool: DataPool,
  ) {}

  async onModuleInit(): Promise<void> {
    // Jobs of a process that died: their heartbeat stopped.
    await this.jobs.failStale();
    this.heartbeat = setInterval(() => {
      this.jobs
        .beat([...this.running.keys()])
        .then((cancelled) => cancelled.forEach((id) => this.cancel(id)))
        .catch((error: unknown) => this.logger.warn(`Job heartbeat failed: ${String(error)}`));
    }, HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.heartbeat);
    for (const job of this.running.values()) job.controller.abort();
  }

  /**
   * Asks a job of this replica to stop at its next chunk boundary; one waiting for more of its CSV
   * body stops waiting (the rest of the upload is refused). False when the job does not run here.
   */
  cancel(id: string): boolean {
    const job = this.running.get(id);
    if (!job) return false;
    job.cancelRequested = true;
    job.parser.destroy();
    return true;
  }

  /** Reads the header, creates the job and runs it in the background; resolves with the job's id. */
  async start(
    caller: Caller,
    objectName: string,
    body: Readable,
    options: ImportOptions,
    contentLength?: number,
  ): Promise<{ jobId: string }> {
    const mapping = parseMapping(options.mapping);
    const dryRun = parseFlagParam('dryRun', options.dryRun, false);
    const atomic = parseFlagParam('atomic', options.atomic, true);
    const max = this.config.importMaxBytes;
    if (contentLength !== undefined && contentLength > max) throw tooLarge(max);
    const object = await this.access.view(caller, objectName, 'create');
    const parser = parse({ bom: true, relax_column_count: true, max_record_size: MAX_RECORD_BYTES, skip_empty_lines: true });
    const watch = new UploadWatch(this.config.importStallTimeoutMs);
    // An error anywhere (the client left, too many bytes, malformed CSV, a stall) ends the parser's iteration with it.
    pipeline(
      body,
      byteLimit(max, () => watch.received()),
      parser,
      () => undefined,
    );
    const iterator = parser[Symbol.asyncIterator]() as AsyncIterator<string[]>;
    const records = { next: () => watch.wait(iterator.next(), (error) => parser.destroy(error)) };
    const upload = { body, connection: (body as Partial<IncomingMessage>).socket };
    const detach = watchConnection(upload, watch);
    let header: string[];
    try {
      const first = await records.next();
      if (first.done) throw new DomainError('invalid_csv', 'The CSV body is empty: send a header row, then one row per record');
      header = first.value;
    } catch (error) {
      detach();
      parser.destroy();
      throw asCsvError(error);
    }
    let columns: Array<FieldMeta | undefined>;
    const id = randomUUID();
    try {
      columns = mapColumns(header, object.fields, mapping);
      await this.jobs.create({ id, keyId: caller.keyId, objectName: object.name, dryRun, atomic });
    } catch (error) {
      detach();
      throw error;
    }
    const job: RunningImport = {
      upload,
      columns,
      width: header.length,
      records,
      parser,
      dryRun,
      atomic,
      controller: new AbortController(),
      cancelRequested: false,
    };
    this.running.set(id, job);
    void this.run(id, caller, object.name, job)
      .catch((error: unknown) => this.logger.error(`Import job ${id} failed: ${String(error)}`))
      .finally(() => {
        detach();
        this.running.delete(id);
      });
    return { jobId: id };
  }

  private async run(id: string, caller: Caller, objectName: string, job: RunningImport): Promise<void> {
    const progress: JobProgress = { rowsRead: 0, rowsWritten: 0, rowsRejected: 0, newErrors: [] };
    const signal = job.controller.signal;
    const flush = async () => {
      const { cancelRequested } = await this.jobs.progress(id, progress);
      progress.newErrors = [];
      if (cancelRequested) this.cancel(id);
    };
    const reject = (error: RowError) => {
      progress.rowsRejected++;
      progress.newErrors.push(error);
    };
    const allOrNothing = job.atomic || job.dryRun;
    // The whole import is one change set, reverted as one; it bears the job's id.
    const changeSet: ChangeSetStamp = { id, via: 'import' };
    const importRows = async (session: DataSession | undefined): Promise<number> => {
      let written = 0;
      let chunk: Array<{ row: number; record: Record<string, unknown> }> = [];
      const writeChunk = async () => {
        if (job.cancelRequested) throw new Cancelled();
        const done = await this.writeChunk(caller, objectName, chunk, { session, signal, changeSet }, reject);
        written += done;
        if (!allOrNothing) progress.rowsWritten = written;
        chunk = [];
        await flush();
      };
      for (let next = await job.records.next(); !next.done; next = await job.records.next()) {
        if (signal.aborted) throw new DomainError('shutting_down', 'The server shut down before the import ended');
        if (job.cancelRequested) throw new Cancelled();
        progress.rowsRead++;
        const row = progress.rowsRead + 1;
        const record = recordOf(next.value, job.columns, job.width, row);
        if (record instanceof Array) record.forEach(reject);
        else chunk.push({ row, record });
        if (chunk.length >= CHUNK_ROWS) await writeChunk();
      }
      await writeChunk();
      return written;
    };
    try {
      if (!allOrNothing) {
        await importRows(undefined);
      } else {
        const written = await this.pool
          .transaction(
            async (session) => {
              const count = await importRows(session);
              if (job.dryRun || progress.rowsRejected > 0) throw new RollBack();
              return count;
            },
            { signal, key: caller.keyId },
          )
          .catch((error: unknown) => {
            if (error instanceof RollBack) return 0;
            throw error;
          });
        progress.rowsWritten = written;
      }
      await this.jobs.finish(id, progress, { status: 'done' });
    } catch (error) {
      job.parser.destroy();
      refuseRestOfUpload(job.upload);
      if (allOrNothing) progress.rowsWritten = 0;
      // Reading the body fails too once a cancel destroyed it.
      if (error instanceof Cancelled || job.cancelRequested) {
        await this.jobs.finish(id, progress, { status: 'cancelled' });
        return;
      }
      const failure = asCsvError(error);
      if (!(failure instanceof DomainError)) this.logger.error(`Import job ${id}: ${String(error)}`);
      const known = failure instanceof DomainError ? failure : undefined;
      await this.jobs.finish(id, progress, {
        status: 'failed',
        failure: {
          code: known?.code ?? 'internal_error',
          error: known?.message ?? 'The import stopped on an unexpected error',
        },
      });
    }
  }

  /**
   * Writes one chunk as creates of one batch: all at once when every row is good; else once more
   * row by row (DataService.batch, atomic=false) so that each bad row is named and the good ones kept.
   * Returns how many rows were written.
   */
  private async writeChunk(
    caller: Caller,
    objectName: string,
    chunk: ReadonlyArray<{ row: number; record: Record<string, unknown> }>,
    scope: ImportScope,
    reject: (error: RowError) => void,
  ): Promise<number> {
    if (!chunk.length) return 0;
    const failed = await this.tryAll(caller, objectName, chunk, scope);
    if (!failed.length) return chunk.length;
    for (const { index, ...rest } of failed) reject({ row: chunk[index].row, ...rest });
    const rejected = new Set(failed.map((e) => e.index));
    const good = chunk.filter((_, index) => !rejected.has(index));
    // The batch named every failing row (replaying them one by one to do so): the others go in at once,
    // or, should one still fail, row by row.
    if (!good.length || !(await this.tryAll(caller, objectName, good, scope)).length) return good.length;
    const results = await this.data.batch(
      caller,
      objectName,
      good.map(({ record }) => ({ op: 'create', record })),
      false,
      scope,
    );
    let written = 0;
    for (const result of results) {
      if (!result.error) written++;
      else reject({ row: good[result.index].row, ...result.error });
    }
    return written;
  }

  /** Writes the rows as one all-or-nothing batch; the rows that failed it (by index), none when it was written. */
  private async tryAll(
    caller: Caller,
    objectName: string,
    rows: ReadonlyArray<{ record: Record<string, unknown> }>,
    scope: ImportScope,
  ): Promise<BatchOperationError[]> {
    try {
      const operations = rows.map(({ record }) => ({ op: 'create', record }));
      await this.data.batch(caller, objectName, operations, true, scope);
      return [];
    } catch (error) {
      const failed = error instanceof DomainError && (error.details as { errors?: unknown } | undefined)?.errors;
      if (!Array.isArray(failed) || !failed.length) throw error;
      return failed as BatchOperationError[];
    }
  }
}

/** An import while this replica runs it. */
/** Where an import's chunks are written: its transaction (all or nothing), its signal, its change set. */
interface ImportScope {
  session?: DataSession;
  signal: AbortSignal;
  changeSet: ChangeSetStamp;
}

interface RunningImport {
  /** The request's body, and its connection as it was when the import started. */
  upload: { body: Readable; connection?: Socket | null };
  columns: Array<FieldMeta | undefined>;
  width: number;
  /** The CSV records after the header; a read fails with upload_stalled when the upload stalls meanwhile. */
  records: { next(): Promise<IteratorResult<string[]>> };
  parser: Parser;
  dryRun: boolean;
  atomic: boolean;
  /** Aborted when the server shuts down: the running statement is cancelled and the job fails. */
  controller: AbortController;
  /** Asked to stop (here, or on another replica: seen in the job's row): it ends at its next chunk boundary. */
  cancelRequested: boolean;
}

/**
 * Closes the connection of an upload the job stopped reading before it ended. Once the 202 is sent,
 * Node detaches the request from its connection, so destroying the body alone would leave the
 * connection open and unread, and a client still sending would wait on it for ever. A body received
 * whole is left alone: its connection may be carrying the client's next request by now.
 */
function refuseRestOfUpload({ body, connection }: RunningImport['upload']): void {
  if ((body as Partial<IncomingMessage>).complete === false) connection?.destroy();
}

/**
 * After its connection closed, how long an import waiting for more of its body still gives what the
 * connection delivered to reach the parser before it fails.
 */
const CLOSED_GRACE_MS = 1_000;

/**
 * Fails an upload that sends nothing for `stallMs` while the import waits for it. Only waiting counts:
 * while the import writes a chunk it reads nothing, and the client, held back, sends nothing either.
 *
 * It also ends a wait that can no longer end: once the 202 is sent, Node detaches the request from its
 * connection, and should the connection then close before the body ended (the client left, or Node's
 * HTTP_REQUEST_TIMEOUT_MS cut a body that took longer to arrive, the import's own writes included),
 * the body would neither end nor fail, and the import would wait for it for ever, holding its
 * transaction. Bytes the connection delivered before it closed may still be on their way, so a wait
 * fails only after CLOSED_GRACE_MS without any.
 */
class UploadWatch {
  private lastByteAt = Date.now();
  private closedAt?: number;
  private recheck?: () => void;

  constructor(private readonly stallMs: number) {}

  /** A chunk of the body came in. */
  received(): void {
    this.lastByteAt = Date.now();
  }

  /** The upload's connection closed before the body ended. */
  closed(): void {
    this.closedAt = Date.now();
    this.recheck?.();
  }

  /** `read` (the next record), failed through `fail` once no byte came for long enough while it was awaited. */
  async wait<T>(read: Promise<T>, fail: (error: DomainError) => void): Promise<T> {
    const since = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const check = () => {
      clearTimeout(timer);
      const quiet = Date.now() - Math.max(this.lastByteAt, since, this.closedAt ?? 0);
      const limit = this.closedAt === undefined ? this.stallMs : Math.min(this.stallMs, CLOSED_GRACE_MS);
      if (quiet < limit) timer = setTimeout(check, limit - quiet);
      else fail(this.closedAt === undefined ? stalled(this.stallMs) : uploadEnded());
    };
    this.recheck = check;
    timer = setTimeout(check, this.stallMs);
    try {
      return await read;
    } finally {
      clearTimeout(timer);
      this.recheck = undefined;
    }
  }
}

/** Tells `watch` when the upload's connection closes before the body ended; returns how to stop watching. */
function watchConnection({ body, connection }: RunningImport['upload'], watch: UploadWatch): () => void {
  const onClose = () => {
    if ((body as Partial<IncomingMessage>).complete === false) watch.closed();
  };
  connection?.once('close', onClose);
  return () => connection?.off('close', onClose);
}

function stalled(stallMs: number): DomainError {
  return new DomainError(
    'upload_stalled',
    `The upload sent nothing for ${stallMs} ms (IMPORT_STALL_TIMEOUT_MS) while the import waited for more of the CSV body`,
    { stallTimeoutMs: stallMs },
  );
}

function uploadEnded(): DomainError {
  return new DomainError('invalid_csv', 'The upload ended before the CSV body was complete');
}

/** A CSV record as a write body, or the errors of its cells. */
function recordOf(
  cells: string[],
  columns: ReadonlyArray<FieldMeta | undefined>,
  width: number,
  row: number,
): Record<string, unknown> | RowError[] {
  if (cells.length !== width) {
    return [{ row, code: 'invalid_csv', error: `Row ${row} has ${cells.length} cells; the header has ${width} columns` }];
  }
  const record: Record<string, unknown> = {};
  const errors: RowError[] = [];
  columns.forEach((field, at) => {
    if (!field) return;
    try {
      const value = cellToValue(field, cells[at]);
      if (value !== undefined) record[field.name] = value;
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      const { code, error: message, field } = operationError(0, error);
      errors.push({ row, code, error: message, ...(field ? { field } : {}) });
    }
  });
  return errors.length ? errors : record;
}

/**
 * The field of each header column: the explicit mapping's (columns it does not name are skipped), or
 * the field whose name or label is the column's, ignoring case. Unknown columns are one 400 naming
 * them all, before any row is read.
 */
function mapColumns(
  header: string[],
  fields: readonly FieldMeta[],
  mapping?: Record<string, string>,
): Array<FieldMeta | undefined> {
  if (header.length > MAX_COLUMNS) throw new DomainError('invalid_csv', `The header has more than ${MAX_COLUMNS} columns`);
  const byName = new Map(fields.map((f) => [f.name.toLowerCase(), f]));
  const byLabel = new Map(fields.map((f) => [f.label.toLowerCase(), f]));
  const unknown: string[] = [];
  let columns: Array<FieldMeta | undefined>;
  if (mapping) {
    const missing = Object.keys(mapping).filter((column) => !header.includes(column));
    if (missing.length) {
      throw new DomainError('invalid_mapping', `mapping names columns the header does not have: ${missing.join(', ')}`, {
        columns: missing,
      });
    }
    columns = header.map((column) => {
      if (!Object.hasOwn(mapping, column)) return undefined;
      const field = byName.get(mapping[column].toLowerCase());
      if (!field) unknown.push(column);
      return field;
    });
    if (unknown.length) {
      throw new DomainError('invalid_mapping', `mapping maps columns to fields this key cannot write: ${unknown.join(', ')}`, {
        columns: unknown,
      });
    }
  } else {
    columns = header.map((column) => {
      const key = column.trim().toLowerCase();
      const field = byName.get(key) ?? byLabel.get(key);
      if (!field) unknown.push(column);
      return field;
    });
    if (unknown.length) {
      throw new DomainError(
        'unknown_column',
        `These columns name no field of the object (by name or label): ${unknown.map((c) => JSON.stringify(c)).join(', ')}; ` +
          'rename them, or send ?mapping={"column":"field"}',
        { columns: unknown },
      );
    }
  }
  const seen = new Set<string>();
  for (const field of columns) {
    if (!field) continue;
    if (seen.has(field.name))
      throw new DomainError('invalid_mapping', `Two columns map to field "${field.name}"`, { field: field.name });
    seen.add(field.name);
  }
  return columns.map((field) => (field && SKIPPED_SYSTEM_FIELDS.has(field.name) ? undefined : field));
}

function parseMapping(raw: string | undefined): Record<string, string> | undefined {
  if (raw === undefined || raw === '') return undefined;
  let mapping: unknown;
  try {
    mapping = JSON.parse(raw);
  } catch {
    throw new DomainError('invalid_mapping', 'mapping must be JSON: {"CSV column":"field name"}');
  }
  if (
    !isPlainObject(mapping) ||
    Object.keys(mapping).length > MAX_COLUMNS ||
    !Object.values(mapping).every((field) => typeof field === 'string')
  ) {
    throw new DomainError(
      'invalid_mapping',
      `mapping must be a JSON object of at most ${MAX_COLUMNS} "CSV column": "field name" pairs`,
    );
  }
  return mapping as Record<string, string>;
}

function tooLarge(max: number): DomainError {
  return new DomainError('payload_too_large', `The CSV body is larger than ${max} bytes (IMPORT_MAX_BYTES)`, { maxBytes: max });
}

/** Counts the body's bytes as they stream, failing past `max` (the JSON body limit does not apply to a stream). */
function byteLimit(max: number, received: () => void): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received();
      seen += chunk.length;
      done(seen > max ? tooLarge(max) : null, chunk);
    },
  });
}

/** csv-parse's errors as invalid_csv with their message (it names the line); others unchanged. */
function asCsvError(error: unknown): unknown {
  if (error instanceof CsvError) return new DomainError('invalid_csv', `The CSV body is malformed: ${error.message}`);
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'ECONNRESET' || (error as Error | null)?.message === 'aborted') return uploadEnded();
  return error;
}
