import { Injectable } from '@nestjs/common';
import { stringify } from 'csv-stringify/sync';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../auth/auth.decorators';
import { DomainError } from '../common/domain-error';
import { ViewService } from '../views/view.service';
import { DataService } from '../data/data.service';
import { parseJsonParam } from '../data/records.service';
import { AccessService } from '../governance/access.service';
import type { FieldMeta } from '../metadata/object-metadata.types';
import { valueToCell } from './csv-values';

/** Records read per keyset page of an export. */
const PAGE_ROWS = 1_000;

export interface ExportQuery {
  where?: string;
  orderBy?: string;
  fields?: string;
  view?: string;
  bom?: string;
}

/**
 * CSV exports: every record the caller may read that matches `where`, in `orderBy` order, a keyset
 * page at a time through DataService.find (the caller's row filter and hidden fields apply as on any
 * read), each page written once the socket took the one before: memory stays one page whatever the
 * size of the table. The first page is read before the response starts, so a bad query is still a
 * JSON 4xx; an error after that cuts the response short (its status is sent already).
 */
@Injectable()
export class ExportService {
  constructor(
    private readonly data: DataService,
    private readonly access: AccessService,
    private readonly views: ViewService,
  ) {}

  async export(
    caller: Caller,
    objectName: string,
    query: ExportQuery,
    open: () => ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    // A view gives its filter (ANDed with where), its order and its columns unless the query names its own.
    const viewed = await this.views.apply(caller, objectName, query.view, {
      where: parseJsonParam('where', query.where, 'invalid_where'),
      orderBy: parseJsonParam('orderBy', query.orderBy, 'invalid_order_by'),
      fields: query.fields === undefined || query.fields.trim() === '' ? undefined : query.fields,
    });
    const { where, orderBy } = viewed;
    const bom = parseFlag('bom', query.bom);
    const object = await this.access.view(caller, objectName, 'read');
    const byName = new Map(object.fields.map((f) => [f.name, f]));
    const chosen = Array.isArray(viewed.fields)
      ? viewed.fields.join(',')
      : typeof viewed.fields === 'string'
        ? viewed.fields
        : '';
    const names =
      chosen.trim() === ''
        ? object.fields.map((f) => f.name)
        : chosen
            .split(',')
            .map((name) => name.trim())
            .filter((name) => name !== '');
    const fields = [...new Set(names)];
    const columns: Array<FieldMeta | undefined> = fields.map((name) => byName.get(name));
    const page = (cursor?: string) =>
      this.data.find(
        caller,
        objectName,
        { where, orderBy, fields: fields.join(','), limit: PAGE_ROWS, offset: 0, cursor, withCursor: true },
        { signal },
      );
    let result = await page();
    const raw = open();
    raw.writeHead(200, {
      'content-type': 'text/csv; charset=utf-8',
      'content-disposition': `attachment; filename="${object.name}.csv"`,
      'cache-control': 'no-store',
    });
    try {
      if (!(await send(raw, (bom ? '\uFEFF' : '') + stringify([fields])))) return;
      for (;;) {
        const rows = result.records.map((record) => fields.map((name, at) => valueToCell(columns[at], record[name])));
        if (rows.length && !(await send(raw, stringify(rows)))) return;
        if (!result.nextCursor || signal.aborted) break;
        result = await page(result.nextCursor);
      }
      raw.end();
    } catch {
      // The status is sent: cutting the response short is the only way left to say it is incomplete.
      raw.destroy();
    }
  }
}

/** Writes a chunk, waiting for the socket to drain when its buffer is full; false once the client left. */
async function send(raw: ServerResponse, text: string): Promise<boolean> {
  if (raw.destroyed || raw.writableEnded) return false;
  if (raw.write(text)) return true;
  return new Promise<boolean>((resolve) => {
    const done = (drained: boolean) => {
      raw.off('drain', onDrain);
      raw.off('close', onClose);
      resolve(drained);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    raw.once('drain', onDrain);
    raw.once('close', onClose);
  });
}

function parseFlag(name: string, raw: string | undefined): boolean {
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  throw new DomainError('validation_failed', `${name} must be true or false`, { errors: [`${name} must be true or false`] });
}
