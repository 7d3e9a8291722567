/**
 * The application under test, in a process of its own so that its latency and memory are not
 * mixed with the load generator's. Started by bench/run.ts with `fork()`; configuration comes
 * from the environment exactly as for `npm start` (read by loadConfig), the database is the one
 * the parent created. Reports start-up timings and memory over IPC.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createApp, LISTEN_BACKLOG } from '../src/app.factory';
import { loadConfig } from '../src/config/app-config';
import { MigrationRunner } from '../src/database/migration.runner';
import { SeedService } from '../src/seed/seed.service';

export interface StartupTimings {
  /** Process start → application code loaded (module graph of Nest, MikroORM, ...). */
  importMs: number;
  /** createApp: Nest module graph, DI, MikroORM connect, OpenAPI document. */
  createMs: number;
  /** Committed migrations applied to the empty database (under the start-up advisory lock). */
  migrationsMs: number;
  /** SEED=true start-up data: admin key, sample objects and their records, the data_chat agent. */
  seedMs: number;
  /** createApp start → HTTP server listening (create + init hooks, migrations and seeding included). */
  initToListenMs: number;
  /** Process start → HTTP server listening. */
  processToListenMs: number;
}

export type ChildMessage =
  | { type: 'ready'; port: number; timings: StartupTimings; memory: NodeJS.MemoryUsage }
  | { type: 'memory'; memory: NodeJS.MemoryUsage; liveHeap: number; rssAfterGc: number }
  | { type: 'stopped'; closeMs: number }
  | { type: 'failed'; error: string };

export type ParentMessage = { type: 'memory' } | { type: 'stop' };

const importedAt = performance.now();

function send(message: ChildMessage): void {
  process.send?.(message);
}

/** Replaces a lifecycle hook on a provider instance with a timed call of the original. */
function timeHook<T extends object>(instance: T, hook: keyof T & string, record: (ms: number) => void): void {
  const original = (instance as Record<string, unknown>)[hook] as () => Promise<void>;
  (instance as Record<string, unknown>)[hook] = async () => {
    const started = performance.now();
    try {
      await original.call(instance);
    } finally {
      record(performance.now() - started);
    }
  };
}

async function main(): Promise<void> {
  const config = loadConfig(process.env);
  if (!config.databaseUrl) throw new Error('bench server: DATABASE_URL must be set by the parent');
  const timings: Partial<StartupTimings> = { importMs: importedAt };
  const started = performance.now();
  const app = await createApp(config, config.databaseUrl);
  timings.createMs = performance.now() - started;
  timeHook(app.get(MigrationRunner), 'onModuleInit', (ms) => (timings.migrationsMs = ms));
  timeHook(app.get(SeedService), 'onApplicationBootstrap', (ms) => (timings.seedMs = ms));
  await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
  const listening = performance.now();
  timings.initToListenMs = listening - started;
  timings.processToListenMs = listening;
  const port = (app.getHttpServer().address() as AddressInfo).port;
  const allocations = await startAllocationSampling(process.env.BENCH_HEAP_SAMPLING_DIR);

  let stopping = false;
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'memory') {
      const memory = process.memoryUsage();
      // Live heap = what survives a full collection (the app is forked with --expose-gc): the leak signal.
      (globalThis as { gc?: () => void }).gc?.();
      const afterGc = process.memoryUsage();
      send({ type: 'memory', memory, liveHeap: afterGc.heapUsed, rssAfterGc: afterGc.rss });
    }
    if (message.type === 'stop' && !stopping) {
      stopping = true;
      const closing = performance.now();
      void allocations()
        .then(() => app.close())
        .then(
          () => {
            send({ type: 'stopped', closeMs: performance.now() - closing });
            process.disconnect?.();
            process.exit(0);
          },
          (error: unknown) => {
            send({ type: 'failed', error: String(error) });
            process.exit(1);
          },
        );
    }
  });
  // The parent went away (crash, Ctrl-C): never outlive it.
  process.on('disconnect', () => {
    if (!stopping) process.exit(1);
  });
  send({ type: 'ready', port, timings: timings as StartupTimings, memory: process.memoryUsage() });
}

/**
 * BENCH_HEAP_SAMPLING_DIR: samples every allocation the app makes once listening, collected or not (what
 * `--heap-prof` cannot show: it keeps only what is still alive), and writes a `.heapprofile` there at stop.
 * The returned function stops the sampling and writes the file.
 */
async function startAllocationSampling(dir: string | undefined): Promise<() => Promise<void>> {
  if (!dir) return () => Promise.resolve();
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 64 * 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    writeFileSync(join(dir, `allocations-${process.pid}.heapprofile`), JSON.stringify(profile));
    session.disconnect();
  };
}

main().catch((error: unknown) => {
  send({ type: 'failed', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exit(1);
});
