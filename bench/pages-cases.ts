/**
 * The requests of the grid pages bench (`npm run bench:pages`) and, for each, the statements the app
 * runs for it: shared by the bench and by its bare HTTP floor server (bench/pages-http-floor.ts).
 */
import { compileAggregate } from '../src/data/aggregate.compiler';
import type { FindQuery } from '../src/data/data.types';
import { encodeFieldValue } from '../src/data/field-value.codec';
import { orderTerms } from '../src/data/order-by.compiler';
import { newChangeSet } from '../src/data/change-outbox';
import { compileCountEstimate, compileFind, compileFindOne, compileInsert } from '../src/data/records.compiler';
import type { ObjectMeta } from '../src/metadata/object-metadata.types';
import type { HttpRequest, HttpResponse } from './load';
import { PAGES_OBJECT, PAGES_ROWS, STAGES } from './pages-object';
import { queryString } from './sample-requests';

const OBJECT = PAGES_OBJECT;
const ROWS = PAGES_ROWS;
export const LIMIT = 50;
const DEEP_OFFSET = 150_000;
/** The app's default RECORDS_COUNT_CAP: the totals below are counted up to it. */
export const COUNT_CAP = 10_000;

export type Statement = { sql: string; parameters: readonly unknown[] };

export interface PageCase {
  name: string;
  description: string;
  /** Requests per round, each side. */
  perRound: number;
  request(i: number): HttpRequest;
  /** The success status (default 200). */
  status?: number;
  check(res: HttpResponse): boolean;
  /** The statements the app runs for the i-th request, in order. */
  statements(i: number): Statement[];
  /** The statement whose plan the section shows. */
  plan?: Statement;
}

/** The cases, with the statements the app runs for each (see DataService.find and its total). */
export function pageCases(object: ObjectMeta, ids: string[], keyId: string): PageCase[] {
  /** A page and its total (see DataService.find): every page here matches more than COUNT_CAP records. */
  const page = (find: FindQuery): Pick<PageCase, 'statements' | 'plan'> => {
    // Counted up to the cap in the page's own statement unless the page itself shows more; the table's
    // estimate comes with the count, a filter's from the planner in a statement of its own.
    const counted = find.offset + LIMIT + 1 <= COUNT_CAP;
    const terms = orderTerms(object, find.orderBy);
    const statement = compileFind(object, find, { terms, keys: true, ...(counted ? { countUpTo: COUNT_CAP } : {}) });
    const statements = [statement];
    if (find.where !== undefined || !counted) statements.push(compileCountEstimate(object, find.where));
    return { statements: () => statements, plan: statement };
  };
  const records = (params: Record<string, unknown>): HttpRequest => ({
    method: 'GET',
    path: `/api/v1/objects/${OBJECT}/records?${queryString(params)}`,
  });
  /** A full page whose total is an estimate above the cap (every case here matches more than COUNT_CAP records). */
  const estimatedPage = (res: HttpResponse) => {
    const body = JSON.parse(res.body) as { records: unknown[]; total: number; totalExact: boolean };
    return body.records.length === LIMIT && body.totalExact === false && body.total > COUNT_CAP;
  };
  const byAmount = [{ field: 'amount', order: 'desc' }];
  const byWeight = [{ field: 'weighted', order: 'desc' }];
  const won = { stage: 'won', amount: { $gt: 50_000 } };
  const byClose = [{ field: 'close_date', order: 'desc' }];
  const aggregate = {
    groupBy: ['stage'],
    aggregations: [
      { function: 'count', alias: 'deals' },
      { function: 'sum', field: 'amount', alias: 'total' },
    ],
  };
  const newDeal = (i: number) => ({ name: `new deal ${i}`, stage: STAGES[i % 5], amount: 1000 + i, close_date: '2026-12-01' });
  const fieldOf = (name: string) => object.fields.find((f) => f.name === name)!;
  return [
    {
      name: 'first page, indexed order',
      description: `GET records: orderBy amount desc (indexed, 5% empty), limit ${LIMIT}, no filter`,
      perRound: 120,
      request: () => records({ orderBy: byAmount, limit: LIMIT }),
      check: estimatedPage,
      ...page({ orderBy: byAmount, limit: LIMIT, offset: 0 }),
    },
    {
      name: 'first page, unindexed order',
      description: `GET records: orderBy weighted desc (no index, 5% empty), limit ${LIMIT}, no filter`,
      perRound: 40,
      request: () => records({ orderBy: byWeight, limit: LIMIT }),
      check: estimatedPage,
      ...page({ orderBy: byWeight, limit: LIMIT, offset: 0 }),
    },
    {
      name: 'filtered page',
      description: `GET records: stage = won and amount > 50,000 (26,667 records), orderBy close_date desc, limit ${LIMIT}`,
      perRound: 60,
      request: () => records({ where: won, orderBy: byClose, limit: LIMIT }),
      check: estimatedPage,
      ...page({ where: won, orderBy: byClose, limit: LIMIT, offset: 0 }),
    },
    {
      name: 'deep page',
      description: `GET records: orderBy amount desc, limit ${LIMIT}, offset ${DEEP_OFFSET.toLocaleString('en-US')}`,
      perRound: 16,
      request: () => records({ orderBy: byAmount, limit: LIMIT, offset: DEEP_OFFSET }),
      check: estimatedPage,
      ...page({ orderBy: byAmount, limit: LIMIT, offset: DEEP_OFFSET }),
    },
    {
      name: 'get by id',
      description: 'GET records/:id (1,000 ids in turn)',
      perRound: 200,
      request: (i) => ({ method: 'GET', path: `/api/v1/objects/${OBJECT}/records/${ids[i % ids.length]}` }),
      check: (res) => (JSON.parse(res.body) as { id: string }).id.length === 36,
      statements: (i) => [compileFindOne(object, ids[i % ids.length], undefined)],
    },
    {
      name: 'aggregate',
      description: 'POST aggregate: groupBy stage, count + sum(amount)',
      perRound: 24,
      request: () => ({ method: 'POST', path: `/api/v1/objects/${OBJECT}/aggregate`, body: aggregate }),
      check: (res) => (JSON.parse(res.body) as { rows: unknown[] }).rows.length === STAGES.length,
      statements: () => [compileAggregate(object, { ...aggregate, limit: 50 }).query],
    },
    {
      name: 'single create',
      description: 'POST records: one deal of 4 fields (its change event in the same statement)',
      perRound: 120,
      request: (i) => ({ method: 'POST', path: `/api/v1/objects/${OBJECT}/records`, body: newDeal(i) }),
      status: 201,
      check: (res) => (JSON.parse(res.body) as { id: string }).id.length === 36,
      statements: (i) => {
        const values = new Map(Object.entries(newDeal(ROWS + i)).map(([name, v]) => [name, encodeFieldValue(fieldOf(name), v)]));
        return [compileInsert(object, [values], { op: 'create', keyId, changeSet: newChangeSet('api') })];
      },
    },
  ];
}
