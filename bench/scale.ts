/**
 * `npm run bench:scale`: durable chats at scale on one replica with the default configuration.
 *
 * - latency-bound: 1,000 chats × 2 turns, the model answering each call after 500 ms;
 * - CPU-bound: 5,000 chats × 10 turns, the model answering at once;
 * - the floor of the CPU-bound run: a bare loop with `pg` doing the same model calls and the same
 *   inserts at the same concurrency, in this process, against the same PostgreSQL and model server;
 * - the model client alone: the CPU time of one streamed call through the `openai` SDK, replaying request
 *   bodies the app sent in the CPU-bound run, in a process of its own (bench/sdk-floor.ts).
 *
 * Each turn is one tool round and an answer (model → query_records → model). Every chat is created
 * and followed by a client of its own that holds the chat's SSE stream open for all its turns and
 * sends the next message when the turn's answer arrives. Chats are spread over API keys, 20 per key,
 * so that each key stays under the default caps (32 chats in flight, 20 streams per key).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { Pool } from 'pg';
import { MockReply, type DynamicStep } from '../test/support/mock-llm.server';
import { DbStats, helperThreadsCpuMs, log, processCpuMs, SCALE_END, SCALE_START } from './harness';
import { HttpClient, percentile } from './load';
import type { Goal } from './results';
import { measureSdkFloor, type SdkFloor } from './sdk-floor';
import { runSection, type SectionContext } from './section';

const CHATS_PER_KEY = 20;
/** Streamed calls the SDK floor makes (after its warm-up). */
const SDK_FLOOR_CALLS = 5_000;
/** The goal of the CPU-bound run: the app's CPU time per turn. */
const CPU_PER_TURN_GOAL_MS = 2.5;
/** A turn's messages: the user's, the assistant's tool call, the tool's result, the answer. */
const MESSAGES_PER_TURN = 4;
const TURN_TIMEOUT_MS = 300_000;
/** How often /metrics is read during a run. */
const SAMPLE_MS = 250;

interface Scenario {
  name: string;
  chats: number;
  turns: number;
  modelDelayMs: number;
}

/** BENCH_SCALE_FACTOR (e.g. 0.1) shrinks the chat counts for a quick try; BENCHMARKS.md figures use 1. */
const FACTOR = Number(process.env.BENCH_SCALE_FACTOR ?? 1);
const LATENCY: Scenario = { name: 'latency-bound', chats: Math.round(1_000 * FACTOR), turns: 2, modelDelayMs: 500 };
const CPU: Scenario = { name: 'CPU-bound', chats: Math.round(5_000 * FACTOR), turns: 10, modelDelayMs: 0 };

interface Sampled {
  chatsInFlight: number;
  modelCallsInFlight: number;
  modelCallsQueued: number;
  ormPoolWaiting: number;
  readerPoolInUse: number;
}

interface StatementRow {
  query: string;
  calls: number;
  totalMs: number;
}

interface RunResult extends Scenario {
  wallMs: number;
  turnMs: number[];
  failures: number;
  failureSample?: string;
  peakRssBytes: number;
  max: Sampled;
  claimLagMeanMs: number;
  statements: StatementRow[];
  /** Live heap (after a forced GC) with the chats waiting on the model, less the idle heap, per chat in flight. */
  heapPerChat?: { bytes: number; chats: number };
  /** CPU time (user + system) of the app's process and of this benchmark's (its clients and the mock model) over the run. */
  cpuMs: { app: number; bench: number };
  /** Of the app's CPU time, what V8's helper threads used (concurrent and parallel garbage collection). */
  gcThreadsCpuMs: number;
  /** A sample of the model request bodies the app sent. */
  bodies: Array<Record<string, unknown>>;
}

interface FloorResult {
  chats: number;
  turns: number;
  wallMs: number;
  turnMs: number[];
  statements: number;
}

export interface ScaleResult {
  latency: RunResult;
  cpu: RunResult;
  floor: FloorResult;
  /** One streamed model call through the `openai` SDK alone, with the CPU-bound run's request bodies. */
  sdk: SdkFloor;
}

/** Request bodies of a run kept for the SDK floor: evenly spread over the run's model calls, short and long histories alike. */
const MAX_SAMPLES = 400;

/**
 * The model: calls query_records once per turn, then answers; each call after `delayMs`. Keeps one request
 * body in `sampleEvery` in `samples` (at most MAX_SAMPLES).
 */
function oneToolRound(delayMs: number, samples: Array<Record<string, unknown>> = [], sampleEvery = 1): DynamicStep {
  let seen = 0;
  return (req) => {
    if (seen++ % sampleEvery === 0 && samples.length < MAX_SAMPLES && req.body) samples.push(req.body);
    return ((req.body?.messages ?? []) as Array<{ role?: string }>).at(-1)?.role === 'tool'
      ? MockReply.text('The largest won deals are listed above.', { delayMs })
      : MockReply.toolCall(
          'query_records',
          { objectName: 'deal', where: { stage: 'won' }, fields: ['name', 'amount'], limit: 5 },
          { delayMs },
        );
  };
}

/** Member keys, one per `CHATS_PER_KEY` chats. */
async function makeKeys(admin: HttpClient, count: number, label: string): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; i < count; i++) {
    const { secret } = await admin.json<{ secret: string }>(
      { method: 'POST', path: '/api/v1/api-keys', body: { name: `${label} ${i}`, role: 'member' } },
      201,
    );
    keys.push(secret);
  }
  return keys;
}

/** The numbers of one /metrics scrape this benchmark watches. */
async function scrape(client: HttpClient): Promise<Sampled & { claimLagSum: number; claimLagCount: number }> {
  const { body } = await client.send({ method: 'GET', path: '/metrics' });
  const value = (name: string) => {
    const line = body.split('\n').find((l) => l.startsWith(name + ' ') || l.startsWith(name + '{'));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };
  const labelled = (name: string, labels: string) => {
    const line = body.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };
  return {
    chatsInFlight: value('datacopilot_chat_worker_chats_in_flight'),
    modelCallsInFlight: value('datacopilot_llm_calls_in_flight'),
    modelCallsQueued: value('datacopilot_llm_calls_queued'),
    ormPoolWaiting: labelled('datacopilot_pg_pool_connections', 'pool="orm",state="waiting"'),
    readerPoolInUse: labelled('datacopilot_pg_pool_connections', 'pool="reader",state="in_use"'),
    claimLagSum: value('datacopilot_chat_claim_lag_seconds_sum'),
    claimLagCount: value('datacopilot_chat_claim_lag_seconds_count'),
  };
}

/**
 * One chat's client: creates the chat, follows it on its SSE stream and sends each next message as
 * soon as the previous turn's answer has arrived. Returns each turn's time from the POST to the answer.
 */
function followChat(port: number, agent: Agent, posts: HttpClient, key: string, turns: number): Promise<number[]> {
  const auth = { authorization: `Bearer ${key}` };
  return new Promise((resolve, reject) => {
    const times: number[] = [];
    let messages = 0;
    let turnStarted = performance.now();
    let settled = false;
    let stream: ReturnType<typeof request> | undefined;
    const timer = setTimeout(
      () => fail(new Error(`turn ${times.length + 1} not answered within ${TURN_TIMEOUT_MS} ms`)),
      TURN_TIMEOUT_MS,
    );
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stream?.destroy();
      reject(error);
    };
    const onMessage = (chatId: string) => {
      messages++;
      if (messages < MESSAGES_PER_TURN * (times.length + 1)) return;
      times.push(performance.now() - turnStarted);
      // The limit is per turn.
      timer.refresh();
      if (times.length === turns) {
        settled = true;
        clearTimeout(timer);
        stream?.destroy();
        resolve(times);
        return;
      }
      turnStarted = performance.now();
      posts
        .json(
          { method: 'POST', path: `/api/v1/chats/${chatId}/messages`, headers: auth, body: { message: 'And the lost ones?' } },
          202,
        )
        .catch(fail);
    };
    posts
      .json<{ id: string }>(
        { method: 'POST', path: '/api/v1/chats', headers: auth, body: { agent: 'data_chat', message: 'Largest won deals?' } },
        201,
      )
      .then(({ id }) => {
        stream = request(
          { host: '127.0.0.1', port, method: 'GET', path: `/api/v1/chats/${id}/stream`, headers: auth, agent },
          (res) => {
            if (res.statusCode !== 200) return fail(new Error(`stream answered ${res.statusCode}`));
            res.setEncoding('utf8');
            let buffer = '';
            res.on('data', (chunk: string) => {
              buffer += chunk;
              let end: number;
              while ((end = buffer.indexOf('\n\n')) >= 0) {
                const block = buffer.slice(0, end);
                buffer = buffer.slice(end + 2);
                const event = /^event: (.*)$/m.exec(block)?.[1];
                if (event === 'message') onMessage(id);
                else if (event === 'status' && block.includes('"error"')) fail(new Error(`chat ended in error: ${block}`));
              }
            });
            res.on('error', (error) => fail(error));
          },
        );
        stream.on('error', (error) => fail(error));
        stream.end();
      })
      .catch(fail);
  });
}

async function runScenario(context: SectionContext, scenario: Scenario, measureHeap: boolean): Promise<RunResult> {
  const { admin, app, port, llm, db } = context;
  const keys = await makeKeys(admin, Math.ceil(scenario.chats / CHATS_PER_KEY), scenario.name);
  llm.reset();
  const bodies: Array<Record<string, unknown>> = [];
  const modelCalls = scenario.chats * scenario.turns * 2;
  llm.always(oneToolRound(scenario.modelDelayMs, bodies, Math.max(1, Math.floor(modelCalls / MAX_SAMPLES))));
  const pid = app.pid!;
  // Linux: writing 5 resets the process's peak resident set (VmHWM), so the peak is this run's.
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
  const idleHeap = measureHeap ? (await app.memory('idle')).liveHeap : 0;
  await db?.reset();
  const metricsClient = new HttpClient(port, {}, 2);
  const before = await scrape(metricsClient);
  const max: Sampled = { chatsInFlight: 0, modelCallsInFlight: 0, modelCallsQueued: 0, ormPoolWaiting: 0, readerPoolInUse: 0 };
  let heapPerChat: RunResult['heapPerChat'];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const now = await scrape(metricsClient).catch(() => undefined);
      if (now) {
        for (const k of Object.keys(max) as Array<keyof Sampled>) max[k] = Math.max(max[k], now[k]);
        // Once nearly every chat runs (each waiting on the model), the live heap shows what they hold.
        if (measureHeap && !heapPerChat && now.chatsInFlight >= scenario.chats * 0.9) {
          const heap = (await app.memory('busy')).liveHeap;
          heapPerChat = { bytes: (heap - idleHeap) / now.chatsInFlight, chats: now.chatsInFlight };
        }
      }
      await new Promise((r) => setTimeout(r, SAMPLE_MS));
    }
  })();
  const streamAgent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const posts = new HttpClient(port, {}, 256);
  const turnMs: number[] = [];
  let failures = 0;
  let failureSample: string | undefined;
  log(`${scenario.name}: ${scenario.chats} chats × ${scenario.turns} turns, model ${scenario.modelDelayMs} ms per call`);
  const started = performance.now();
  const appCpuBefore = processCpuMs(pid);
  const gcCpuBefore = helperThreadsCpuMs(pid);
  const benchCpuBefore = process.cpuUsage();
  await Promise.all(
    Array.from({ length: scenario.chats }, (_, i) =>
      followChat(port, streamAgent, posts, keys[Math.floor(i / CHATS_PER_KEY)], scenario.turns).then(
        (times) => turnMs.push(...times),
        (error: Error) => {
          failures++;
          failureSample ??= error.message;
        },
      ),
    ),
  );
  const wallMs = performance.now() - started;
  const benchCpu = process.cpuUsage(benchCpuBefore);
  const cpuMs = { app: processCpuMs(pid) - appCpuBefore, bench: (benchCpu.user + benchCpu.system) / 1000 };
  const gcThreadsCpuMs = helperThreadsCpuMs(pid) - gcCpuBefore;
  sampling = false;
  await sampler;
  const after = await scrape(metricsClient);
  const statements = (await db?.read()) ?? [];
  const peakRssBytes = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
  streamAgent.destroy();
  posts.close();
  metricsClient.close();
  const lagCount = after.claimLagCount - before.claimLagCount;
  log(`${scenario.name}: ${wallMs.toFixed(0)} ms, ${failures} failures${failureSample ? ` (${failureSample})` : ''}`);
  return {
    ...scenario,
    wallMs,
    turnMs: turnMs.sort((a, b) => a - b),
    failures,
    failureSample,
    peakRssBytes,
    max,
    claimLagMeanMs: lagCount ? ((after.claimLagSum - before.claimLagSum) / lagCount) * 1000 : 0,
    statements,
    heapPerChat,
    cpuMs,
    gcThreadsCpuMs,
    bodies,
  };
}

/** A streamed chat completion read to its end, as the app's client reads it. */
function modelCall(agent: Agent, url: URL, messages: unknown[]): Promise<void> {
  const payload = JSON.stringify({ model: 'mock-model', stream: true, messages, tools: FLOOR_TOOLS });
  return new Promise((resolve, reject) => {
    const r = request(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: `${url.pathname}/chat/completions`,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        agent,
      },
      (res) => {
        res.on('data', () => undefined);
        res.on('end', resolve);
        res.on('error', reject);
      },
    );
    r.on('error', reject);
    r.end(payload);
  });
}

const FLOOR_TOOLS = [
  {
    type: 'function',
    function: { name: 'query_records', description: 'Query records', parameters: { type: 'object', properties: {} } },
  },
];

/**
 * The floor: the same turns without the app. Per chat one `chats` row; per turn the user's message
 * inserted, a model call, the assistant's tool call and the tool's result inserted, a model call,
 * the answer inserted: 4 inserts and 2 streamed model calls, at the same concurrency, on a pool of
 * the ORM's size (20).
 */
async function runFloor(databaseUrl: string, llmUrl: string, chats: number, turns: number, db?: DbStats): Promise<FloorResult> {
  const pool = new Pool({ connectionString: databaseUrl, max: 20 });
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const url = new URL(llmUrl);
  const insert = (chatId: string, role: string, parts: unknown) =>
    pool.query('insert into chat_messages (chat_id, role, parts) values ($1, $2, $3) returning id', [
      chatId,
      role,
      JSON.stringify(parts),
    ]);
  await db?.reset();
  const turnMs: number[] = [];
  log(`floor: ${chats} chats × ${turns} turns`);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: chats }, async (_, i) => {
      const { rows } = await pool.query<{ id: string }>(
        `insert into chats (id, owner, owner_role, agent, status) values (gen_random_uuid(), $1, 'member', 'data_chat', 'waiting') returning id`,
        [`floor-${i}`],
      );
      const chatId = rows[0].id;
      const messages: unknown[] = [];
      for (let t = 0; t < turns; t++) {
        const begin = performance.now();
        const user = { role: 'user', content: 'Largest won deals?' };
        await insert(chatId, 'user', [{ type: 'text', text: user.content }]);
        messages.push(user);
        await modelCall(agent, url, messages);
        const call = { id: `call_${t}`, type: 'function', function: { name: 'query_records', arguments: '{}' } };
        messages.push({ role: 'assistant', content: null, tool_calls: [call] });
        await insert(chatId, 'assistant', [{ type: 'tool-call', toolCallId: call.id, toolName: 'query_records', input: {} }]);
        messages.push({ role: 'tool', tool_call_id: call.id, content: '{"records":[]}' });
        await insert(chatId, 'tool', [{ type: 'tool-result', toolCallId: call.id, toolName: 'query_records', output: {} }]);
        await modelCall(agent, url, messages);
        messages.push({ role: 'assistant', content: 'The largest won deals are listed above.' });
        await insert(chatId, 'assistant', [{ type: 'text', text: 'The largest won deals are listed above.' }]);
        turnMs.push(performance.now() - begin);
      }
    }),
  );
  const wallMs = performance.now() - started;
  const statements = ((await db?.read()) ?? []).reduce((sum, s) => sum + s.calls, 0);
  await pool.end();
  agent.destroy();
  log(`floor: ${wallMs.toFixed(0)} ms`);
  return { chats, turns, wallMs, turnMs: turnMs.sort((a, b) => a - b), statements };
}

/** What a statement is for, from its text (pg_stat_statements normalises the parameters away). */
function statementKind(query: string): string {
  const q = query.replace(/\s+/g, ' ').trim().toLowerCase();
  if (q === 'begin' || q === 'commit' || q === 'rollback' || q.startsWith('begin transaction')) return q.split(' ')[0];
  if (q.startsWith('with claimed as')) return 'claim (with its running events)';
  if (q.startsWith('with created as')) return 'POST, new chat (admission, chat, message, events)';
  if (q.startsWith('with target as')) return 'chat write (messages + row + events)';
  if (q.startsWith('with locked as')) return 'POST: next message (admission, message, status, events)';
  if (q.includes('from "chats"') && q.includes('from chat_messages')) return 'SSE stream: open (the chat, its first messages)';
  if (q.includes('from "chat_messages"') && q.includes('limit')) return 'SSE stream: read new messages';
  if (q.includes('from "chat_messages"')) return 'worker: read the history';
  if (q.includes('pg_advisory_xact_lock')) return 'POST: per-owner admission lock';
  if (q.includes('count(*)') && q.includes('"chats"')) return 'POST: count chats in flight';
  if (q.includes('from "chats"') && q.includes('for update')) return 'lock the chat row';
  if (q.includes('from "chats"')) return 'read the chat';
  if (q.includes('api_keys')) return 'API key';
  if (q.includes('pg_notify')) return 'NOTIFY';
  if (q.includes('"deal"') || q.includes('data_')) return 'tool: data query';
  return q.slice(0, 60);
}

function breakdown(statements: StatementRow[], turns: number): Array<{ kind: string; perTurn: number; totalMs: number }> {
  const byKind = new Map<string, { calls: number; totalMs: number }>();
  for (const s of statements) {
    const kind = byKind.get(statementKind(s.query)) ?? { calls: 0, totalMs: 0 };
    kind.calls += s.calls;
    kind.totalMs += s.totalMs;
    byKind.set(statementKind(s.query), kind);
  }
  return [...byKind.entries()]
    .map(([kind, { calls, totalMs }]) => ({ kind, perTurn: calls / turns, totalMs }))
    .filter((row) => row.perTurn >= 0.01)
    .sort((a, b) => b.perTurn - a.perTurn);
}

const STREAM_KIND = 'SSE stream: read new messages';

function statementsPerTurn(r: RunResult): { all: number; withoutStreams: number } {
  const turns = r.chats * r.turns;
  const rows = breakdown(r.statements, turns);
  const all = rows.reduce((sum, row) => sum + row.perTurn, 0);
  const streams = rows.find((row) => row.kind === STREAM_KIND)?.perTurn ?? 0;
  return { all, withoutStreams: all - streams };
}

const turnsPerSecond = (turns: number, wallMs: number) => turns / (wallMs / 1000);

export function scaleGoals(r: ScaleResult): Goal[] {
  const { latency, cpu, floor } = r;
  const appRate = turnsPerSecond(cpu.chats * cpu.turns, cpu.wallMs);
  const floorRate = turnsPerSecond(floor.chats * floor.turns, floor.wallMs);
  const perTurn = statementsPerTurn(cpu);
  const cpuPerTurn = cpu.cpuMs.app / (cpu.chats * cpu.turns);
  return [
    {
      name: `latency-bound: all ${latency.chats} chats × ${latency.turns} turns answered`,
      target: '0 failures',
      measured: `${latency.failures} failures`,
      met: latency.failures === 0,
    },
    {
      name: 'latency-bound: wall time',
      target: '≤ 6 s (3 × the 2 s floor)',
      measured: `${(latency.wallMs / 1000).toFixed(2)} s`,
      met: latency.wallMs <= 6_000,
    },
    {
      name: 'latency-bound: median turn',
      target: '≤ 1.5 s',
      measured: `${(percentile(latency.turnMs, 50) / 1000).toFixed(2)} s`,
      met: percentile(latency.turnMs, 50) <= 1_500,
    },
    {
      name: `CPU-bound: all ${cpu.chats} chats × ${cpu.turns} turns answered`,
      target: '0 failures',
      measured: `${cpu.failures} failures`,
      met: cpu.failures === 0,
    },
    {
      name: 'CPU-bound: wall time',
      target: '≤ 120 s (≥ 417 turns/s)',
      measured: `${(cpu.wallMs / 1000).toFixed(1)} s (${appRate.toFixed(0)} turns/s)`,
      met: cpu.wallMs <= 120_000,
    },
    {
      name: 'CPU-bound: peak RSS of the app',
      target: '≤ 500 MB',
      measured: `${(cpu.peakRssBytes / 1024 ** 2).toFixed(0)} MB`,
      met: cpu.peakRssBytes <= 500 * 1024 ** 2,
    },
    {
      name: 'CPU-bound: statements per turn (worker and POST; SSE stream reads apart)',
      target: '≤ 8',
      measured: `${perTurn.withoutStreams.toFixed(1)} (${perTurn.all.toFixed(1)} with the streams' reads)`,
      met: perTurn.withoutStreams <= 8,
    },
    {
      name: 'CPU-bound: app CPU time per turn',
      target: `≤ ${CPU_PER_TURN_GOAL_MS} ms`,
      measured: `${cpuPerTurn.toFixed(1)} ms (the model client alone: ${(2 * r.sdk.cpuMsPerCall).toFixed(1)} ms)`,
      met: cpuPerTurn <= CPU_PER_TURN_GOAL_MS,
    },
    {
      name: 'CPU-bound: app turns/s against the floor',
      target: '≥ 50%',
      measured: `${((appRate / floorRate) * 100).toFixed(0)}% (${appRate.toFixed(0)} / ${floorRate.toFixed(0)} turns/s)`,
      met: appRate / floorRate >= 0.5,
    },
  ];
}

export function renderScale(r: ScaleResult, run: { command: string; date: string; machine?: string }): string[] {
  const s = (ms: number) => (ms / 1000).toFixed(2);
  const runRow = (x: RunResult) =>
    `| ${x.name} | ${x.chats} × ${x.turns} | ${x.modelDelayMs} ms | ${x.failures} | ${s(x.wallMs)} s | ` +
    `${turnsPerSecond(x.chats * x.turns, x.wallMs).toFixed(0)} | ${s(percentile(x.turnMs, 50))} | ${s(percentile(x.turnMs, 95))} | ` +
    `${s(percentile(x.turnMs, 99))} | ${(x.peakRssBytes / 1024 ** 2).toFixed(0)} MB | ${x.max.chatsInFlight} | ` +
    `${x.max.modelCallsInFlight} | ${x.max.modelCallsQueued} | ${x.claimLagMeanMs.toFixed(0)} ms |`;
  const cpuTurns = r.cpu.chats * r.cpu.turns;
  return [
    SCALE_START,
    '',
    '## Durable chats at scale (one replica, default configuration)',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    '- Each turn: POST (a new chat, or the next message), the worker claims it, model → `query_records` → model, the',
    '  answer persisted. Each chat has a client of its own that follows it on `GET /api/v1/chats/:id/stream` (SSE, no',
    `  polling) and sends the next message when the answer arrives; ${CHATS_PER_KEY} chats per API key, so every key stays`,
    '  under the default `CHAT_MAX_IN_FLIGHT_PER_KEY` (32) and `SSE_MAX_STREAMS_PER_KEY` (20): nothing is raised.',
    '- The model is the scripted mock (streamed answers), each call after the delay shown. In flight, queued and claim',
    "  lag come from the app's own `/metrics` (`chat_worker_chats_in_flight`, `llm_calls_in_flight`, `llm_calls_queued`,",
    "  `chat_claim_lag_seconds`), read every 250 ms; peak RSS is the process's VmHWM, reset before each run.",
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...scaleGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| run | chats × turns | model | failures | wall | turns/s | turn p50 s | p95 s | p99 s | peak RSS | chats in flight (max) | model calls in flight (max) | queued for a model slot (max) | claim lag (mean) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    runRow(r.latency),
    runRow(r.cpu),
    `| floor (bare \`pg\` loop) | ${r.floor.chats} × ${r.floor.turns} | 0 ms | 0 | ${s(r.floor.wallMs)} s | ` +
      `${turnsPerSecond(r.floor.chats * r.floor.turns, r.floor.wallMs).toFixed(0)} | ${s(percentile(r.floor.turnMs, 50))} | ` +
      `${s(percentile(r.floor.turnMs, 95))} | ${s(percentile(r.floor.turnMs, 99))} | | | | | |`,
    '',
    r.latency.heapPerChat
      ? `- Memory per chat in flight (latency-bound run, ${r.latency.heapPerChat.chats} chats waiting on the model, each with ` +
        `its SSE stream and sockets): ${(r.latency.heapPerChat.bytes / 1024).toFixed(1)} KiB of live heap (after a forced GC, ` +
        'less the idle heap).'
      : '- Memory per chat in flight: not measured (the run never had 90% of its chats in flight at once).',
    ...[r.latency, r.cpu].map(
      (run) =>
        `- CPU time per turn, ${run.name} run: the app ${(run.cpuMs.app / (run.chats * run.turns)).toFixed(1)} ms ` +
        `(${((run.cpuMs.app / run.wallMs) * 100).toFixed(0)}% of one core over the run); this benchmark's process ` +
        `(its ${run.chats} clients and the mock model) ${(run.cpuMs.bench / (run.chats * run.turns)).toFixed(1)} ms.`,
    ),
    `- Of it, V8's helper threads (garbage collection beside the main thread): ${(r.cpu.gcThreadsCpuMs / cpuTurns).toFixed(1)} ms ` +
      `per turn in the CPU-bound run, ${(r.latency.gcThreadsCpuMs / (r.latency.chats * r.latency.turns)).toFixed(1)} ms in the ` +
      'latency-bound one.',
    `- The model client alone: one streamed chat completion through the \`openai\` SDK, sent as the app sends it, with ` +
      `${r.cpu.bodies.length} request bodies the app sent in the CPU-bound run (mean ${(r.sdk.meanBodyBytes / 1024).toFixed(1)} KiB), ` +
      `${r.sdk.calls} calls at 64 at once in a process doing nothing else: ${r.sdk.cpuMsPerCall.toFixed(2)} ms of CPU per call. ` +
      `A turn makes 2 calls: ${(2 * r.sdk.cpuMsPerCall).toFixed(1)} ms, ${((200 * r.sdk.cpuMsPerCall) / CPU_PER_TURN_GOAL_MS).toFixed(0)}% of ` +
      `the ${CPU_PER_TURN_GOAL_MS} ms goal for the whole turn.`,
    `- Statements per turn in the CPU-bound run (pg_stat_statements, ${cpuTurns} turns; the floor made ` +
      `${(r.floor.statements / (r.floor.chats * r.floor.turns)).toFixed(1)} per turn):`,
    '',
    '| statement | per turn | execution time in PostgreSQL, whole run |',
    '|---|---|---|',
    ...breakdown(r.cpu.statements, cpuTurns).map(
      (row) => `| ${row.kind} | ${row.perTurn.toFixed(2)} | ${(row.totalMs / 1000).toFixed(1)} s |`,
    ),
    '',
    SCALE_END,
  ];
}

runSection<ScaleResult>({
  command: 'npm run bench:scale',
  title: 'durable chats at scale',
  seed: true,
  statements: true,
  llm: { keepRequests: false },
  markers: { start: SCALE_START, end: SCALE_END },
  async run(context) {
    const latency = await runScenario(context, LATENCY, true);
    const cpu = await runScenario(context, CPU, false);
    const floor = await runFloor(context.databaseUrl, context.llm.url, CPU.chats, CPU.turns, context.db);
    context.llm.reset();
    context.llm.always(oneToolRound(0));
    const sdk = await measureSdkFloor({ url: context.llm.url, bodies: cpu.bodies, calls: SDK_FLOOR_CALLS, concurrency: 64 });
    log(`model client alone: ${sdk.cpuMsPerCall.toFixed(2)} ms of CPU per streamed call`);
    return { latency, cpu, floor, sdk };
  },
  render: renderScale,
  goals: scaleGoals,
});
