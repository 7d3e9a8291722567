/**
 * Computed fields at size: 20,000 accounts and 200,000 deals, 8 requests in flight.
 *
 * (a) the first page of accounts sorted by a stored, indexed rollup (sum of open deal amounts) against the
 *     same page sorted by a plain indexed field;
 * (b) that page for a key under a row filter on deals (the rollup computed under its access), and its SQL
 *     floor: the same query written by hand, run straight on Postgres;
 * (c) a deal create and update with three stored rollups on its account, against the same writes on a twin
 *     pair of objects without them;
 * (d) a filter on a formula (computed when read) over every deal (an aggregate count), against the same
 *     expression written by hand in SQL, straight on Postgres;
 * (e) filling a new stored rollup over every account (the fill job), with single deal creates meanwhile;
 * (f) links fan-out: a write of a record's links, with a stored count over them, locks that record and every
 *     record linked to it first (in id order); one `$add` or `$remove` on a record with 10, 1,000 and 5,000 links.
 */
import { Pool } from 'pg';
import { log, sql } from './harness';
import { HttpClient, HttpRequest, percentile, runInterleaved } from './load';
import type { Goal } from './results';

export const COMPUTED_START = '<!-- computed:start -->';
export const COMPUTED_END = '<!-- computed:end -->';

const ACCOUNTS = 20_000;
const DEALS = 200_000;
const IN_FLIGHT = 8;
const PAGE = 50;
/** (f): links of the records written, and writes timed per size (one after another: they lock the same record). */
const FANOUT_SIZES = [10, 1_000, 5_000];
const FANOUT_RUNS = 60;

export interface ComputedResult {
  accounts: number;
  deals: number;
  /** Filling the three rollups used by (a) and (c), one job after another: seconds each. */
  initialFills: number[];
  /** Sorted latencies, ms. */
  sortedByStored: number[];
  sortedByPlain: number[];
  underFilter: number[];
  underFilterFloor: number[];
  createWith: number[];
  createWithout: number[];
  updateWith: number[];
  updateWithout: number[];
  formulaFilter: number[];
  formulaFloor: number[];
  /** The same by hand with the formula's result type (number: double precision), as the engine compares it. */
  formulaTypedFloor: number[];
  fillSeconds: number;
  fillCreates: number[];
  fillCreateErrors: number;
  /** (f) sorted latencies of one links write per number of links of the record written. */
  fanout: Array<{ links: number; writes: number[] }>;
  errors: string[];
}

async function q(pool: Pool, text: string): Promise<number> {
  const started = process.hrtime.bigint();
  await pool.query(text);
  return Number(process.hrtime.bigint() - started) / 1e6;
}

/** `runs` queries on Postgres, `IN_FLIGHT` at a time: sorted latencies in ms. */
async function sqlLoad(pool: Pool, runs: number, text: string): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < runs) latencies.push(await q(pool, text));
    }),
  );
  return latencies.sort((a, b) => a - b);
}

export async function computedRun(admin: HttpClient, port: number, databaseUrl: string): Promise<ComputedResult> {
  const errors: string[] = [];
  const object = (name: string, fields: unknown[]) =>
    admin.json({ method: 'POST', path: '/api/v1/objects', body: { name, label: name, fields } }, 201);
  for (const [account, deal] of [
    ['bench_acct', 'bench_deal'],
    ['bench_acct_plain', 'bench_deal_plain'],
  ]) {
    await object(account, [
      { name: 'name', label: 'Name', type: 'text' },
      { name: 'tier', label: 'Tier', type: 'integer', indexed: true },
    ]);
    await object(deal, [
      { name: 'account', label: 'Account', type: 'lookup', reference: account },
      { name: 'amount', label: 'Amount', type: 'currency' },
      { name: 'probability', label: 'Probability', type: 'integer' },
      { name: 'stage', label: 'Stage', type: 'select', options: ['open', 'won', 'lost'] },
      { name: 'owner', label: 'Owner', type: 'text' },
      {
        name: 'weighted',
        label: 'Weighted',
        type: 'formula',
        expression: '{amount} * {probability} / 100',
        resultType: 'number',
      },
    ]);
    await sql(
      databaseUrl,
      `insert into data.${account} (name, tier) select 'Account ' || g, (g * 7919) % 100000 from generate_series(1, ${ACCOUNTS}) g`,
    );
    await sql(
      databaseUrl,
      `insert into data.${deal} (account, amount, probability, stage, owner)
       select a.id, ((g::bigint * 104729) % 1000000) / 100.0, (g * 37) % 101, (array['open', 'won', 'lost'])[1 + g % 3], 'owner' || (g % 10)
       from generate_series(1, ${DEALS}) g
       join (select id, row_number() over (order by id) - 1 as n from data.${account}) a on a.n = g % ${ACCOUNTS}`,
    );
    await sql(databaseUrl, `analyze data.${account}`);
    await sql(databaseUrl, `analyze data.${deal}`);
  }
  log(`computed: ${ACCOUNTS} accounts and ${DEALS} deals, twice`);

  const waitJob = async (id: string): Promise<{ status: string }> => {
    for (;;) {
      const job = await admin.json<{ status: string }>({ method: 'GET', path: `/api/v1/jobs/${id}` });
      if (job.status !== 'running') return job;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const addStored = async (name: string, spec: Record<string, unknown>) => {
    const started = performance.now();
    const field = await admin.json<{ fillJobId?: string }>(
      { method: 'POST', path: '/api/v1/objects/bench_acct/fields', body: { name, label: name, stored: true, ...spec } },
      201,
    );
    const job = field.fillJobId ? await waitJob(field.fillJobId) : { status: 'done' };
    if (job.status !== 'done') throw new Error(`fill of ${name} ended ${job.status}`);
    return (performance.now() - started) / 1000;
  };
  const initialFills = [
    await addStored('open_total', {
      type: 'rollup',
      relation: 'bench_deal.account',
      function: 'sum',
      field: 'amount',
      filter: { stage: 'open' },
      indexed: true,
    }),
    await addStored('n_deals', { type: 'count', relation: 'bench_deal.account' }),
    await addStored('max_amount', { type: 'rollup', relation: 'bench_deal.account', function: 'max', field: 'amount' }),
  ];
  await sql(databaseUrl, 'analyze data.bench_acct');
  log(`computed: filled three stored rollups in ${initialFills.map((s) => s.toFixed(1)).join(', ')} s`);

  const key = async (body: Record<string, unknown>) =>
    (await admin.json<{ secret: string }>({ method: 'POST', path: '/api/v1/api-keys', body }, 201)).secret;
  await admin.json(
    {
      method: 'POST',
      path: '/api/v1/policies',
      body: {
        name: 'bench_all',
        objects: Object.fromEntries(
          ['bench_acct', 'bench_deal', 'bench_acct_plain', 'bench_deal_plain'].map((o) => [
            o,
            { read: true, create: true, update: true },
          ]),
        ),
      },
    },
    201,
  );
  await admin.json(
    {
      method: 'POST',
      path: '/api/v1/policies',
      body: {
        name: 'bench_own',
        objects: { bench_acct: { read: true }, bench_deal: { read: true, rowFilter: { owner: '$subject' } } },
      },
    },
    201,
  );
  const member = new HttpClient(port, {
    authorization: `Bearer ${await key({ name: 'bench all', role: 'member', policies: ['bench_all'] })}`,
  });
  const scoped = new HttpClient(port, {
    authorization: `Bearer ${await key({ name: 'bench own', role: 'member', subject: 'owner3', policies: ['bench_own'] })}`,
  });
  const pool = new Pool({ connectionString: databaseUrl, max: IN_FLIGHT });
  const query = (params: Record<string, unknown>) =>
    Object.entries(params)
      .map(([k, v]) => `${k}=${encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v))}`)
      .join('&');
  const page = (field: string): HttpRequest => ({
    method: 'GET',
    path:
      '/api/v1/objects/bench_acct/records?' +
      query({ orderBy: [{ field, order: 'desc' }], limit: PAGE, fields: `name,${field}` }),
  });
  const tally = (name: string, r: { errors: number; errorSamples: string[]; latencies: number[] }) => {
    if (r.errors) errors.push(`${name}: ${r.errors} errors, e.g. ${r.errorSamples[0]}`);
    return r.latencies;
  };
  try {
    // (a) sorted by the stored, indexed rollup vs by a plain indexed field: interleaved, 8 in flight.
    await runInterleaved(member, 40, IN_FLIGHT, [{ make: () => page('open_total') }, { make: () => page('tier') }]);
    const [byStored, byPlain] = await runInterleaved(member, 800, IN_FLIGHT, [
      { make: () => page('open_total') },
      { make: () => page('tier') },
    ]);
    const sortedByStored = tally('(a) stored', byStored);
    const sortedByPlain = tally('(a) plain', byPlain);
    log(`computed (a): p95 ${percentile(sortedByStored, 95).toFixed(1)} ms vs ${percentile(sortedByPlain, 95).toFixed(1)} ms`);

    // (b) the same page under a row filter on deals, and the same query by hand.
    const [underFilterRun] = await runInterleaved(scoped, 48, IN_FLIGHT, [{ make: () => page('open_total') }]);
    const underFilter = tally('(b)', underFilterRun);
    const underFilterFloor = await sqlLoad(
      pool,
      48,
      `select a.id, a.name, (select coalesce(sum(d.amount), 0) from data.bench_deal d
         where d.account = a.id and d.owner = 'owner3' and d.stage = 'open') as v
       from data.bench_acct a order by v desc, a.id desc limit ${PAGE + 1}`,
    );
    log(
      `computed (b): p95 ${percentile(underFilter, 95).toFixed(1)} ms, floor ${percentile(underFilterFloor, 95).toFixed(1)} ms`,
    );

    // (c) creates and updates, with the three stored rollups and on the twin without them.
    const dealIds = async (object: string) =>
      (await sql<{ id: string }>(databaseUrl, `select id from data.${object} order by random() limit 2000`)).map((r) => r.id);
    const accountIds = async (object: string) =>
      (await sql<{ id: string }>(databaseUrl, `select id from data.${object} order by random() limit 2000`)).map((r) => r.id);
    const [dealsWith, dealsWithout, acctsWith, acctsWithout] = await Promise.all([
      dealIds('bench_deal'),
      dealIds('bench_deal_plain'),
      accountIds('bench_acct'),
      accountIds('bench_acct_plain'),
    ]);
    const create = (object: string, accounts: string[]) => (i: number) => ({
      method: 'POST' as const,
      path: `/api/v1/objects/${object}/records`,
      body: {
        account: accounts[i % accounts.length],
        amount: (i % 977) + 0.5,
        probability: i % 100,
        stage: 'open',
        owner: 'owner1',
      },
    });
    const update = (object: string, ids: string[]) => (i: number) => ({
      method: 'PATCH' as const,
      path: `/api/v1/objects/${object}/records/${ids[(i * 7) % ids.length]}`,
      body: { amount: (i % 911) + 0.25 },
    });
    const writes = await runInterleaved(member, 1600, IN_FLIGHT, [
      { make: create('bench_deal', acctsWith), expectStatus: 201 },
      { make: create('bench_deal_plain', acctsWithout), expectStatus: 201 },
      { make: update('bench_deal', dealsWith) },
      { make: update('bench_deal_plain', dealsWithout) },
    ]);
    const [createWith, createWithout, updateWith, updateWithout] = writes.map((w, i) => tally(`(c) ${i}`, w));
    log(
      `computed (c): create p95 ${percentile(createWith, 95).toFixed(1)} vs ${percentile(createWithout, 95).toFixed(1)} ms, ` +
        `update p95 ${percentile(updateWith, 95).toFixed(1)} vs ${percentile(updateWithout, 95).toFixed(1)} ms`,
    );

    // (d) a filter on a formula over every deal (the count of those matching) vs the expression by hand.
    const [formulaRun] = await runInterleaved(member, 80, IN_FLIGHT, [
      {
        make: () => ({
          method: 'POST',
          path: '/api/v1/objects/bench_deal_plain/aggregate',
          body: { where: { weighted: { $gt: 2500 } }, aggregations: [{ function: 'count', alias: 'n' }] },
        }),
      },
    ]);
    const formulaFilter = tally('(d)', formulaRun);
    const formulaFloor = await sqlLoad(
      pool,
      80,
      `select count(*) as n from data.bench_deal_plain where amount * probability / 100 > 2500`,
    );
    const formulaTypedFloor = await sqlLoad(
      pool,
      80,
      `select count(*) as n from data.bench_deal_plain where (amount * probability / 100)::float8 > 2500`,
    );
    log(`computed (d): p95 ${percentile(formulaFilter, 95).toFixed(1)} ms vs ${percentile(formulaFloor, 95).toFixed(1)} ms`);

    // (e) a new stored rollup filled over every account, with single creates meanwhile (one at a time).
    let filling = true;
    const fillCreates: number[] = [];
    let fillCreateErrors = 0;
    const creator = (async () => {
      const make = create('bench_deal', acctsWith);
      for (let i = 0; filling; i++) {
        const started = performance.now();
        const res = await member.send(make(i));
        fillCreates.push(performance.now() - started);
        if (res.status !== 201) fillCreateErrors++;
      }
    })();
    const fillSeconds = await addStored('won_total', {
      type: 'rollup',
      relation: 'bench_deal.account',
      function: 'sum',
      field: 'amount',
      filter: { stage: 'won' },
    });
    filling = false;
    await creator;
    fillCreates.sort((a, b) => a - b);
    const wrong = await sql<{ n: string }>(
      databaseUrl,
      `select count(*)::text as n from data.bench_acct a where a.won_total is distinct from
         (select coalesce(sum(d.amount), 0) from data.bench_deal d where d.account = a.id and d.stage = 'won')
         or a.open_total is distinct from (select coalesce(sum(d.amount), 0) from data.bench_deal d where d.account = a.id and d.stage = 'open')`,
    );
    if (wrong[0].n !== '0') errors.push(`(e) ${wrong[0].n} accounts whose stored values differ from their recomputation`);
    log(
      `computed (e): filled in ${fillSeconds.toFixed(1)} s; creates meanwhile p95 ${percentile(fillCreates, 95).toFixed(1)} ms`,
    );
    // (f) links fan-out, on the accounts without stored rollups: teams linked to N of them, a stored count on teams.
    await object('bench_team', [
      { name: 'name', label: 'Name', type: 'text' },
      { name: 'members', label: 'Members', type: 'links', reference: 'bench_acct_plain', inverse: 'teams' },
    ]);
    await admin.json(
      {
        method: 'POST',
        path: '/api/v1/objects/bench_team/fields',
        body: { name: 'n_members', label: 'Members', type: 'count', relation: 'members', stored: true },
      },
      201,
    );
    const most = Math.max(...FANOUT_SIZES);
    const plainIds = (
      await sql<{ id: string }>(databaseUrl, `select id::text as id from data.bench_acct_plain order by id limit ${most + 1}`)
    ).map((r) => r.id);
    const spare = plainIds[most];
    const fanout: ComputedResult['fanout'] = [];
    for (const size of FANOUT_SIZES) {
      const team = (
        await admin.json<{ id: string }>(
          { method: 'POST', path: '/api/v1/objects/bench_team/records', body: { name: `team of ${size}` } },
          201,
        )
      ).id;
      const path = `/api/v1/objects/bench_team/records/${team}`;
      // At most 1,000 ids per write (MAX_LINK_IDS).
      for (let i = 0; i < size; i += 1000) {
        await admin.json({ method: 'PATCH', path, body: { members: { $add: plainIds.slice(i, Math.min(size, i + 1000)) } } });
      }
      const writes: number[] = [];
      for (let i = 0; i < FANOUT_RUNS; i++) {
        const started = performance.now();
        await admin.json({ method: 'PATCH', path, body: { members: { [i % 2 ? '$remove' : '$add']: [spare] } } });
        writes.push(performance.now() - started);
      }
      const [{ n }] = await sql<{ n: string }>(
        databaseUrl,
        `select n_members::text as n from data.bench_team where id = '${team}'`,
      );
      if (Number(n) !== size) errors.push(`(f) the team of ${size} counts ${n} members`);
      writes.sort((a, b) => a - b);
      fanout.push({ links: size, writes });
      log(`computed (f): a links write on a record with ${size} links p50 ${ms(writes, 50)}, p95 ${ms(writes)}`);
    }
    return {
      fanout,
      accounts: ACCOUNTS,
      deals: DEALS,
      initialFills,
      sortedByStored,
      sortedByPlain,
      underFilter,
      underFilterFloor,
      createWith,
      createWithout,
      updateWith,
      updateWithout,
      formulaFilter,
      formulaFloor,
      formulaTypedFloor,
      fillSeconds,
      fillCreates,
      fillCreateErrors,
      errors,
    };
  } finally {
    member.close();
    scoped.close();
    await pool.end();
  }
}

const ratio = (a: number[], b: number[]) => percentile(a, 95) / percentile(b, 95);
const ms = (values: number[], p = 95) => `${percentile(values, p).toFixed(1)} ms`;

export function computedGoals(r: ComputedResult): Goal[] {
  return [
    {
      name: '(a) first page sorted by a stored, indexed rollup vs by a plain indexed field, p95',
      target: '<= 1.5x',
      measured: `${ratio(r.sortedByStored, r.sortedByPlain).toFixed(2)}x (${ms(r.sortedByStored)} vs ${ms(r.sortedByPlain)})`,
      met: ratio(r.sortedByStored, r.sortedByPlain) <= 1.5,
    },
    {
      name: '(c) deal create with three stored rollups on its account vs without, p95',
      target: '<= 1.5x',
      measured: `${ratio(r.createWith, r.createWithout).toFixed(2)}x (${ms(r.createWith)} vs ${ms(r.createWithout)})`,
      met: ratio(r.createWith, r.createWithout) <= 1.5,
    },
    {
      name: '(c) deal update with three stored rollups on its account vs without, p95',
      target: '<= 1.5x',
      measured: `${ratio(r.updateWith, r.updateWithout).toFixed(2)}x (${ms(r.updateWith)} vs ${ms(r.updateWithout)})`,
      met: ratio(r.updateWith, r.updateWithout) <= 1.5,
    },
    {
      name: '(d) filter on a formula over 200,000 deals vs the same expression by hand in SQL, p95',
      target: '<= 1.2x',
      measured: `${ratio(r.formulaFilter, r.formulaFloor).toFixed(2)}x (${ms(r.formulaFilter)} vs ${ms(r.formulaFloor)})`,
      met: ratio(r.formulaFilter, r.formulaFloor) <= 1.2,
    },
    {
      name: '(e) filling a new stored rollup over 20,000 accounts',
      target: '<= 10 s',
      measured: `${r.fillSeconds.toFixed(1)} s; ${r.fillCreates.length} single creates meanwhile, p95 ${ms(r.fillCreates)}, ${r.fillCreateErrors} failed`,
      met: r.fillSeconds <= 10 && r.fillCreateErrors === 0,
    },
    {
      name: 'Stored values equal their recomputation after the run; no request failed',
      target: '0 errors',
      measured: r.errors.length ? r.errors.join('; ') : '0',
      met: r.errors.length === 0,
    },
  ];
}

export function renderComputed(r: ComputedResult, run: { command: string; date: string; machine?: string }): string[] {
  const row = (name: string, values: number[]) =>
    `| ${name} | ${values.length} | ${ms(values, 50)} | ${ms(values, 95)} | ${ms(values, 99)} |`;
  return [
    COMPUTED_START,
    '',
    '## Computed fields: stored rollups, rollups under a row filter, formula filters, filling',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- ${r.accounts.toLocaleString('en-US')} accounts and ${r.deals.toLocaleString('en-US')} deals, twice (a twin pair without stored`,
    `  rollups for (c) and (d)); ${IN_FLIGHT} requests in flight; pages of ${PAGE}. The three stored rollups on accounts (sum of open`,
    `  amounts, indexed; count; max amount) were added after the rows and filled by jobs in ${r.initialFills.map((s) => `${s.toFixed(1)} s`).join(', ')}.`,
    '- (b) and (d) floors are the same query written by hand, run on Postgres directly (no HTTP, no JSON): the',
    '  API figures include HTTP, access compilation and encoding.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...computedGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| request | n | p50 | p95 | p99 |',
    '|---|---|---|---|---|',
    row('(a) accounts sorted by the stored rollup `open_total` desc', r.sortedByStored),
    row('(a) accounts sorted by the plain indexed `tier` desc', r.sortedByPlain),
    row('(b) sorted by `open_total`, key under a row filter on deals (computed under its access)', r.underFilter),
    row('(b) its SQL floor (same query by hand)', r.underFilterFloor),
    row('(c) deal create, three stored rollups on the account', r.createWith),
    row('(c) deal create, none', r.createWithout),
    row('(c) deal update (amount), three stored rollups', r.updateWith),
    row('(c) deal update (amount), none', r.updateWithout),
    row('(d) aggregate count where formula `weighted` > 2500', r.formulaFilter),
    row('(d) its SQL floor (the expression by hand)', r.formulaFloor),
    row(
      '(d) the same by hand with the result type of the formula (`::float8`, as the engine compares a number)',
      r.formulaTypedFloor,
    ),
    row('(e) single deal creates while the fill runs', r.fillCreates),
    ...r.fanout.map((f) =>
      row(
        `(f) one links write (\`$add\`/\`$remove\`) on a record with ${f.links.toLocaleString('en-US')} links, stored count over them`,
        f.writes,
      ),
    ),
    '',
    '(f) has no goal in the issue: it shows what the lock-first rule costs a record with many links (it locks each of',
    'them for the write), one write at a time.',
    '',
    COMPUTED_END,
  ];
}
