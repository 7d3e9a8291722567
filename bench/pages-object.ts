/**
 * The object of the grid pages bench (`npm run bench:pages`, `npm run bench:request-cpu`): 200,000 deals
 * with three indexed fields, one unindexed, 5% of amounts and weights empty.
 */
import { log, sql } from './harness';
import type { HttpClient } from './load';

export const PAGES_OBJECT = 'bench_deal';
export const PAGES_ROWS = 200_000;
export const STAGES = ['won', 'lost', 'open', 'proposal', 'negotiation'];
const FIELDS = [
  { name: 'name', label: 'Name', type: 'text', required: true },
  { name: 'stage', label: 'Stage', type: 'select', options: STAGES, indexed: true },
  { name: 'amount', label: 'Amount', type: 'currency', indexed: true },
  { name: 'weighted', label: 'Weighted', type: 'currency' },
  { name: 'close_date', label: 'Close date', type: 'date', indexed: true },
];

/** Creates the object and fills it with `rows` deals (one SQL insert, then `vacuum analyze`); ms taken. */
export async function createPagesObject(admin: HttpClient, databaseUrl: string, rows = PAGES_ROWS): Promise<number> {
  await admin.json(
    { method: 'POST', path: '/api/v1/objects', body: { name: PAGES_OBJECT, label: 'Bench deal', fields: FIELDS } },
    201,
  );
  const started = performance.now();
  // Stages in turn (won: 40,000 rows, two thirds of them over 50,000).
  await sql(
    databaseUrl,
    `insert into "data"."${PAGES_OBJECT}" ("name", "stage", "amount", "weighted", "close_date")
     select 'deal ' || g, (array['won', 'lost', 'open', 'proposal', 'negotiation'])[1 + g % 5],
            case when g % 20 = 1 then null else ((g::bigint * 7919) % 15000000) / 100.0 end,
            case when g % 20 = 1 then null else ((g::bigint * 104729) % 15000000) / 100.0 end,
            date '2020-01-01' + (g * 37) % 2000
     from generate_series(1, ${rows}) g`,
  );
  await sql(databaseUrl, `vacuum analyze "data"."${PAGES_OBJECT}"`);
  const fillMs = performance.now() - started;
  log(`pages: filled ${PAGES_OBJECT} with ${rows} rows in ${fillMs.toFixed(0)} ms`);
  return fillMs;
}
