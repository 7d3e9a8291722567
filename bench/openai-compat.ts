/**
 * OpenAI-compatible API overhead: the same agent turn (model → query_records → model, scripted) through
 * `POST /v1/chat/completions` and through `POST /api/v1/ai/agents/data_chat/chat`, on the same keep-alive
 * client, 8 in flight, the two interleaved; once with a model that answers at once and once with one
 * that takes `MODEL_DELAY_MS` per call, as a fast hosted model does. Both doors make one prepareTurn call
 * and run the one loop; the difference is their wire format.
 * Before the load, the official `openai` SDK checks that /v1 answers what the REST route answers.
 */
import OpenAI from 'openai';
import { DynamicStep, MockLlmServer, MockReply } from '../test/support/mock-llm.server';
import { log } from './harness';
import { HttpClient, HttpRequest, HttpResponse, LoadResult, percentile, runInterleaved } from './load';
import type { Goal } from './results';

const CONCURRENCY = 8;
/** Most the two p50s may differ by, as a share of the REST route's. */
export const OPENAI_OVERHEAD_GOAL = 0.1;
/** Per model call in the second run: a turn makes two. */
const MODEL_DELAY_MS = 200;
const QUESTION = 'Which won deals are the largest?';
const ANSWER = 'The five largest won deals are listed above; the largest is worth 9,180,000 USD.';

/** Requests of both routes together, per model latency (turns take about 2 × the delay longer with one). */
const RUNS = [
  { modelDelayMs: 0, requests: 1600, warmup: 200 },
  { modelDelayMs: MODEL_DELAY_MS, requests: 400, warmup: 40 },
] as const;

export interface OpenAiCompatRun {
  modelDelayMs: number;
  /** Both routes together. */
  requests: number;
  concurrency: number;
  rest: LoadResult;
  openai: LoadResult;
}

export interface OpenAiCompatResult {
  runs: OpenAiCompatRun[];
}

const restRequest = (): HttpRequest => ({
  method: 'POST',
  path: '/api/v1/ai/agents/data_chat/chat',
  body: { messages: [{ role: 'user', content: QUESTION }] },
});

const openAiRequest = (): HttpRequest => ({
  method: 'POST',
  path: '/v1/chat/completions',
  body: { model: 'data_chat', messages: [{ role: 'user', content: QUESTION }] },
});

const restCheck = (res: HttpResponse) => {
  const body = JSON.parse(res.body) as { content: string; finishReason: string; toolCalls: Array<{ isError: boolean }> };
  return body.finishReason === 'stop' && body.content === ANSWER && body.toolCalls.length === 1 && !body.toolCalls[0].isError;
};

const openAiCheck = (res: HttpResponse) => {
  const body = JSON.parse(res.body) as OpenAI.Chat.Completions.ChatCompletion;
  const [choice] = body.choices;
  return body.choices.length === 1 && choice.finish_reason === 'stop' && choice.message.content === ANSWER;
};

/** The turn both routes run: query_records on the first call, the answer once the tool result is in. */
function oneToolRound(delayMs: number): DynamicStep {
  return (request) =>
    ((request.body?.messages ?? []) as Array<{ role?: string }>).at(-1)?.role === 'tool'
      ? MockReply.text(ANSWER, { delayMs })
      : MockReply.toolCall(
          'query_records',
          {
            objectName: 'deal',
            where: { stage: 'won' },
            fields: ['name', 'amount', 'close_date'],
            orderBy: [{ field: 'amount', order: 'desc' }],
            limit: 5,
          },
          { delayMs },
        );
}

/** Scripts `turns` turns of the model (two calls each), runs `work`, and checks that every step was used. */
async function withScript<T>(llm: MockLlmServer, turns: number, delayMs: number, work: () => Promise<T>): Promise<T> {
  llm.reset();
  for (let i = 0; i < turns * 2; i++) llm.enqueue(oneToolRound(delayMs));
  const result = await work();
  if (llm.pendingSteps !== 0) throw new Error(`openai-compat: ${llm.pendingSteps} scripted model steps left unused`);
  llm.reset();
  return result;
}

/** The official SDK, once: its completion must carry the answer the REST route gives for the same turn. */
async function checkWithSdk(port: number, key: string, rest: HttpClient, llm: MockLlmServer): Promise<void> {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0 });
  const completion = await withScript(llm, 1, 0, () =>
    client.chat.completions.create({ model: 'data_chat', messages: [{ role: 'user', content: QUESTION }] }),
  );
  const viaRest = await withScript(llm, 1, 0, () => rest.json<{ content: string }>(restRequest()));
  const content = completion.choices[0]?.message.content;
  if (content !== viaRest.content || completion.choices[0].finish_reason !== 'stop') {
    throw new Error(`openai-compat: /v1 and the REST route disagree: ${JSON.stringify(completion).slice(0, 500)}`);
  }
}

/** `requests` requests with `CONCURRENCY` in flight, even ones to REST and odd ones to /v1. */
async function mixedLoad(client: HttpClient, requests: number): Promise<{ rest: LoadResult; openai: LoadResult }> {
  const [rest, openai] = await runInterleaved(client, requests, CONCURRENCY, [
    { make: restRequest, check: restCheck },
    { make: openAiRequest, check: openAiCheck },
  ]);
  return { rest, openai };
}

/** `client` carries `key` (a member's); `llm` is the app's model endpoint, scripted here. */
export async function openAiCompatRun(
  port: number,
  key: string,
  client: HttpClient,
  llm: MockLlmServer,
): Promise<OpenAiCompatResult> {
  await checkWithSdk(port, key, client, llm);
  const runs: OpenAiCompatRun[] = [];
  for (const { modelDelayMs, requests, warmup } of RUNS) {
    const warm = await withScript(llm, warmup, modelDelayMs, () => mixedLoad(client, warmup));
    if (warm.rest.errors || warm.openai.errors) {
      throw new Error(`openai-compat: warm-up failed: ${[...warm.rest.errorSamples, ...warm.openai.errorSamples].join('\n')}`);
    }
    const measured = await withScript(llm, requests, modelDelayMs, () => mixedLoad(client, requests));
    const run: OpenAiCompatRun = { modelDelayMs, requests, concurrency: CONCURRENCY, ...measured };
    log(
      `openai-compat (model ${modelDelayMs} ms): /v1 p50 ${percentile(run.openai.latencies, 50).toFixed(2)} ms against ` +
        `REST ${percentile(run.rest.latencies, 50).toFixed(2)} ms (${run.openai.errors + run.rest.errors} errors)`,
    );
    for (const sample of [...run.rest.errorSamples, ...run.openai.errorSamples]) log(`  error: ${sample}`);
    runs.push(run);
  }
  return { runs };
}

/** How much slower (+) or faster (-) /v1's p50 is than the REST route's, as a share of the latter. */
function p50Difference(run: OpenAiCompatRun): number {
  const rest = percentile(run.rest.latencies, 50);
  return (percentile(run.openai.latencies, 50) - rest) / rest;
}

export function openAiCompatGoals(r: OpenAiCompatResult): Goal[] {
  return r.runs.map((run) => {
    const difference = p50Difference(run);
    return {
      name:
        `/v1/chat/completions against POST agents/:name/chat, one tool round, model ${run.modelDelayMs} ms per call, ` +
        `p50 at ${run.concurrency} in flight`,
      target: `within ${(OPENAI_OVERHEAD_GOAL * 100).toFixed(0)}%`,
      measured: `${difference >= 0 ? '+' : ''}${(difference * 100).toFixed(1)}%`,
      met: Math.abs(difference) <= OPENAI_OVERHEAD_GOAL && run.openai.errors === 0 && run.rest.errors === 0,
    };
  });
}

export const OPENAI_COMPAT_START = '<!-- openai-compat: start (written by npm run bench and npm run bench:openai) -->';
export const OPENAI_COMPAT_END = '<!-- openai-compat: end -->';

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');

/** The OpenAI-compatible section of BENCHMARKS.md, between markers so that `npm run bench:openai` can replace it alone. */
export function renderOpenAiCompat(r: OpenAiCompatResult, run: { command: string; date: string; machine?: string }): string[] {
  const row = (label: string, delay: number, l: LoadResult) =>
    `| ${label} | ${delay} | ${l.requests} | ${l.errors} | ${ms(percentile(l.latencies, 50))} | ${ms(percentile(l.latencies, 95))} | ` +
    `${ms(percentile(l.latencies, 99))} | ${ms(l.latencies[l.latencies.length - 1])} | ${(l.requests / (l.wallMs / 1000)).toFixed(1)} |`;
  return [
    OPENAI_COMPAT_START,
    '',
    '## OpenAI-compatible chat completions against the stateless chat route',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    '- The same turn of `data_chat` with a member key: the scripted model calls `query_records` (won deals, 3 fields,',
    '  orderBy amount desc, limit 5), the tool runs on the server, the model answers. JSON answers from',
    '  `POST /v1/chat/completions` (`{ model, messages }`) and `POST /api/v1/ai/agents/data_chat/chat` (`{ messages }`).',
    '  Before the load the official `openai` SDK checked that /v1 answers what the REST route answers.',
    ...r.runs.map((x) => `- ${x.requests} requests with the model answering after ${x.modelDelayMs} ms per call.`),
    `- One keep-alive client, ${CONCURRENCY} in flight, every other request to each route, so that whatever else the machine`,
    '  does at any moment weighs on both alike; a warm-up of the same kind is not counted. Throughput is per route, over',
    '  the wall time of the mixed run.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...openAiCompatGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| route | model ms per call | requests | errors | p50 ms | p95 ms | p99 ms | max ms | req/s |',
    '|---|---|---|---|---|---|---|---|---|',
    ...r.runs.flatMap((x) => [
      row('REST `POST /api/v1/ai/agents/data_chat/chat`', x.modelDelayMs, x.rest),
      row('OpenAI-compatible `POST /v1/chat/completions`', x.modelDelayMs, x.openai),
    ]),
    '',
    OPENAI_COMPAT_END,
  ];
}
