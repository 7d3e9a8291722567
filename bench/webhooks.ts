/**
 * `npm run bench:webhooks`: webhook deliveries under a write load, and what they cost the writes.
 * 8 writer keys (one request in flight each) write into one object: each writer creates a record,
 * updates it four times, creates the next, ... (one create in five). Five webhooks, each made by a key
 * of its own (five integrations), subscribe to creates and updates of that object; they point at five
 * paths of one receiver on 127.0.0.1 in this process, which verifies every request with the Standard
 * Webhooks library (`Webhook.verify`) and notes when it arrived.
 *
 * Runs: "none" (no webhook) and "five" (five webhooks made just before the writes, deleted once every
 * delivery arrived or the wait ran out) take turns, ROUNDS times, each with WRITES writes; then one
 * "five, slow receiver" run of SLOW_WRITES writes whose receiver answers each request 100-300 ms after
 * it arrived. The app runs with the defaults of JOB_CONCURRENCY, WEBHOOK_OWNER_CONCURRENCY and
 * JOB_POLL_INTERVAL_MS (WEBHOOK_ALLOW_PRIVATE=true for the loopback receiver).
 *
 * Latency of a delivery: from the response of the write that made the change (each write sets `qty` to
 * its sequence number, which the delivered record carries) to the arrival of the request at the
 * receiver (before any answer delay); the same from the change's `at` is shown beside it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Webhook } from 'standardwebhooks';
import { log, processCpuMs, sql } from './harness';
import { HttpClient, percentile } from './load';
import type { Goal } from './results';
import type { SectionContext } from './section';

export const WEBHOOKS_START = '<!-- webhooks:start -->';
export const WEBHOOKS_END = '<!-- webhooks:end -->';

const WRITERS = 8;
const HOOKS = 5;
/** One create, then this many updates of that record, per writer. */
const UPDATES_PER_RECORD = 4;
const OBJECT = 'bench_hooks';
const count = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const WRITES = count('BENCH_WEBHOOK_WRITES', 10_000);
const SLOW_WRITES = count('BENCH_WEBHOOK_SLOW_WRITES', 150);
const ROUNDS = count('BENCH_WEBHOOK_ROUNDS', 2);
const WARMUP = 400;
/** The longest wait for the deliveries of a run after its last write, ms. */
const WAIT_MS = count('BENCH_WEBHOOK_WAIT_MS', 360_000);
const SLOW_MIN_MS = 100;
const SLOW_MAX_MS = 300;
/** Statements listed per run, most called first. */
const TOP_STATEMENTS = 8;

type RunName = 'none' | 'five' | 'five, slow receiver';

interface Received {
  hook: number;
  id: string;
  recordId: string;
  cursor: bigint;
  seq: number;
  /** performance.now() and Date.now() when the request arrived. */
  at: number;
  wallAt: number;
  changeAt: number;
}

export interface RunFigures {
  name: RunName;
  round: number;
  writes: number;
  writesPerSecond: number;
  /** Sorted latencies of the writes, ms. */
  writeLatencies: number[];
  writeErrors: number;
  /** Deliveries expected (HOOKS per write) and received (first copies), 0 without webhooks. */
  expected: number;
  received: number;
  /** Received per second, from the first write sent to the last delivery received. */
  deliveriesPerSecond: number;
  /** From the last write answered to the last delivery received, ms. */
  drainMs: number;
  /** Sorted, ms: from the write's response, and from the change's `at`. */
  latencies: number[];
  latenciesFromAt: number[];
  duplicates: number;
  outOfOrder: number;
  badSignatures: number;
  /** Delivery rows by status, and attempts beyond the first, read before the webhooks are deleted. */
  statuses: Record<string, number>;
  retries: number;
  /** From the first write to the end of the wait: SQL statements run (pg_stat_statements), CPU of the app and of this process, ms. */
  statements: number;
  appCpuMs: number;
  benchCpuMs: number;
  /** The statements run most often in the run, with their calls. */
  topStatements: { query: string; calls: number }[];
}

export interface WebhooksResult {
  writes: number;
  slowWrites: number;
  rounds: number;
  runs: RunFigures[];
}

/** One server, one path per webhook, each verified with its webhook's secret. */
class Receiver {
  private server?: http.Server;
  private verifiers = new Map<string, { hook: number; webhook: Webhook }>();
  received: Received[] = [];
  seen = new Set<string>();
  duplicates = 0;
  badSignatures = 0;
  delay = false;

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => this.handle(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
  }

  url(path: string): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}${path}`;
  }

  trust(path: string, hook: number, secret: string): void {
    this.verifiers.set(path, { hook, webhook: new Webhook(secret) });
  }

  reset(): void {
    this.verifiers.clear();
    this.received = [];
    this.seen.clear();
    this.duplicates = 0;
    this.badSignatures = 0;
  }

  private handle(req: http.IncomingMessage, body: string, res: http.ServerResponse): void {
    const at = performance.now();
    const wallAt = Date.now();
    const verifier = this.verifiers.get(req.url ?? '');
    const headers = {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    };
    let event: { timestamp: string; data: { cursor: string; id: string; record?: { qty?: number } } };
    try {
      if (!verifier) throw new Error(`no webhook at ${req.url}`);
      event = verifier.webhook.verify(body, headers) as typeof event;
    } catch (error) {
      if (this.badSignatures++ < 3) log(`receiver: ${(error as Error).message}`);
      res.writeHead(401).end();
      return;
    }
    if (this.seen.has(headers['webhook-id'])) this.duplicates++;
    else {
      this.seen.add(headers['webhook-id']);
      this.received.push({
        hook: verifier.hook,
        id: headers['webhook-id'],
        recordId: event.data.id,
        cursor: BigInt(event.data.cursor),
        seq: Number(event.data.record?.qty),
        at,
        wallAt,
        changeAt: Date.parse(event.timestamp),
      });
    }
    if (this.delay) setTimeout(() => res.writeHead(204).end(), SLOW_MIN_MS + Math.random() * (SLOW_MAX_MS - SLOW_MIN_MS));
    else res.writeHead(204).end();
  }

  close(): void {
    this.server?.closeAllConnections();
    this.server?.close();
  }
}

/**
 * `total` writes from the writers, one in flight each: a create, then UPDATES_PER_RECORD updates of it,
 * and so on; write i sets qty = i. Returns when each write was answered (performance.now(), by i).
 */
async function writes(writers: HttpClient[], total: number, first: number) {
  const answeredAt = new Array<number>(total);
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    writers.map(async (writer) => {
      let current: string | undefined;
      let n = 0;
      while (next < total) {
        const i = next++;
        const seq = first + i;
        const create = !current || n++ % (UPDATES_PER_RECORD + 1) === 0;
        const sent = performance.now();
        const res = await writer.send(
          create
            ? { method: 'POST', path: `/api/v1/objects/${OBJECT}/records`, body: { title: `row ${seq}`, qty: seq } }
            : { method: 'PATCH', path: `/api/v1/objects/${OBJECT}/records/${current}`, body: { qty: seq } },
        );
        answeredAt[i] = performance.now();
        latencies.push(answeredAt[i] - sent);
        if (res.status !== (create ? 201 : 200)) {
          if (errors++ < 3) log(`write: ${res.status} ${res.body.slice(0, 200)}`);
          if (create) n = 0;
          continue;
        }
        if (create) current = (JSON.parse(res.body) as { id: string }).id;
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return { started, wallMs: performance.now() - started, answeredAt, latencies, errors };
}

export async function webhooksRun(
  context: Pick<SectionContext, 'admin' | 'port' | 'databaseUrl' | 'db' | 'app'>,
): Promise<WebhooksResult> {
  const { admin, port, databaseUrl, db, app } = context;
  const appCpu = () => (app.pid ? processCpuMs(app.pid) : 0);
  const benchCpu = () => {
    const usage = process.cpuUsage();
    return (usage.user + usage.system) / 1000;
  };
  await admin.json(
    {
      method: 'POST',
      path: '/api/v1/objects',
      body: {
        name: OBJECT,
        label: OBJECT,
        fields: [
          { name: 'title', label: 'Title', type: 'text' },
          { name: 'qty', label: 'Quantity', type: 'integer' },
        ],
      },
    },
    201,
  );
  const key = async (name: string) =>
    (await admin.json<{ secret: string }>({ method: 'POST', path: '/api/v1/api-keys', body: { name, role: 'member' } }, 201))
      .secret;
  const writers: HttpClient[] = [];
  for (let w = 0; w < WRITERS; w++)
    writers.push(new HttpClient(port, { authorization: `Bearer ${await key(`bench writer ${w}`)}` }, 1));
  const owners: HttpClient[] = [];
  for (let h = 0; h < HOOKS; h++)
    owners.push(new HttpClient(port, { authorization: `Bearer ${await key(`bench hook owner ${h}`)}` }, 2));
  const receiver = new Receiver();
  await receiver.start();
  let seq = 0;

  const run = async (name: RunName, round: number, total: number): Promise<RunFigures> => {
    receiver.reset();
    receiver.delay = name === 'five, slow receiver';
    const hookIds: string[] = [];
    if (name !== 'none') {
      for (let h = 0; h < HOOKS; h++) {
        const path = `/r${round}/${name === 'five' ? 'fast' : 'slow'}/${h}`;
        const hook = await owners[h].json<{ id: string; secret: string }>(
          {
            method: 'POST',
            path: '/api/v1/webhooks',
            body: { url: receiver.url(path), objects: [OBJECT], events: ['create', 'update'] },
          },
          201,
        );
        receiver.trust(path, h, hook.secret);
        hookIds.push(hook.id);
      }
    }
    const first = seq;
    seq += total;
    await db?.reset();
    const cpuBefore = { app: appCpu(), bench: benchCpu() };
    const w = await writes(writers, total, first);
    const lastAnswer = Math.max(...w.answeredAt.filter((t) => t !== undefined));
    const expected = hookIds.length * (total - w.errors);
    const until = performance.now() + WAIT_MS;
    let lastLog = performance.now();
    while (receiver.received.length < expected && performance.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (performance.now() - lastLog > 10_000) {
        lastLog = performance.now();
        log(`  ${name}: ${receiver.received.length} of ${expected} deliveries`);
      }
    }
    const cpu = { app: appCpu() - cpuBefore.app, bench: benchCpu() - cpuBefore.bench };
    const statements = (await db?.read()) ?? [];
    const received = receiver.received;
    if (received.length < expected) log(`  ${name}: only ${received.length} of ${expected} deliveries within ${WAIT_MS} ms`);
    const statuses: Record<string, number> = {};
    let retries = 0;
    if (hookIds.length) {
      const rows = await sql<{ status: string; n: number; retries: number }>(
        databaseUrl,
        `select status, count(*)::int as n, coalesce(sum(greatest(attempts - 1, 0)), 0)::int as retries ` +
          'from webhook_deliveries where webhook_id::text = any($1) group by status',
        [hookIds],
      );
      for (const r of rows) {
        statuses[r.status] = r.n;
        retries += r.retries;
      }
      for (let h = 0; h < HOOKS; h++) await owners[h].json({ method: 'DELETE', path: `/api/v1/webhooks/${hookIds[h]}` }, 204);
    }
    // Out of order: a delivery of a record (to one webhook) whose cursor is below one already received.
    const last = new Map<string, bigint>();
    let outOfOrder = 0;
    for (const r of received) {
      const k = `${r.hook}:${r.recordId}`;
      const before = last.get(k);
      if (before !== undefined && r.cursor < before) outOfOrder++;
      else last.set(k, r.cursor);
    }
    const latencies = received.map((r) => r.at - w.answeredAt[r.seq - first]).sort((a, b) => a - b);
    const latenciesFromAt = received.map((r) => r.wallAt - r.changeAt).sort((a, b) => a - b);
    const lastReceipt = received.length ? Math.max(...received.map((r) => r.at)) : lastAnswer;
    const figures: RunFigures = {
      name,
      round,
      writes: total,
      writesPerSecond: (total / w.wallMs) * 1000,
      writeLatencies: w.latencies,
      writeErrors: w.errors,
      expected,
      received: received.length,
      deliveriesPerSecond: received.length ? (received.length / (lastReceipt - w.started)) * 1000 : 0,
      drainMs: lastReceipt - lastAnswer,
      latencies,
      latenciesFromAt,
      duplicates: receiver.duplicates,
      outOfOrder,
      badSignatures: receiver.badSignatures,
      statuses,
      retries,
      statements: statements.reduce((n, row) => n + row.calls, 0),
      appCpuMs: cpu.app,
      benchCpuMs: cpu.bench,
      topStatements: statements.slice(0, TOP_STATEMENTS).map(({ query, calls }) => ({ query, calls })),
    };
    log(
      `round ${round + 1}, ${name}: ${figures.writesPerSecond.toFixed(0)} writes/s, p95 ${percentile(w.latencies, 95).toFixed(1)} ms` +
        (expected
          ? `; ${received.length}/${expected} deliveries, ${figures.deliveriesPerSecond.toFixed(0)}/s, ` +
            `p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms`
          : '') +
        `; per write: ${(figures.statements / total).toFixed(1)} statements, app CPU ${(cpu.app / total).toFixed(2)} ms, ` +
        `bench CPU ${(cpu.bench / total).toFixed(2)} ms`,
    );
    for (const row of figures.topStatements) log(`    ${row.calls} x ${row.query.replace(/\s+/g, ' ').slice(0, 160)}`);
    return figures;
  };

  try {
    await writes(writers, WARMUP, seq);
    seq += WARMUP;
    const runs: RunFigures[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      runs.push(await run('none', round, WRITES));
      runs.push(await run('five', round, WRITES));
    }
    runs.push(await run('five, slow receiver', 0, SLOW_WRITES));
    return { writes: WRITES, slowWrites: SLOW_WRITES, rounds: ROUNDS, runs };
  } finally {
    receiver.close();
    for (const client of [...writers, ...owners]) client.close();
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const of = (r: WebhooksResult, name: RunName) => r.runs.filter((run) => run.name === name);
const sum = (runs: RunFigures[], pick: (run: RunFigures) => number) => runs.reduce((total, run) => total + pick(run), 0);

export function webhooksGoals(r: WebhooksResult): Goal[] {
  const none = of(r, 'none');
  const five = of(r, 'five');
  const slow = of(r, 'five, slow receiver');
  const hooked = [...five, ...slow];
  const pct = (value: number) => `${(value * 100).toFixed(0)}%`;
  const offRate = median(none.map((run) => run.writesPerSecond));
  const onRate = median(five.map((run) => run.writesPerSecond));
  const offP95 = median(none.map((run) => percentile(run.writeLatencies, 95)));
  const onP95 = median(five.map((run) => percentile(run.writeLatencies, 95)));
  const received = sum(hooked, (run) => run.received);
  const expected = sum(hooked, (run) => run.expected);
  return [
    {
      name: 'Every delivery received (all runs with webhooks)',
      target: 'all',
      measured: `${received} of ${expected}`,
      met: received === expected,
    },
    {
      name: 'Signature verification failures (`Webhook.verify`)',
      target: '0',
      measured: String(sum(hooked, (run) => run.badSignatures)),
      met: sum(hooked, (run) => run.badSignatures) === 0,
    },
    {
      name: 'Deliveries out of order per record and webhook',
      target: '0',
      measured: String(sum(hooked, (run) => run.outOfOrder)),
      met: sum(hooked, (run) => run.outOfOrder) === 0,
    },
    {
      name: 'Duplicates received (same `webhook-id`), no receiver failing',
      target: '0',
      measured: String(sum(hooked, (run) => run.duplicates)),
      met: sum(hooked, (run) => run.duplicates) === 0,
    },
    {
      name: 'Writes/s with five webhooks against none',
      target: '>= 90%',
      measured: `${pct(onRate / offRate)} (${onRate.toFixed(0)} / ${offRate.toFixed(0)} writes/s)`,
      met: onRate / offRate >= 0.9,
    },
    {
      name: 'Write p95 without webhooks against with five (p95 at most 111% of none)',
      target: '>= 90%',
      measured: `${pct(offP95 / onP95)} (${onP95.toFixed(1)} ms with, ${offP95.toFixed(1)} ms without)`,
      met: offP95 / onP95 >= 0.9,
    },
  ];
}

export function renderWebhooks(r: WebhooksResult, run: { command: string; date: string; machine?: string }): string[] {
  const ms = (values: number[], p: number) => (values.length ? percentile(values, p).toFixed(0) : '-');
  const rows = (statuses: Record<string, number>) =>
    Object.entries(statuses)
      .map(([status, n]) => `${n} ${status}`)
      .join(', ') || '-';
  const ms1 = (values: number[], p: number) => (values.length ? percentile(values, p).toFixed(1) : '-');
  const perWrite = (f: RunFigures) =>
    `${(f.statements / f.writes).toFixed(1)} | ${(f.appCpuMs / f.writes).toFixed(2)} | ${(f.benchCpuMs / f.writes).toFixed(2)}`;
  return [
    WEBHOOKS_START,
    '',
    '## Webhook deliveries under writes',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- ${WRITERS} member keys, one write in flight each, into one object: a create (\`POST /records\`) then ${UPDATES_PER_RECORD}`,
    `  updates of that record (\`PATCH /records/:id\`), and again. "five": five webhooks (creates and updates of the object),`,
    '  each made by a member key of its own, point at five paths of one receiver on 127.0.0.1 in the bench process that',
    '  verifies every request with `standardwebhooks` (`Webhook.verify`) and answers 204; made just before the writes,',
    `  deleted once every delivery arrived (or after ${WAIT_MS / 1000} s). "none": the same writes with no webhook. The two`,
    `  take turns, ${r.rounds} rounds of ${r.writes} writes (${HOOKS * r.writes} deliveries per "five" run); the comparison uses`,
    `  the median of the rounds. "slow receiver": ${r.slowWrites} writes (${HOOKS * r.slowWrites} deliveries), the receiver answering each`,
    `  request ${SLOW_MIN_MS}-${SLOW_MAX_MS} ms after it arrived.`,
    '- A job carries a page of the dispatcher (deliveries of one webhook, sent in order on one kept-alive connection);',
    "  the pages of one webhook run one at a time, so each webhook has one request in flight (the slow receiver's rate",
    '  is about five webhooks / 0.2 s). Statements, app CPU and bench CPU per write: from the first write of the run to',
    '  its last delivery received (or the end of the wait), pg_stat_statements of the app database (the webhooks',
    "  runs' deliveries, dispatches and queue included) and the CPU time of the app process and of the bench process",
    '  (writers, receiver and its `Webhook.verify`).',
    '- Webhook work yields to API requests: while the app answers 200 or more API requests a second (the writes here),',
    '  its dispatcher runs once a second and each round of up to 50 deliveries waits up to a second before it is sent;',
    '  the backlog goes out at full speed once the writes end. This is why the latency below is mostly the length of',
    '  the burst of writes, and why deliveries/s counts from the first write to the last delivery.',
    '- Defaults of the job queue: `JOB_CONCURRENCY` 8, `WEBHOOK_OWNER_CONCURRENCY` 2 (five owners, so the group limit allows 10),',
    '  `JOB_POLL_INTERVAL_MS` 2000; `WEBHOOK_ALLOW_PRIVATE=true`. The bench process (writers and receiver) shares the',
    '  machine with the app and PostgreSQL.',
    '- Latency: from the response of the write that made the change (the commit happened before it; each write sets',
    '  `qty` to its sequence number, carried by the delivered record) to the request arriving at the receiver (before',
    "  the slow receiver's delay). \"from `at`\": from the change's `at` (PostgreSQL's clock, same machine; the write's",
    '  transaction start) to the arrival, ms resolution. Deliveries/s: first copies received, from the first write sent',
    '  to the last delivery received; drain: last write answered to last delivery received.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...webhooksGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| run | round | writes/s | write p50 ms | write p95 ms | write errors | deliveries received | deliveries/s | drain s | latency p50 / p95 / p99 ms | from `at` p50 / p95 / p99 ms | duplicates | out of order | bad signatures | retried attempts | delivery rows at the end | statements / write | app CPU ms / write | bench CPU ms / write |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...r.runs.map((f) =>
      f.expected
        ? `| ${f.name} | ${f.round + 1} | ${f.writesPerSecond.toFixed(0)} | ${ms1(f.writeLatencies, 50)} | ${ms1(f.writeLatencies, 95)} | ` +
          `${f.writeErrors} | ${f.received} / ${f.expected} | ${f.deliveriesPerSecond.toFixed(0)} | ${(f.drainMs / 1000).toFixed(1)} | ` +
          `${ms(f.latencies, 50)} / ${ms(f.latencies, 95)} / ${ms(f.latencies, 99)} | ` +
          `${ms(f.latenciesFromAt, 50)} / ${ms(f.latenciesFromAt, 95)} / ${ms(f.latenciesFromAt, 99)} | ` +
          `${f.duplicates} | ${f.outOfOrder} | ${f.badSignatures} | ${f.retries} | ${rows(f.statuses)} | ${perWrite(f)} |`
        : `| ${f.name} | ${f.round + 1} | ${f.writesPerSecond.toFixed(0)} | ${ms1(f.writeLatencies, 50)} | ${ms1(f.writeLatencies, 95)} | ` +
          `${f.writeErrors} | - | - | - | - | - | - | - | - | - | - | ${perWrite(f)} |`,
    ),
    '',
    WEBHOOKS_END,
  ];
}
