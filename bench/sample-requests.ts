/**
 * Requests over the sample CRM that several bench sections send (the main run, the read replica): one
 * definition each, so the sections measure the same thing.
 */
import type { HttpRequest, HttpResponse } from './load';

/** A query string: strings and numbers as they are, anything else as JSON, every value URL-encoded; undefined left out. */
export function queryString(params: Record<string, unknown>): string {
  return Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(typeof v === 'string' || typeof v === 'number' ? String(v) : JSON.stringify(v))}`)
    .join('&');
}

/** A filtered, sorted page of 50 deals (the `amount` bound varies with `i`, so the statements differ). */
export function dealPage(i: number): HttpRequest {
  return {
    method: 'GET',
    path:
      '/api/v1/objects/deal/records?' +
      queryString({
        where: { stage: { $in: ['proposal', 'negotiation'] }, amount: { $gt: 10_000 + (i % 10) * 1_000 } },
        orderBy: [{ field: 'amount', order: 'desc' }],
        limit: 50,
      }),
  };
}

export const fullDealPage = (res: HttpResponse) => (JSON.parse(res.body) as { records: unknown[] }).records.length === 50;

/** Deals by stage: count and sum of amount. */
export function dealsByStage(): HttpRequest {
  return {
    method: 'POST',
    path: '/api/v1/objects/deal/aggregate',
    body: {
      groupBy: ['stage'],
      aggregations: [
        { function: 'count', alias: 'deals' },
        { function: 'sum', field: 'amount', alias: 'total' },
      ],
    },
  };
}
