/**
 * The change feed across replicas: a second application process (replica B) on the same database
 * holds a change stream of an object; records are edited one at a time through replica A, and each
 * edit is timed from just before A's PATCH is sent to the moment its `change` event arrives on B
 * (A's write, commit, NOTIFY through Postgres, B's re-read as the caller, the SSE frame).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AppProcess, benchAppEnv, log } from './harness';
import { percentile } from './load';
import type { Goal } from './results';
import type { SectionContext } from './section';
import { onSseFrames } from '../test/support/sse-frames';

export const CHANGE_FEED_START = '<!-- change-feed:start -->';
export const CHANGE_FEED_END = '<!-- change-feed:end -->';

const EDITS = 300;
const RECORDS = 50;
export const CHANGE_FEED_GOAL_MS = 100;

export interface ChangeFeedResult {
  edits: number;
  /** Sorted, milliseconds: PATCH sent on A → change event received on B. */
  visible: number[];
  /** Sorted, milliseconds: A's PATCH response time alone. */
  write: number[];
}

/** A minimal SSE reader: calls `onChange` with each `change` event's data. */
function openStream(port: number, path: string, secret: string, onChange: (data: Record<string, unknown>) => void) {
  return new Promise<http.ClientRequest>((resolve, reject) => {
    const request = http.get(
      { host: '127.0.0.1', port, path, headers: { authorization: `Bearer ${secret}`, accept: 'text/event-stream' } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`change stream: status ${res.statusCode}`));
        onSseFrames(res, (frame) => {
          const lines = frame.split('\n');
          if (!lines.includes('event: change')) return;
          const data = lines.find((l) => l.startsWith('data: '));
          if (data) onChange(JSON.parse(data.slice(6)) as Record<string, unknown>);
        });
        resolve(request);
      },
    );
    request.on('error', reject);
  });
}

export async function changeFeedRun(
  context: Pick<SectionContext, 'admin' | 'member' | 'secret' | 'llm' | 'databaseUrl'>,
): Promise<ChangeFeedResult> {
  const { admin, member, secret, llm, databaseUrl } = context;
  await admin.json(
    {
      method: 'POST',
      path: '/api/v1/objects',
      body: {
        name: 'bench_grid',
        label: 'Bench grid',
        fields: [
          { name: 'title', label: 'Title', type: 'text' },
          { name: 'qty', label: 'Quantity', type: 'integer' },
        ],
      },
    },
    201,
  );
  const created = await member.json<{ results: { id: string }[] }>({
    method: 'POST',
    path: '/api/v1/objects/bench_grid/records/batch',
    body: { operations: Array.from({ length: RECORDS }, (_, i) => ({ op: 'create', record: { title: `row ${i}`, qty: 0 } })) },
  });
  const ids = created.results.map((r) => r.id);

  const dataDir = await mkdtemp(join(tmpdir(), 'data-copilot-bench-replica-'));
  const replica = AppProcess.start(
    benchAppEnv({ databaseUrl, dataDir, adminKey: `bench-b-${randomBytes(16).toString('hex')}`, llmUrl: llm.url, seed: false }),
    join(dataDir, 'app.log'),
  );
  let stream: http.ClientRequest | undefined;
  try {
    const { port: portB } = await replica.ready();
    log(`replica B listening on 127.0.0.1:${portB} (pid ${replica.pid})`);
    const waiting = new Map<number, (at: number) => void>();
    stream = await openStream(portB, '/api/v1/objects/bench_grid/changes/stream', secret, (change) => {
      const qty = (change.record as { qty?: number } | undefined)?.qty;
      if (change.op === 'update' && typeof qty === 'number') waiting.get(qty)?.(performance.now());
    });
    const visible: number[] = [];
    const write: number[] = [];
    // The first edits warm both replicas up (connections, caches, JIT) and are not counted.
    const warmup = 20;
    for (let i = 1; i <= EDITS + warmup; i++) {
      const arrived = new Promise<number>((resolve, reject) => {
        waiting.set(i, resolve);
        setTimeout(() => reject(new Error(`edit ${i} did not reach replica B within 10 s`)), 10_000).unref();
      });
      const started = performance.now();
      await member.json({ method: 'PATCH', path: `/api/v1/objects/bench_grid/records/${ids[i % ids.length]}`, body: { qty: i } });
      const written = performance.now();
      const at = await arrived;
      waiting.delete(i);
      if (i > warmup) {
        visible.push(at - started);
        write.push(written - started);
      }
    }
    visible.sort((a, b) => a - b);
    write.sort((a, b) => a - b);
    log(`change feed: p50 ${percentile(visible, 50).toFixed(1)} ms, p95 ${percentile(visible, 95).toFixed(1)} ms`);
    return { edits: EDITS, visible, write };
  } finally {
    stream?.destroy();
    await replica.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

export function changeFeedGoals(r: ChangeFeedResult): Goal[] {
  const p95 = percentile(r.visible, 95);
  return [
    {
      name: "Change feed: an edit on replica A visible on replica B's stream, p95",
      target: `<= ${CHANGE_FEED_GOAL_MS} ms`,
      measured: `${p95.toFixed(1)} ms`,
      met: p95 <= CHANGE_FEED_GOAL_MS,
    },
  ];
}

export function renderChangeFeed(r: ChangeFeedResult, run: { command: string; date: string; machine?: string }): string[] {
  const ms = (value: number) => value.toFixed(1);
  const row = (name: string, values: number[]) =>
    `| ${name} | ${ms(percentile(values, 50))} | ${ms(percentile(values, 95))} | ${ms(percentile(values, 99))} | ${ms(values[values.length - 1])} |`;
  return [
    CHANGE_FEED_START,
    '',
    '## Change feed: an edit on one replica seen on another',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    '- Two application processes on one database. Replica B holds `GET /api/v1/objects/bench_grid/changes/stream` as a',
    `  member key; ${r.edits} edits (after 20 not counted), one at a time, each a \`PATCH\` of one record through replica A.`,
    '  Each is timed from just before the PATCH is sent to the arrival of its `change` event on B: the write and its',
    "  outbox row (one statement), the commit, Postgres' NOTIFY to B, B's re-read of the feed as the key, the SSE frame.",
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...changeFeedGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| step | p50 ms | p95 ms | p99 ms | max ms |',
    '|---|---|---|---|---|',
    row('PATCH on A → `change` event on B', r.visible),
    row('PATCH on A alone (its response)', r.write),
    '',
    CHANGE_FEED_END,
  ];
}
