import { BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../auth/caller';
import { parseFlagParam, parseJsonParam } from '../common/query-params';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { MAX_CURSOR_BATCH_ROWS } from '../database/data-pool';
import { DataService } from '../data/data.service';
import { AccessService } from '../governance/access.service';
import { ViewService } from '../views/view.service';
import { cellWriter, csvLine, csvLines } from './csv-values';
import { ExportSlots } from './export-slots.service';

/** Cells of the first batch (rows = this / columns): small, so that a wide table's first batch stays small too. */
const FIRST_BATCH_CELLS = 10_000;
/** CSV text one batch should come to: later batches are sized by the characters per row seen so far. */
const BATCH_CHARS = 1 << 20;
/** The server ends an export's session this long after the app should have (EXPORT_STALL_TIMEOUT_MS): a backstop. */
const IDLE_BACKSTOP_MARGIN_MS = 5_000;

export interface ExportQuery {
  where?: string;
  orderBy?: string;
  fields?: string;
  view?: string;
  bom?: string;
}

/** How a write to the client ended: taken, the client left (or the export was stopped), or it took nothing for too long. */
type Sent = 'sent' | 'closed' | 'stalled';

/**
 * CSV exports: every record the caller may read that matches `where`, in `orderBy` order, read by
 * DataService.stream (the caller's row filter and hidden fields apply as on any read) through one
 * server-side cursor, in batches of about a megabyte of CSV; each batch is written once the socket
 * took the one before, so memory stays a few batches whatever the size of the table.
 *
 * An export holds a data pool connection while it streams, so it is bounded: ExportSlots caps how
 * many run at once; a client that takes nothing for EXPORT_STALL_TIMEOUT_MS, or an export still
 * running after EXPORT_MAX_DURATION_MS, is cut short (its transaction rolled back, the connection
 * freed). The first batch is read before the response starts, so a bad query is still a JSON 4xx;
 * anything after that can only cut the response short (its status is sent already).
 */
@Injectable()
export class ExportService implements BeforeApplicationShutdown {
  private readonly logger = new Logger(ExportService.name);
  /** The exports streaming now: a stopping server cuts them short rather than wait for their clients. */
  private readonly running = new Set<{ stop: AbortController; ended: Promise<void> }>();

  constructor(
    private readonly data: DataService,
    private readonly access: AccessService,
    private readonly views: ViewService,
    private readonly slots: ExportSlots,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async export(
    caller: Caller,
    objectName: string,
    query: ExportQuery,
    open: () => ServerResponse,
    clientLeft: AbortSignal,
  ): Promise<void> {
    // A view gives its filter (ANDed with where), its order and its columns unless the query names its own.
    const viewed = await this.views.apply(caller, objectName, query.view, {
      where: parseJsonParam('where', query.where, 'invalid_where'),
      orderBy: parseJsonParam('orderBy', query.orderBy, 'invalid_order_by'),
      fields: query.fields === undefined || query.fields.trim() === '' ? undefined : query.fields,
    });
    const { where, orderBy } = viewed;
    const bom = parseFlagParam('bom', query.bom, false);
    const object = await this.access.view(caller, objectName, 'read');
    const chosen = Array.isArray(viewed.fields)
      ? viewed.fields.join(',')
      : typeof viewed.fields === 'string'
        ? viewed.fields
        : '';
    const names = [
      ...new Set(
        chosen
          .split(',')
          .map((name) => name.trim())
          .filter((name) => name !== ''),
      ),
    ];

    const release = this.slots.admit(caller);
    // Ends the read when the client leaves, the export runs out of time or the server stops.
    const stop = new AbortController();
    const leave = () => stop.abort();
    clientLeft.addEventListener('abort', leave, { once: true });
    if (clientLeft.aborted) stop.abort();
    let outOfTime = false;
    const deadline = setTimeout(() => {
      outOfTime = true;
      stop.abort();
    }, this.config.exportMaxDurationMs);
    let ended = () => {};
    const running = { stop, ended: new Promise<void>((resolve) => (ended = resolve)) };
    this.running.add(running);
    try {
      // The columns read: the chosen fields and id, or every field.
      let batchRows = Math.max(1, Math.floor(FIRST_BATCH_CELLS / (names.length ? names.length + 1 : object.fields.length)));
      const stream = await this.data.stream(
        caller,
        objectName,
        { where, orderBy, fields: names.length ? names : undefined },
        {
          signal: stop.signal,
          batchRows: () => batchRows,
          idleTimeoutMs: this.config.exportStallTimeoutMs + IDLE_BACKSTOP_MARGIN_MS,
        },
      );
      try {
        const header = names.length ? names : stream.fields.map((field) => field.name);
        const columns = header.map((name) => stream.fields.findIndex((field) => field.name === name));
        const writers = columns.map((at) => cellWriter(stream.fields[at]));
        const raw = open();
        raw.writeHead(200, {
          'content-type': 'text/csv; charset=utf-8',
          'content-disposition': `attachment; filename="${object.name}.csv"`,
          'cache-control': 'no-store',
        });
        let sent = await this.send(raw, (bom ? '\uFEFF' : '') + csvLine(header), stop.signal);
        let rowsSent = 0;
        let charsSent = 0;
        try {
          if (sent === 'sent') {
            for await (const rows of stream) {
              const text = csvLines(rows, columns, writers);
              rowsSent += rows.length;
              charsSent += text.length;
              // Its rows are garbage now, but the stream's generators still hold the array while suspended:
              // emptied, they are not copied from one young generation to the next while the socket drains.
              rows.length = 0;
              batchRows = Math.min(MAX_CURSOR_BATCH_ROWS, Math.max(1, Math.floor(BATCH_CHARS / (charsSent / rowsSent))));
              sent = await this.send(raw, text, stop.signal);
              if (sent !== 'sent') break;
            }
          }
        } catch (error) {
          if (!stop.signal.aborted)
            this.logger.warn({ msg: 'export failed while streaming', object: object.name, rowsSent, error });
          sent = 'closed';
        }
        if (sent === 'sent' && !stop.signal.aborted) {
          raw.end();
          return;
        }
        if (outOfTime || sent === 'stalled') {
          this.logger.warn({
            msg: outOfTime ? 'export cut short: EXPORT_MAX_DURATION_MS reached' : 'export cut short: the client stopped reading',
            object: object.name,
            rowsSent,
          });
        }
        // The status is sent: cutting the response short is the only way left to say it is incomplete.
        raw.destroy();
      } finally {
        await stream.close();
      }
    } finally {
      clearTimeout(deadline);
      clientLeft.removeEventListener('abort', leave);
      release();
      this.running.delete(running);
      ended();
    }
  }

  /** A running export would keep the HTTP server from closing until its client is done (or stalls). */
  async beforeApplicationShutdown(): Promise<void> {
    const running = [...this.running];
    for (const { stop } of running) stop.abort();
    await Promise.all(running.map(({ ended }) => ended));
  }

  /** Writes a chunk; when the socket's buffer is full, waits for it to drain (EXPORT_STALL_TIMEOUT_MS at most). */
  private send(raw: ServerResponse, text: string, signal: AbortSignal): Promise<Sent> {
    if (raw.destroyed || raw.writableEnded || signal.aborted) return Promise.resolve('closed');
    if (raw.write(text)) return Promise.resolve('sent');
    return new Promise<Sent>((resolve) => {
      const done = (result: Sent) => {
        clearTimeout(timer);
        raw.off('drain', onDrain);
        raw.off('close', onClose);
        signal.removeEventListener('abort', onClose);
        resolve(result);
      };
      const onDrain = () => done('sent');
      const onClose = () => done('closed');
      const timer = setTimeout(() => done('stalled'), this.config.exportStallTimeoutMs);
      raw.once('drain', onDrain);
      raw.once('close', onClose);
      signal.addEventListener('abort', onClose, { once: true });
    });
  }
}
