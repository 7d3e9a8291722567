/**
 * Client tool schemas: durable chats created with 64 dynamic tools each (JSON Schemas checked
 * against the meta-schema only, src/runtime/client-tools.ts), answered by the mock model, then
 * deleted, cycle after cycle. Every cycle's schemas are new (new `$id`s, new patternProperties
 * regular expressions), so anything the server kept per schema would show up as memory growth.
 */
import { performance } from 'node:perf_hooks';
import { MockLlmServer, MockReply } from '../test/support/mock-llm.server';
import { AppProcess, log } from './harness';
import type { HttpClient } from './load';
import type { ClientSchemasResult } from './report';

export const SCHEMA_CYCLES = 200;
export const TOOLS_PER_CHAT = 64;
/**
 * Cycles before the first memory reading. Lazy set-up (the meta-schema, the first model call) and V8 sizing a cold
 * heap to this allocation rate take about 50 cycles and then stay flat; that high-water mark is not growth.
 */
const WARMUP_CYCLES = 50;
const PATTERN_PROPERTIES = 40;
/** A memory reading every this many cycles, to tell a high-water mark (flat after a while) from a leak (steady growth). */
const READING_EVERY = 50;
/** The growth goal, for RSS and for the live heap alike. */
export const SCHEMA_GROWTH_LIMIT_BYTES = 50 * 1024 * 1024;

/** Tool `index` of cycle `cycle`: nested properties, arrays, anyOf, a local $ref; every 4th with an $id, every 4th (offset 1) with 40 patternProperties. */
export function benchToolSchema(cycle: number, index: number): Record<string, unknown> {
  const schema: Record<string, unknown> = {
    type: 'object',
    description: `Input of bench tool ${index} (cycle ${cycle})`,
    properties: {
      query: { type: 'string', minLength: 1, maxLength: 500, description: 'What to look for' },
      limit: { type: 'integer', minimum: 1, maximum: 1000, default: 20 },
      filters: {
        type: 'array',
        maxItems: 20,
        items: {
          type: 'object',
          properties: {
            field: { type: 'string', pattern: `^[a-z_]{1,${10 + (index % 50)}}$` },
            op: { enum: ['eq', 'ne', 'gt', 'lt', 'in', 'contains'] },
            value: {
              anyOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }, { type: 'array', items: { type: 'string' } }],
            },
          },
          required: ['field', 'op', 'value'],
          additionalProperties: false,
        },
      },
      range: {
        type: 'object',
        properties: { from: { type: 'string', format: 'date' }, to: { type: 'string', format: 'date' } },
        required: ['from'],
      },
      options: { $ref: '#/definitions/options' },
    },
    required: ['query'],
    additionalProperties: false,
    definitions: {
      options: {
        type: 'object',
        properties: { verbose: { type: 'boolean' }, locale: { type: 'string', enum: ['en', 'de', 'fr', 'ja'] } },
      },
    },
  };
  if (index % 4 === 0) schema.$id = `https://bench.example.com/cycle-${cycle}/tool-${index}.json`;
  if (index % 4 === 1) {
    (schema.properties as Record<string, unknown>).attributes = {
      type: 'object',
      patternProperties: Object.fromEntries(
        Array.from({ length: PATTERN_PROPERTIES }, (_, j) => [
          `^c${cycle}_t${index}_p${j}_[a-z]{1,8}$`,
          { type: ['string', 'number'], maxLength: 100 },
        ]),
      ),
      additionalProperties: false,
    };
  }
  return schema;
}

export function benchTools(cycle: number): Array<Record<string, unknown>> {
  return Array.from({ length: TOOLS_PER_CHAT }, (_, index) => ({
    name: `bench_tool_${index}`,
    description: `A client tool of the benchmark (${index})`,
    inputSchema: benchToolSchema(cycle, index),
  }));
}

/** One cycle: create the chat (201), wait until the worker has it answered, delete it (204). */
async function cycle(
  member: HttpClient,
  llm: MockLlmServer,
  n: number,
): Promise<{ createMs: number; answeredMs: number; deleteMs: number }> {
  // One model call per chat; a reset first, so the mock does not keep every request's 64 schemas.
  llm.reset();
  llm.enqueue(MockReply.text('Done.'));
  const started = performance.now();
  const chat = await member.json<{ id: string }>(
    { method: 'POST', path: '/api/v1/chats', body: { agent: 'data_chat', message: `Cycle ${n}`, dynamicTools: benchTools(n) } },
    201,
  );
  const createMs = performance.now() - started;
  for (;;) {
    const { status } = await member.json<{ status: string }>({ method: 'GET', path: `/api/v1/chats/${chat.id}` });
    if (status === 'waiting') break;
    if (status === 'error' || status === 'requires_action') throw new Error(`cycle ${n}: chat ended ${status}`);
    if (performance.now() - started > 30_000) throw new Error(`cycle ${n}: chat not answered within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const answeredMs = performance.now() - started;
  const deleting = performance.now();
  await member.json({ method: 'DELETE', path: `/api/v1/chats/${chat.id}` }, 204);
  return { createMs, answeredMs, deleteMs: performance.now() - deleting };
}

export async function clientSchemasRun(
  member: HttpClient,
  app: AppProcess,
  llm: MockLlmServer,
  cycles = SCHEMA_CYCLES,
): Promise<ClientSchemasResult> {
  const bodyBytes = Buffer.byteLength(JSON.stringify({ agent: 'data_chat', message: 'Cycle 0', dynamicTools: benchTools(0) }));
  for (let n = 0; n < WARMUP_CYCLES; n++) await cycle(member, llm, -1 - n);
  const memory = [await app.memory(`after ${WARMUP_CYCLES} warm-up cycles`)];
  const memoryCycles = [0];
  const timings = { createMs: [] as number[], answeredMs: [] as number[], deleteMs: [] as number[] };
  const started = performance.now();
  for (let n = 0; n < cycles; n++) {
    const t = await cycle(member, llm, n);
    timings.createMs.push(t.createMs);
    timings.answeredMs.push(t.answeredMs);
    timings.deleteMs.push(t.deleteMs);
    if ((n + 1) % READING_EVERY === 0 && n + 1 < cycles) {
      memory.push(await app.memory(`after ${n + 1} cycles`));
      memoryCycles.push(n + 1);
    }
  }
  const wallMs = performance.now() - started;
  memory.push(await app.memory(`after ${cycles} cycles`));
  memoryCycles.push(cycles);
  llm.reset();
  const sort = (values: number[]) => values.sort((a, b) => a - b);
  const result: ClientSchemasResult = {
    cycles,
    toolsPerChat: TOOLS_PER_CHAT,
    warmupCycles: WARMUP_CYCLES,
    bodyBytes,
    wallMs,
    createMs: sort(timings.createMs),
    answeredMs: sort(timings.answeredMs),
    deleteMs: sort(timings.deleteMs),
    memory,
    memoryCycles,
    limitBytes: SCHEMA_GROWTH_LIMIT_BYTES,
  };
  const growth = (key: 'rss' | 'rssAfterGc' | 'liveHeap') => (memory[memory.length - 1][key] - memory[0][key]) / 1024 / 1024;
  log(
    `client tool schemas: ${cycles} cycles in ${(wallMs / 1000).toFixed(1)} s; growth RSS ${growth('rss').toFixed(1)} MB, ` +
      `RSS after GC ${growth('rssAfterGc').toFixed(1)} MB, ` +
      `live heap ${growth('liveHeap').toFixed(1)} MB`,
  );
  return result;
}
