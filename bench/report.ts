/** Renders the benchmark results as BENCHMARKS.md, goals first, each marked met or not met. */
import { LoadResult, percentile } from './load';
import { McpResult, renderMcp } from './mcp';
import { renderRowFilter, type RowFilterResult } from './row-filter';
import { renderChangeFeed, type ChangeFeedResult } from './change-feed';
import { OpenAiCompatResult, renderOpenAiCompat } from './openai-compat';
import type { StartupTimings } from './server';
import type { Goal, MemoryReading } from './results';

export interface ScenarioResult {
  name: string;
  /** What one request does, for the table. */
  description: string;
  runs: LoadResult[];
  /** PostgreSQL work per request, from pg_stat_statements over the concurrency-1 run. */
  database?: {
    statementsPerRequest: number;
    dbMsPerRequest: number;
    top: Array<{ query: string; perRequest: number; meanMs: number }>;
  };
}

export interface TimedStep {
  name: string;
  description: string;
  /** Sorted durations, ms. */
  durations: number[];
}

/** Durable chats with 64 client tools each, created and deleted in a loop (bench/client-schemas.ts). */
export interface ClientSchemasResult {
  cycles: number;
  toolsPerChat: number;
  /** Cycles run before the first reading. */
  warmupCycles: number;
  /** Size of one create request's JSON body. */
  bodyBytes: number;
  wallMs: number;
  /** Sorted durations, ms: the POST, the POST until the chat was answered, the DELETE. */
  createMs: number[];
  answeredMs: number[];
  deleteMs: number[];
  /** First reading after the warm-up, then every few cycles, last after the last cycle. */
  memory: MemoryReading[];
  /** Cycles done at each reading (0 = right after the warm-up). */
  memoryCycles: number[];
  /** Growth goal for RSS and for the live heap, bytes. */
  limitBytes: number;
}

export interface BenchReport {
  command: string;
  date: string;
  machine: { cores: number; cpuModel: string; totalMemoryBytes: number; node: string; platform: string; postgres: string };
  totalSeconds: number;
  postgresStartMs: number;
  startup: StartupTimings;
  shutdownMs?: number;
  scenarios: ScenarioResult[];
  memory: MemoryReading[];
  scale: { rows: number; insertMs: number; analyzeMs: number; steps: TimedStep[] };
  /** Durable chats through the worker: sorted create-to-answered durations, ms. */
  durable: {
    chats: number;
    creators: number;
    wallMs: number;
    errors: number;
    completed: number;
    messages: number;
    durations: number[];
  };
  /** Another key's durable-chat turns (ms from POST to answered) alone and while one key floods the queue. */
  fairness: {
    flood: number;
    turns: number;
    /** Each model call's delay is drawn from [min, max] ms. */
    modelDelayMs: [number, number];
    /** Sorted. */
    idle: number[];
    /** In the order run. */
    during: number[];
    /** The flooding key's chats pending or running before each of the other key's turns during the flood, and after the last. */
    backlog: number[];
    floodPostedMs: number;
    drainMs: number;
    errors: number;
  };
  clientSchemas?: ClientSchemasResult;
  mcp?: McpResult;
  openaiCompat?: OpenAiCompatResult;
  rowFilter?: RowFilterResult;
  changeFeed?: ChangeFeedResult;
  goals: Goal[];
  notes: string[];
}

const ms = (value: number) =>
  Number.isFinite(value) ? (value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0)) : 'n/a';
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;

function clipQuery(query: string): string {
  const flat = query.replace(/\s+/g, ' ').trim();
  return (flat.length > 90 ? flat.slice(0, 87) + '...' : flat).replace(/\|/g, '\\|').replace(/`/g, "'");
}

export function throughput(run: LoadResult): number {
  return run.requests / (run.wallMs / 1000);
}

function renderFairness(f: BenchReport['fairness']): string[] {
  const during = [...f.during].sort((a, b) => a - b);
  const idle = percentile(f.idle, 50);
  return [
    '## Fairness of durable chats across keys',
    '',
    `One key floods the queue with ${f.flood} chats (posted by 16 concurrent clients in ${(f.floodPostedMs / 1000).toFixed(1)} s),`,
    `then another key runs ${f.turns} turns one after the other, as it did before alone. Each model call answers after`,
    `${f.modelDelayMs[0]} to ${f.modelDelayMs[1]} ms (seeded draws; a turn is two calls around \`query_records\`); the worker`,
    'runs 4 chats at a time, and the per-key cap on chats in flight is raised above the flood for this run. Time per',
    'turn is from the POST to the chat reaching `waiting` (polled every 20 ms). The other key waits for the next free',
    "slot, never behind the flood: with one fixed model delay the flood's chats would end in lockstep and that wait",
    'could reach a whole turn (about 2x).',
    '',
    '| the other key | turns | p50 ms | max ms | p50 / idle p50 | max / idle p50 |',
    '|---|---|---|---|---|---|',
    `| alone | ${f.idle.length} | ${ms(idle)} | ${ms(f.idle.at(-1) ?? NaN)} | 1.00 | ${((f.idle.at(-1) ?? NaN) / idle).toFixed(2)} |`,
    `| during the flood | ${during.length} | ${ms(percentile(during, 50))} | ${ms(during.at(-1) ?? NaN)} | ` +
      `${(percentile(during, 50) / idle).toFixed(2)} | ${((during.at(-1) ?? NaN) / idle).toFixed(2)} |`,
    '',
    `The flooding key's chats still pending or running when the other key's turns started: ${f.backlog.slice(0, -1).join(', ')};`,
    `after its last turn: ${f.backlog.at(-1)}. The flood drained ${(f.drainMs / 1000).toFixed(1)} s after its first POST. Errors: ${f.errors}.`,
  ];
}

export function renderReport(r: BenchReport): string {
  const lines: string[] = [];
  const metCount = r.goals.filter((g) => g.met).length;
  lines.push(
    '# Benchmarks',
    '',
    `Generated by \`${r.command}\` (bench/run.ts); the next run overwrites this file. Not part of \`npm test\`.`,
    '',
    `- Date: ${r.date}`,
    `- Machine: ${r.machine.cores} cores (${r.machine.cpuModel}), ${(r.machine.totalMemoryBytes / 1024 ** 3).toFixed(1)} GiB memory, ` +
      `${r.machine.platform}, Node ${r.machine.node}, PostgreSQL ${r.machine.postgres} (embedded, same machine)`,
    `- Whole run: ${r.totalSeconds.toFixed(0)} s`,
    '',
    `## Goals: ${metCount} of ${r.goals.length} met`,
    '',
    'Targets for a 2-core machine; every figure is from the run above.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...r.goals.map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '## Set-up',
    '',
    '- `bench/run.ts` starts everything itself and removes it afterwards: an embedded PostgreSQL in a temporary',
    '  folder on a free port (with `pg_stat_statements` preloaded, to count statements), the mock OpenAI-compatible',
    '  model server of `test/support/mock-llm.server.ts`, and the application in a child process (`bench/server.ts`:',
    '  `loadConfig` + `createApp`, `SEED=true`, `LOG_LEVEL=info` with the JSON logs written to a file, listening on',
    '  127.0.0.1 on a random port) on an empty database.',
    '- The load generator (keep-alive HTTP, fixed request counts, 1 or 8 requests in flight) and the mock model run',
    '  in the parent process; all traffic stays on 127.0.0.1. Every scenario gets a warm-up that is not counted.',
    '- Data requests use a member API key on the sample CRM (200 accounts, 1,000 contacts, 2,000 deals, activities).',
    '- Latency is per request, from the first byte sent to the last byte received; req/s = requests / wall time.',
    '',
    '## HTTP latency and throughput',
    '',
    '| scenario | request | in flight | requests | errors | p50 ms | p95 ms | p99 ms | max ms | req/s |',
    '|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const s of r.scenarios) {
    for (const run of s.runs) {
      const l = run.latencies;
      lines.push(
        `| ${s.name} | ${s.description} | ${run.concurrency} | ${run.requests} | ${run.errors} | ${ms(percentile(l, 50))} | ` +
          `${ms(percentile(l, 95))} | ${ms(percentile(l, 99))} | ${ms(l[l.length - 1])} | ${throughput(run).toFixed(0)} |`,
      );
    }
  }
  const t = r.startup;
  lines.push(
    '',
    'The chat scenario is one whole agent turn of `data_chat` (non-streaming): model call → `query_records` on the',
    'deals → model call → answer. The mock model answers at once, so the figure is our overhead (request checks,',
    'agent load, system prompt, two OpenAI SDK round trips over loopback, one data tool in a READ ONLY transaction)',
    'with no model time in it.',
    '',
    '## Database work per request',
    '',
    'From `pg_stat_statements` over each concurrency-1 run (statements include BEGIN/COMMIT/SET; each is one round',
    'trip). "DB ms" is execution time inside PostgreSQL; the rest of the p50 above is Node, the network stack and the',
    'wire protocol.',
    '',
    '| scenario | statements / request | DB ms / request | most frequent statements (calls / request, mean ms) |',
    '|---|---|---|---|',
    ...r.scenarios
      .filter((s) => s.database)
      .map((s) => {
        const d = s.database!;
        const top = d.top
          // Background work (the chat worker's polling) shows up with a tiny per-request share: left out.
          .filter((st) => st.perRequest >= 0.05)
          .slice(0, 6)
          .map((st) => `${st.perRequest.toFixed(1)}× \`${clipQuery(st.query)}\` (${st.meanMs.toFixed(2)})`)
          .join('<br>');
        return `| ${s.name} | ${d.statementsPerRequest.toFixed(1)} | ${d.dbMsPerRequest.toFixed(2)} | ${top} |`;
      }),
    '',
    '## Start-up (empty database)',
    '',
    '| phase | ms |',
    '|---|---|',
    `| embedded PostgreSQL: initdb + first start (parent, before the app) | ${ms(r.postgresStartMs)} |`,
    `| node process start → application code loaded | ${ms(t.importMs)} |`,
    `| createApp: Nest modules, DI, MikroORM connect, OpenAPI document | ${ms(t.createMs)} |`,
    `| migrations on the empty database | ${ms(t.migrationsMs)} |`,
    `| seeding: admin key, 4 sample objects with their records, data_chat agent | ${ms(t.seedMs)} |`,
    `| createApp → listening, seeding excluded | ${ms(t.initToListenMs - t.seedMs)} |`,
    `| createApp → listening, all included | ${ms(t.initToListenMs)} |`,
    `| node process start → listening | ${ms(t.processToListenMs)} |`,
  );
  if (r.shutdownMs !== undefined) lines.push(`| graceful close (app.close) at the end | ${ms(r.shutdownMs)} |`);
  lines.push(
    '',
    '## Memory of the application process',
    '',
    'RSS is what the operating system sees; it includes JS heap that V8 has reserved (heap total) but that is not',
    'live, plus code, native memory and buffers. V8 grows its heap under allocation churn and gives it back lazily,',
    'so RSS after a burst says little about leaks; "live heap" (heap used right after a forced full GC) does.',
    '',
    '| when | RSS | JS heap used | JS heap total | live heap after GC | external |',
    '|---|---|---|---|---|---|',
    ...r.memory.map(
      (m) => `| ${m.label} | ${mb(m.rss)} | ${mb(m.heapUsed)} | ${mb(m.heapTotal)} | ${mb(m.liveHeap)} | ${mb(m.external)} |`,
    ),
    '',
    '## Durable chats',
    '',
    `${r.durable.chats} chats created by ${r.durable.creators} concurrent clients against one replica (chat worker concurrency 4),`,
    'each a whole turn through the worker: claim, model call, `query_records` in a READ ONLY transaction, model call,',
    'every step persisted under the row lock, NOTIFY events. Time per chat is from the POST to the chat reaching',
    '`waiting` (status polled every 20 ms), so it includes the time queued behind other chats.',
    '',
    '| chats | errors | answered | messages | wall s | chats/s | p50 ms | p95 ms | max ms |',
    '|---|---|---|---|---|---|---|---|---|',
    `| ${r.durable.chats} | ${r.durable.errors} | ${r.durable.completed} | ${r.durable.messages} | ${(r.durable.wallMs / 1000).toFixed(1)} | ` +
      `${(r.durable.chats / (r.durable.wallMs / 1000)).toFixed(1)} | ${ms(percentile(r.durable.durations, 50))} | ` +
      `${ms(percentile(r.durable.durations, 95))} | ${ms(r.durable.durations.at(-1) ?? NaN)} |`,
    '',
    ...renderFairness(r.fairness),
    '',
    `## Data engine at ${r.scale.rows.toLocaleString('en-US')} rows`,
    '',
    `An object defined through \`POST /api/v1/objects\` (typed columns, \`category\` indexed), filled with`,
    `${r.scale.rows.toLocaleString('en-US')} rows by one \`insert ... select ... from generate_series\` into its table`,
    `(${ms(r.scale.insertMs)} ms), then \`analyze\` (${ms(r.scale.analyzeMs)} ms). Each query below is a real API`,
    'request, one at a time, after 3 warm-up requests; results are checked against the same query in SQL.',
    '',
    '| query | request | runs | p50 ms | p95 ms | max ms |',
    '|---|---|---|---|---|---|',
    ...r.scale.steps.map(
      (s) =>
        `| ${s.name} | ${s.description} | ${s.durations.length} | ${ms(percentile(s.durations, 50))} | ${ms(percentile(s.durations, 95))} | ${ms(s.durations[s.durations.length - 1])} |`,
    ),
  );
  if (r.clientSchemas) lines.push('', ...renderClientSchemas(r.clientSchemas, { command: r.command, date: r.date }));
  if (r.mcp) lines.push('', ...renderMcp(r.mcp, { command: r.command, date: r.date }));
  if (r.openaiCompat) lines.push('', ...renderOpenAiCompat(r.openaiCompat, { command: r.command, date: r.date }));
  if (r.rowFilter) lines.push('', ...renderRowFilter(r.rowFilter, { command: r.command, date: r.date }));
  if (r.changeFeed) lines.push('', ...renderChangeFeed(r.changeFeed, { command: r.command, date: r.date }));
  if (r.notes.length) lines.push('', '## Notes from this run', '', ...r.notes.map((n) => `- ${n}`));
  lines.push('');
  return lines.join('\n');
}

/**
 * Growth over the second half of the run alone: a leak grows at the same pace all along, while a
 * high-water mark (V8 sizing its heap to the allocation rate, the allocator keeping freed pages) levels off.
 */
function secondHalf(c: ClientSchemasResult): string[] {
  const middle = c.memoryCycles.findIndex((n) => n >= c.cycles / 2);
  if (middle <= 0 || middle === c.memory.length - 1) return [];
  const from = c.memory[middle];
  const to = c.memory[c.memory.length - 1];
  const growth = (key: 'rssAfterGc' | 'liveHeap') => `${((to[key] - from[key]) / 1024 / 1024).toFixed(1)} MB`;
  return [
    `Over the second half alone (cycles ${c.memoryCycles[middle]} to ${c.cycles}): RSS after a full GC ${growth('rssAfterGc')}, ` +
      `live heap ${growth('liveHeap')}.`,
    '',
  ];
}

/** The growth goals of the client-schema run: RSS and live heap, last reading minus first. */
export function clientSchemaGoals(c: ClientSchemasResult): Goal[] {
  const first = c.memory[0];
  const last = c.memory[c.memory.length - 1];
  const limit = `< ${(c.limitBytes / 1024 / 1024).toFixed(0)} MB`;
  return (['rssAfterGc', 'liveHeap'] as const).map((key) => {
    const growth = last[key] - first[key];
    return {
      name: `${key === 'rssAfterGc' ? 'RSS' : 'live JS heap'} (after a full GC) growth over ${c.cycles} chats with ${c.toolsPerChat} client tools each, created and deleted`,
      target: limit,
      measured: `${(growth / 1024 / 1024).toFixed(1)} MB`,
      met: growth < c.limitBytes,
    };
  });
}

export const CLIENT_SCHEMAS_START = '<!-- client-tool-schemas: start (written by npm run bench and npm run bench:schemas) -->';
export const CLIENT_SCHEMAS_END = '<!-- client-tool-schemas: end -->';

/** The section of BENCHMARKS.md on client tool schemas, between markers so that `npm run bench:schemas` can replace it alone. */
export function renderClientSchemas(c: ClientSchemasResult, run: { command: string; date: string; machine?: string }): string[] {
  const goals = clientSchemaGoals(c);
  const row = (label: string, sorted: number[]) =>
    `| ${label} | ${ms(percentile(sorted, 50))} | ${ms(percentile(sorted, 95))} | ${ms(sorted[sorted.length - 1])} |`;
  return [
    CLIENT_SCHEMAS_START,
    '',
    `## Client tool schemas: ${c.cycles} durable chats with ${c.toolsPerChat} dynamic tools each`,
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- One cycle: \`POST /api/v1/chats\` with ${c.toolsPerChat} dynamic tools (${(c.bodyBytes / 1024).toFixed(0)} KB of JSON; each schema has`,
    '  nested properties, an array of objects, anyOf, a local `$ref`; a quarter of them an `$id`, another quarter 40',
    '  patternProperties; every cycle new ids and new patterns), the worker answers it with one mock model call that',
    `  carries the ${c.toolsPerChat} tools, then \`DELETE /api/v1/chats/:id\`. One cycle at a time, after ${c.warmupCycles} warm-up cycles.`,
    '- The schemas are only checked against the JSON Schema meta-schema and stored with their chat; nothing is compiled',
    '  or cached per schema. Memory is read from the app process (forked with `--expose-gc`) right after the warm-up,',
    '  every 50 cycles and after the last one; the goals compare the last reading with the first, RSS and live heap',
    '  both taken right after a forced full GC. The warm-up covers V8 sizing a cold heap to this allocation rate (a',
    '  high-water mark reached in about 50 cycles, flat afterwards); the readings every 50 cycles tell a high-water',
    '  mark from a leak, which would grow with every cycle.',
    '',
    `| goal | target | measured | status |`,
    '|---|---|---|---|',
    ...goals.map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| when | RSS | RSS after a full GC | JS heap used | JS heap total | live heap after GC | external |',
    '|---|---|---|---|---|---|---|',
    ...c.memory.map(
      (m) =>
        `| ${m.label} | ${mb(m.rss)} | ${mb(m.rssAfterGc)} | ${mb(m.heapUsed)} | ${mb(m.heapTotal)} | ${mb(m.liveHeap)} | ${mb(m.external)} |`,
    ),
    '',
    ...secondHalf(c),
    `| step (${c.cycles} cycles, ${(c.wallMs / 1000).toFixed(1)} s in all) | p50 ms | p95 ms | max ms |`,
    '|---|---|---|---|',
    row('create: POST /chats with the tools (201)', c.createMs),
    row('create → answered (status waiting, polled every 5 ms)', c.answeredMs),
    row('delete: DELETE /chats/:id (204)', c.deleteMs),
    '',
    CLIENT_SCHEMAS_END,
  ];
}
