import { Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { clampLimit } from '../common/limits';
import { parseJsonParam } from '../common/query-params';
import { DataService } from '../data/data.service';
import { ViewService } from '../views/view.service';
import { AggregateDto, FieldValuesQueryDto, FieldValuesResponse, RecordListResponse, RecordsQueryDto } from './records.dto';

export const RECORDS_DEFAULT_LIMIT = 50;
export const RECORDS_MAX_LIMIT = 1000;

/** The records REST API over the data engine: parses query strings, applies saved views, clamps pages. */
@Injectable()
export class RecordsService {
  constructor(
    private readonly data: DataService,
    private readonly views: ViewService,
  ) {}

  async list(caller: Caller, objectName: string, query: RecordsQueryDto, signal?: AbortSignal): Promise<RecordListResponse> {
    const limit = clampLimit(query.limit, RECORDS_DEFAULT_LIMIT, RECORDS_MAX_LIMIT);
    const offset = query.offset ?? 0;
    const viewed = await this.views.apply(caller, objectName, query.view, {
      where: parseJsonParam('where', query.where, 'invalid_where'),
      orderBy: parseJsonParam('orderBy', query.orderBy, 'invalid_order_by'),
      fields: query.fields,
    });
    const { records, total, totalExact, nextCursor } = await this.data.find(
      caller,
      objectName,
      {
        ...viewed,
        search: query.q,
        limit,
        offset,
        cursor: query.cursor,
        withCursor: true,
        total: query.total,
      },
      { signal },
    );
    return { records, ...(total === undefined ? {} : { total, totalExact }), limit, offset, nextCursor: nextCursor ?? null };
  }

  async fieldValues(
    caller: Caller,
    objectName: string,
    fieldName: string,
    query: FieldValuesQueryDto,
    signal?: AbortSignal,
  ): Promise<FieldValuesResponse> {
    const { where } = await this.views.apply(caller, objectName, query.view, {
      where: parseJsonParam('where', query.where, 'invalid_where'),
    });
    const values = await this.data.fieldValues(
      caller,
      objectName,
      fieldName,
      { where, contains: query.q, limit: clampLimit(query.limit, RECORDS_DEFAULT_LIMIT, RECORDS_MAX_LIMIT) },
      { signal },
    );
    return { values };
  }

  async aggregate(
    caller: Caller,
    objectName: string,
    dto: AggregateDto,
    signal?: AbortSignal,
  ): Promise<{ rows: Record<string, unknown>[] }> {
    const rows = await this.data.aggregate(
      caller,
      objectName,
      {
        where: dto.where,
        groupBy: dto.groupBy,
        aggregations: dto.aggregations,
        orderBy: dto.orderBy,
        limit: clampLimit(dto.limit, RECORDS_DEFAULT_LIMIT, RECORDS_MAX_LIMIT),
      },
      { signal },
    );
    return { rows };
  }
}
