/**
 * The model client's share of a turn: the CPU time one streamed chat completion costs in a process
 * that does nothing else, sent with the `openai` SDK exactly as the app sends it (the same client
 * options, `stream_options.include_usage`, an abort signal per call, every chunk read) with request
 * bodies the app really sent in the run, against the same mock model. Forked by bench/scale.ts, so
 * that neither the app nor the load generator is in the figure.
 */
import OpenAI from 'openai';
import { forkForAnswer } from './harness';

interface FloorRequest {
  url: string;
  bodies: Array<Record<string, unknown>>;
  calls: number;
  concurrency: number;
}

export interface SdkFloor {
  calls: number;
  /** User + system CPU time of the client process per call, all its threads (garbage collection included). */
  cpuMsPerCall: number;
  /** Mean size of the request bodies sent, bytes of JSON. */
  meanBodyBytes: number;
}

/** Runs the calls in a child process and returns its CPU time per call. */
export async function measureSdkFloor(request: FloorRequest): Promise<SdkFloor> {
  const { child, answer } = await forkForAnswer<SdkFloor>(__filename, '--run', request);
  child.kill();
  return answer;
}

async function run({ url, bodies, calls, concurrency }: FloorRequest): Promise<SdkFloor> {
  const client = new OpenAI({ apiKey: 'not-needed', baseURL: url, maxRetries: 0, timeout: 60_000 });
  const call = async (i: number) => {
    const body = bodies[i % bodies.length] as unknown as OpenAI.ChatCompletionCreateParamsStreaming;
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } },
      { signal: controller.signal },
    );
    for await (const chunk of stream) if (!chunk.choices) throw new Error('a chunk without choices');
  };
  const batch = async (count: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let i = next++; i < count; i = next++) await call(i);
      }),
    );
  };
  await batch(Math.min(calls, 200)); // warm-up: JIT, sockets
  const before = process.cpuUsage();
  await batch(calls);
  const used = process.cpuUsage(before);
  const meanBodyBytes = bodies.reduce((sum, b) => sum + JSON.stringify(b).length, 0) / bodies.length;
  return { calls, cpuMsPerCall: (used.user + used.system) / 1000 / calls, meanBodyBytes };
}

if (process.argv.includes('--run')) {
  process.once('message', (request: FloorRequest) => {
    run(request).then(
      (result) => process.send?.(result),
      (error: unknown) => process.send?.({ error: String(error) }),
    );
  });
}
