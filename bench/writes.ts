/**
 * `npm run bench:writes`: what the change feed costs record writes. 8 clients (8 member keys, one
 * request in flight each) send single creates (`POST /records`):
 *  - feed off: into one object, with the outbox rows dropped by a BEFORE INSERT trigger (no change
 *    stored, no event; everything else about the write is the same);
 *  - feed on, one object: all 8 into one object, a change stream (SSE) following it;
 *  - feed on, 8 objects: each client into an object of its own, a stream following each;
 *  - feed on, one object, beside batches: as "one object", while a ninth key sends batches of
 *    BATCH creates into that object back to back (transactions far longer than a single create).
 * The four runs take turns, ROUNDS times, and each figure is the median round; a stream must have
 * received every event of its run before the next run starts (its lag after the last create is shown).
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { log, sql } from './harness';
import { HttpClient, percentile } from './load';
import type { Goal } from './results';
import type { SectionContext } from './section';
import { onSseFrames } from '../test/support/sse-frames';

export const WRITES_START = '<!-- writes:start -->';
export const WRITES_END = '<!-- writes:end -->';

const CLIENTS = 8;
const CREATES = 1200;
const WARMUP = 200;
const ROUNDS = 5;
const OBJECTS = Array.from({ length: CLIENTS }, (_, i) => `bench_w${i}`);

const BATCH = 500;

type RunName = 'feed off' | 'feed on, one object' | 'feed on, 8 objects' | 'feed on, one object, beside batches';
const RUNS: RunName[] = ['feed off', 'feed on, one object', 'feed on, 8 objects', 'feed on, one object, beside batches'];

interface RunFigures {
  name: RunName;
  /** Creates per second of each round (wall time of the creates alone). */
  perSecond: number[];
  /** Sorted latencies (ms) of every create of every round. */
  latencies: number[];
  /** Per round: ms from the last create's response until every stream had all its events. */
  lagMs: number[];
  errors: number;
}

export interface WritesResult {
  creates: number;
  rounds: number;
  runs: RunFigures[];
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Counts the `change` events of one object's stream. */
async function follow(port: number, object: string, secret: string): Promise<{ count: () => number; close: () => void }> {
  let received = 0;
  const request = await new Promise<http.ClientRequest>((resolve, reject) => {
    const req = http.get(
      {
        host: '127.0.0.1',
        port,
        path: `/api/v1/objects/${object}/changes/stream`,
        headers: { authorization: `Bearer ${secret}`, accept: 'text/event-stream' },
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`change stream: status ${res.statusCode}`));
        onSseFrames(res, (frame) => {
          if (frame.split('\n').includes('event: change')) received++;
        });
        // The stream is live once its headers are in (it reads "from now on" before it opens).
        resolve(req);
      },
    );
    req.on('error', reject);
  });
  return { count: () => received, close: () => request.destroy() };
}

/** `total` creates from the clients, one in flight each; client c writes into objectOf(c). */
export async function creates(clients: HttpClient[], total: number, objectOf: (client: number) => string) {
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    clients.map(async (client, c) => {
      while (next < total) {
        const i = next++;
        const sent = performance.now();
        const res = await client.send({
          method: 'POST',
          path: `/api/v1/objects/${objectOf(c)}/records`,
          body: { title: `row ${i}`, qty: i },
        });
        latencies.push(performance.now() - sent);
        if (res.status !== 201) {
          if (errors++ < 3) log(`create: ${res.status} ${res.body.slice(0, 200)}`);
        }
      }
    }),
  );
  return { wallMs: performance.now() - started, latencies, errors };
}

export async function writesRun(context: Pick<SectionContext, 'admin' | 'port' | 'databaseUrl'>): Promise<WritesResult> {
  const { admin, port, databaseUrl } = context;
  for (const name of OBJECTS) {
    await admin.json(
      {
        method: 'POST',
        path: '/api/v1/objects',
        body: {
          name,
          label: name,
          fields: [
            { name: 'title', label: 'Title', type: 'text' },
            { name: 'qty', label: 'Quantity', type: 'integer' },
          ],
        },
      },
      201,
    );
  }
  const secrets: string[] = [];
  for (let c = 0; c < CLIENTS; c++) {
    const key = await admin.json<{ secret: string }>(
      { method: 'POST', path: '/api/v1/api-keys', body: { name: `bench writer ${c}`, role: 'member' } },
      201,
    );
    secrets.push(key.secret);
  }
  const clients = secrets.map((secret) => new HttpClient(port, { authorization: `Bearer ${secret}` }, 1));
  const batcher = await admin.json<{ secret: string }>(
    { method: 'POST', path: '/api/v1/api-keys', body: { name: 'bench batches', role: 'member' } },
    201,
  );
  const batchClient = new HttpClient(port, { authorization: `Bearer ${batcher.secret}` }, 1);
  const batch = {
    method: 'POST' as const,
    path: `/api/v1/objects/${OBJECTS[0]}/records/batch`,
    body: { operations: Array.from({ length: BATCH }, (_, i) => ({ op: 'create', record: { title: `batch ${i}`, qty: i } })) },
  };
  await sql(databaseUrl, `create function bench_drop_changes() returns trigger language plpgsql as $$ begin return null; end $$`);
  const feed = async (on: boolean) =>
    sql(
      databaseUrl,
      on
        ? 'drop trigger if exists bench_drop_changes on record_changes'
        : 'create trigger bench_drop_changes before insert on record_changes for each row execute function bench_drop_changes()',
    );
  try {
    await creates(clients, WARMUP, (c) => OBJECTS[c]);
    const figures = new Map<RunName, RunFigures>(
      RUNS.map((name) => [name, { name, perSecond: [], latencies: [], lagMs: [], errors: 0 }]),
    );
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of RUNS) {
        const single = name !== 'feed on, 8 objects';
        const followed = name === 'feed off' ? [] : single ? [OBJECTS[0]] : OBJECTS;
        await feed(name !== 'feed off');
        const streams = await Promise.all(followed.map((object) => follow(port, object, secrets[0])));
        try {
          let batching = name === 'feed on, one object, beside batches';
          let batched = 0;
          const batches = (async () => {
            while (batching) {
              const res = await batchClient.send(batch);
              if (res.status !== 200) throw new Error(`batch: ${res.status} ${res.body.slice(0, 200)}`);
              batched += BATCH;
            }
          })();
          const run = await creates(clients, CREATES, (c) => (single ? OBJECTS[0] : OBJECTS[c]));
          batching = false;
          await batches;
          const done = performance.now();
          // Every stream has all its events: one object's creates (and batches), or the 8 objects' together.
          const expected = CREATES + batched;
          const until = Date.now() + 60_000;
          const total = () => streams.reduce((sum, s) => sum + s.count(), 0);
          while (streams.length && total() < expected) {
            if (Date.now() > until) throw new Error(`${name}: streams got ${total()} of ${expected} events`);
            await new Promise((resolve) => setTimeout(resolve, 2));
          }
          const f = figures.get(name)!;
          f.perSecond.push((CREATES / run.wallMs) * 1000);
          f.latencies.push(...run.latencies);
          if (streams.length) f.lagMs.push(performance.now() - done);
          f.errors += run.errors;
          log(`round ${round + 1}, ${name}: ${((CREATES / run.wallMs) * 1000).toFixed(0)} creates/s`);
        } finally {
          for (const s of streams) s.close();
        }
      }
    }
    for (const f of figures.values()) f.latencies.sort((a, b) => a - b);
    return { creates: CREATES, rounds: ROUNDS, runs: [...figures.values()] };
  } finally {
    await feed(true);
    for (const client of clients) client.close();
    batchClient.close();
  }
}

function throughput(r: WritesResult, name: RunName): number {
  return median(r.runs.find((run) => run.name === name)!.perSecond);
}

export function writesGoals(r: WritesResult): Goal[] {
  const off = throughput(r, 'feed off');
  const one = throughput(r, 'feed on, one object');
  const eight = throughput(r, 'feed on, 8 objects');
  const pct = (value: number) => `${(value * 100).toFixed(0)}%`;
  return [
    {
      name: 'Creates at 8 in flight into one object: feed on against feed off',
      target: '>= 80%',
      measured: `${pct(one / off)} (${one.toFixed(0)} / ${off.toFixed(0)} creates/s)`,
      met: one / off >= 0.8,
    },
    {
      name: '8 clients creating in one object against 8 clients creating in 8 objects',
      target: '>= 80%',
      measured: `${pct(one / eight)} (${one.toFixed(0)} / ${eight.toFixed(0)} creates/s)`,
      met: one / eight >= 0.8,
    },
  ];
}

export function renderWrites(r: WritesResult, run: { command: string; date: string; machine?: string }): string[] {
  const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : 'n/a');
  return [
    WRITES_START,
    '',
    '## Record writes with the change feed',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- 8 member keys, one \`POST /api/v1/objects/:name/records\` in flight each, ${r.creates} creates per run; the four`,
    `  runs take turns, ${r.rounds} rounds, each figure the median round (latencies: every create of every round).`,
    '  Feed off: the outbox rows are dropped by a `BEFORE INSERT` trigger on `record_changes` (nothing else about the',
    '  write changes). Feed on: a change stream (SSE) follows each object written, and must have every event before',
    '  the next run; "stream lag" is from the last create answered to the last event received. Beside batches: a',
    `  ninth key sends batches of ${BATCH} creates (\`POST /records/batch\`) into the same object back to back meanwhile.`,
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...writesGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| run | creates/s (median round) | p50 ms | p95 ms | p99 ms | stream lag ms (median) | errors |',
    '|---|---|---|---|---|---|---|',
    ...r.runs.map(
      (f) =>
        `| ${f.name} | ${median(f.perSecond).toFixed(0)} | ${ms(percentile(f.latencies, 50))} | ${ms(percentile(f.latencies, 95))} | ` +
        `${ms(percentile(f.latencies, 99))} | ${f.lagMs.length ? ms(median(f.lagMs)) : '-'} | ${f.errors} |`,
    ),
    '',
    WRITES_END,
  ];
}
