import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../auth/caller';
import { KeyStreams } from '../auth/key-streams.service';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { csvLine } from './csv-values';
import { ImportService } from './import.service';
import { JobRepository, JobRow } from './job.repository';
import { JobResponse, toJobResponse } from './transfer.dto';

/** How often a job stream looks at the job's row (the job may run on another replica). */
const STREAM_POLL_MS = 250;

/** Jobs as their key sees them: another key's job is not found; an admin key sees every job. */
@Injectable()
export class JobsService {
  constructor(
    private readonly jobs: JobRepository,
    private readonly streams: KeyStreams,
    private readonly imports: ImportService,
  ) {}

  async get(caller: Caller, id: string): Promise<JobResponse> {
    return toJobResponse(await this.find(caller, id));
  }

  /**
   * Asks a running job to stop: recorded on its row (the replica running it sees it at its next
   * chunk boundary or heartbeat), and told at once to this replica's runner when the job runs here.
   * Answers the job as it is now; it ends with status `cancelled` shortly after. An ended job is 409.
   */
  async cancel(caller: Caller, id: string): Promise<JobResponse> {
    const job = await this.find(caller, id);
    const asked = job.status === 'running' ? await this.jobs.requestCancel(job.id, this.ownerOf(caller)) : undefined;
    if (!asked) {
      const ended = job.status === 'running' ? await this.find(caller, id) : job;
      throw new DomainError('job_finished', `Job "${job.id}" has already ended (${ended.status}); there is nothing to cancel`, {
        status: ended.status,
      });
    }
    this.imports.cancel(asked.id);
    return toJobResponse(asked);
  }

  /** The rejected rows kept (the first 1,000) as CSV: row, field, code, error. */
  async errorsCsv(caller: Caller, id: string): Promise<string> {
    const job = await this.find(caller, id);
    return [['row', 'field', 'code', 'error'], ...job.errors.map((e) => [String(e.row), e.field ?? '', e.code, e.error])]
      .map(csvLine)
      .join('');
  }

  /**
   * SSE: `progress` whenever the counts change, then `done` with the whole job once it has ended
   * (at once for an ended job), and the stream closes.
   */
  async stream(caller: Caller, id: string, open: () => ServerResponse): Promise<void> {
    let job = await this.find(caller, id);
    const writer = this.streams.open(caller, open);
    let last = '';
    while (!writer.isClosed) {
      const counts = { rowsRead: job.rowsRead, rowsWritten: job.rowsWritten, rowsRejected: job.rowsRejected };
      if (job.status !== 'running') {
        writer.send({ ...counts, status: job.status }, { event: 'progress' });
        writer.send(toJobResponse(job), { event: 'done' });
        writer.close();
        return;
      }
      const text = JSON.stringify(counts);
      if (text !== last) writer.send({ ...counts, status: job.status }, { event: 'progress' });
      last = text;
      await new Promise((resolve) => setTimeout(resolve, STREAM_POLL_MS));
      if (writer.isClosed) return;
      job = await this.find(caller, id).catch(() => job);
    }
  }

  private async find(caller: Caller, id: string): Promise<JobRow> {
    const job = isUuid(id) ? await this.jobs.find(id.toLowerCase(), this.ownerOf(caller)) : undefined;
    if (!job) throw new DomainError('job_not_found', `No job with id "${id.slice(0, 100)}"`);
    return job;
  }

  /** The key whose jobs the caller sees: its own; undefined (every job) for an admin. */
  private ownerOf(caller: Caller): string | undefined {
    return caller.role === 'admin' ? undefined : caller.keyId;
  }
}
