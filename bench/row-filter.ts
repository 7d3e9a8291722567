/**
 * Row filters: the records page and the aggregate of a key under a policy with a row filter
 * (`region = $attr.region`), against a key without policies that asks for the same rows with the same
 * condition in its own `where`, over the same table. Both return the same records and rows (checked
 * first); the difference is what the policy costs: compiling the caller's access and ANDing its filter.
 */
import { isDeepStrictEqual } from 'node:util';
import { log, sql } from './harness';
import { HttpClient, HttpRequest, percentile } from './load';
import type { Goal } from './results';

export const ROW_FILTER_START = '<!-- row-filter:start -->';
export const ROW_FILTER_END = '<!-- row-filter:end -->';

const ROWS = 200_000;
const RUNS = 60;
/** Most the filtered p95 may exceed the unfiltered p95 by. */
export const ROW_FILTER_GOAL_RATIO = 1.15;

export interface RowFilterStep {
  name: string;
  description: string;
  /** Sorted, milliseconds. */
  without: number[];
  with: number[];
}

export interface RowFilterResult {
  rows: number;
  visibleRows: number;
  steps: RowFilterStep[];
}

export async function rowFilterRun(admin: HttpClient, port: number, databaseUrl: string): Promise<RowFilterResult> {
  await admin.json(
    {
      method: 'POST',
      path: '/api/v1/objects',
      body: {
        name: 'bench_scoped',
        label: 'Bench scoped',
        fields: [
          {
            name: 'category',
            label: 'Category',
            type: 'select',
            options: Array.from({ length: 10 }, (_, i) => `c${i}`),
            indexed: true,
          },
          { name: 'region', label: 'Region', type: 'select', options: ['emea', 'amer', 'apac'], indexed: true },
          { name: 'amount', label: 'Amount', type: 'currency' },
        ],
      },
    },
    201,
  );
  await sql(
    databaseUrl,
    `insert into "data"."bench_scoped" ("category", "region", "amount")
     select 'c' || (g % 10), (array['emea', 'amer', 'apac'])[1 + g % 3], ((g::bigint * 7919) % 100000) / 100.0
     from generate_series(1, $1::int) as g`,
    [ROWS],
  );
  await sql(databaseUrl, 'analyze "data"."bench_scoped"');
  const [{ n }] = await sql<{ n: string }>(
    databaseUrl,
    `select count(*) as n from "data"."bench_scoped" where "region" = 'emea'`,
  );
  await admin.json(
    {
      method: 'POST',
      path: '/api/v1/policies',
      body: { name: 'bench_region', objects: { bench_scoped: { read: true, rowFilter: { region: '$attr.region' } } } },
    },
    201,
  );
  const key = async (body: Record<string, unknown>) =>
    (await admin.json<{ secret: string }>({ method: 'POST', path: '/api/v1/api-keys', body }, 201)).secret;
  const plain = new HttpClient(port, { authorization: `Bearer ${await key({ name: 'bench plain', role: 'member' })}` });
  const scoped = new HttpClient(port, {
    authorization: `Bearer ${await key({ name: 'bench scoped', role: 'member', policies: ['bench_region'], attributes: { region: 'emea' } })}`,
  });
  try {
    const q = (params: Record<string, unknown>) =>
      Object.entries(params)
        .map(([k, v]) => `${k}=${encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v))}`)
        .join('&');
    const page = (where: Record<string, unknown>): HttpRequest => ({
      method: 'GET',
      path: '/api/v1/objects/bench_scoped/records?' + q({ where, orderBy: [{ field: 'amount', order: 'desc' }], limit: 50 }),
    });
    const aggregate = (where?: Record<string, unknown>): HttpRequest => ({
      method: 'POST',
      path: '/api/v1/objects/bench_scoped/aggregate',
      body: {
        ...(where ? { where } : {}),
        groupBy: ['category'],
        aggregations: [
          { function: 'count', alias: 'n' },
          { function: 'sum', field: 'amount', alias: 'total' },
        ],
      },
    });
    const pairs = [
      {
        name: 'records page',
        description: 'GET records: category = c3, orderBy amount desc, limit 50, with total',
        without: page({ category: 'c3', region: 'emea' }),
        with: page({ category: 'c3' }),
      },
      {
        name: 'aggregate',
        description: 'POST aggregate: groupBy category, count + sum(amount)',
        without: aggregate({ region: 'emea' }),
        with: aggregate(),
      },
    ];
    const steps: RowFilterStep[] = [];
    for (const pair of pairs) {
      for (let i = 0; i < 3; i++) {
        // The cursors differ (each continues its own query); the rows must not.
        const a = withoutCursor(await plain.json(pair.without));
        const b = withoutCursor(await scoped.json(pair.with));
        if (!isDeepStrictEqual(a, b))
          throw new Error(`row filter: ${pair.name} differs: ${JSON.stringify([a, b]).slice(0, 500)}`);
      }
      const without: number[] = [];
      const withFilter: number[] = [];
      // Interleaved, so that whatever else the machine does weighs on both alike.
      for (let i = 0; i < RUNS; i++) {
        for (const [client, request, into] of [
          [plain, pair.without, without],
          [scoped, pair.with, withFilter],
        ] as const) {
          const started = performance.now();
          await client.json(request);
          into.push(performance.now() - started);
        }
      }
      without.sort((x, y) => x - y);
      withFilter.sort((x, y) => x - y);
      log(
        `row filter: ${pair.name}: p95 without ${percentile(without, 95).toFixed(1)} ms, with ${percentile(withFilter, 95).toFixed(1)} ms`,
      );
      steps.push({ name: pair.name, description: pair.description, without, with: withFilter });
    }
    return { rows: ROWS, visibleRows: Number(n), steps };
  } finally {
    plain.close();
    scoped.close();
  }
}

export function rowFilterGoals(r: RowFilterResult): Goal[] {
  return r.steps.map((s) => {
    const ratio = percentile(s.with, 95) / percentile(s.without, 95);
    return {
      name: `Row filter: ${s.name} p95 with a policy's row filter vs the same rows without`,
      target: `<= ${ROW_FILTER_GOAL_RATIO.toFixed(2)}x`,
      measured: `${ratio.toFixed(2)}x (${percentile(s.with, 95).toFixed(1)} ms vs ${percentile(s.without, 95).toFixed(1)} ms)`,
      met: ratio <= ROW_FILTER_GOAL_RATIO,
    };
  });
}

export function renderRowFilter(r: RowFilterResult, run: { command: string; date: string; machine?: string }): string[] {
  const ms = (value: number) => value.toFixed(1);
  return [
    ROW_FILTER_START,
    '',
    '## Row filters: a key under a policy against the same rows without one',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- ${r.rows.toLocaleString('en-US')} rows; a member key under a policy whose row filter is \`region = $attr.region\``,
    `  (its attribute: emea, ${r.visibleRows.toLocaleString('en-US')} rows), and a member key without policies that puts`,
    '  `region = emea` in its own `where`: both get the same records and rows (checked before timing). One request at a',
    `  time, ${r.steps[0]?.with.length ?? 0} of each, the two keys alternating.`,
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...rowFilterGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| request | query | without: p50 ms | p95 ms | with the row filter: p50 ms | p95 ms |',
    '|---|---|---|---|---|---|',
    ...r.steps.map(
      (s) =>
        `| ${s.name} | ${s.description} | ${ms(percentile(s.without, 50))} | ${ms(percentile(s.without, 95))} | ` +
        `${ms(percentile(s.with, 50))} | ${ms(percentile(s.with, 95))} |`,
    ),
    '',
    ROW_FILTER_END,
  ];
}

function withoutCursor(body: unknown): unknown {
  if (!body || typeof body !== 'object' || !('nextCursor' in body)) return body;
  const rest: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  delete rest.nextCursor;
  return rest;
}
