/**
 * MCP overhead: `tools/call` of `query_records` on /mcp against `POST /api/v1/ai/tools/query_records/execute`
 * with the same arguments, on the same keep-alive client, 8 in flight, the two interleaved. Both run the
 * same ToolsService call; the difference is the MCP front door (a server and a transport per request,
 * JSON-RPC framing).
 * Before the load, the official SDK client checks that both answer with the same records.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { isDeepStrictEqual } from 'node:util';
import { log } from './harness';
import { HttpClient, HttpRequest, HttpResponse, LoadResult, percentile, runInterleaved } from './load';
import type { Goal } from './results';

/** Both routes together, half each. */
const REQUESTS = 6000;
const WARMUP_REQUESTS = 400;
const CONCURRENCY = 8;
/** Most the MCP p50 may exceed the REST p50 by. */
export const MCP_OVERHEAD_GOAL_MS = 2;

const ARGUMENTS = {
  objectName: 'deal',
  where: { stage: 'won' },
  fields: ['name', 'amount', 'close_date'],
  orderBy: [{ field: 'amount', order: 'desc' }],
  limit: 20,
};

export interface McpResult {
  /** Both routes together. */
  requests: number;
  concurrency: number;
  rest: LoadResult;
  mcp: LoadResult;
}

const restRequest = (): HttpRequest => ({
  method: 'POST',
  path: '/api/v1/ai/tools/query_records/execute',
  body: { arguments: ARGUMENTS },
});

/** What the SDK client sends for `callTool` after `initialize` (stateless: no session id). */
const mcpRequest = (i: number): HttpRequest => ({
  method: 'POST',
  path: '/mcp',
  headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
  body: { jsonrpc: '2.0', id: i + 1, method: 'tools/call', params: { name: 'query_records', arguments: ARGUMENTS } },
});

const restCheck = (res: HttpResponse) => {
  const body = JSON.parse(res.body) as { isError: boolean; result: { count: number } };
  return !body.isError && body.result.count === ARGUMENTS.limit;
};

const mcpCheck = (res: HttpResponse) => {
  const body = JSON.parse(res.body) as { result?: { isError: boolean; structuredContent: { count: number } } };
  return body.result?.isError === false && body.result.structuredContent.count === ARGUMENTS.limit;
};

/** The official SDK client, once: initialize, then callTool, whose records must be the REST route's. */
async function checkWithSdkClient(port: number, key: string, rest: HttpClient): Promise<void> {
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  try {
    const viaMcp = await client.callTool({ name: 'query_records', arguments: ARGUMENTS });
    const viaRest = await rest.json<{ result: unknown }>(restRequest());
    if (viaMcp.isError || !isDeepStrictEqual(viaMcp.structuredContent, viaRest.result)) {
      throw new Error(`mcp: callTool and the REST route disagree: ${JSON.stringify(viaMcp).slice(0, 500)}`);
    }
  } finally {
    await client.close();
  }
}

/** `requests` requests with `CONCURRENCY` in flight, even ones to REST and odd ones to MCP. */
async function mixedLoad(client: HttpClient, requests: number): Promise<{ rest: LoadResult; mcp: LoadResult }> {
  const [rest, mcp] = await runInterleaved(client, requests, CONCURRENCY, [
    { make: restRequest, check: restCheck },
    { make: mcpRequest, check: mcpCheck },
  ]);
  return { rest, mcp };
}

/** `client` carries the key (a member's). */
export async function mcpRun(port: number, key: string, client: HttpClient): Promise<McpResult> {
  await checkWithSdkClient(port, key, client);
  const warmup = await mixedLoad(client, WARMUP_REQUESTS);
  if (warmup.rest.errors || warmup.mcp.errors) {
    throw new Error(`mcp: warm-up failed: ${[...warmup.rest.errorSamples, ...warmup.mcp.errorSamples].join('\n')}`);
  }
  const result: McpResult = { requests: REQUESTS, concurrency: CONCURRENCY, ...(await mixedLoad(client, REQUESTS)) };
  log(
    `mcp: p50 ${percentile(result.mcp.latencies, 50).toFixed(2)} ms against REST ${percentile(result.rest.latencies, 50).toFixed(2)} ms ` +
      `(${result.mcp.errors + result.rest.errors} errors)`,
  );
  for (const sample of [...result.rest.errorSamples, ...result.mcp.errorSamples]) log(`  error: ${sample}`);
  return result;
}

export function mcpGoals(r: McpResult): Goal[] {
  const difference = percentile(r.mcp.latencies, 50) - percentile(r.rest.latencies, 50);
  return [
    {
      name: `MCP tools/call query_records against POST tools/query_records/execute, p50 at ${r.concurrency} in flight`,
      target: `MCP within ${MCP_OVERHEAD_GOAL_MS} ms`,
      measured: `${difference >= 0 ? '+' : ''}${difference.toFixed(2)} ms`,
      met: difference <= MCP_OVERHEAD_GOAL_MS && r.mcp.errors === 0 && r.rest.errors === 0,
    },
  ];
}

export const MCP_START = '<!-- mcp: start (written by npm run bench and npm run bench:mcp) -->';
export const MCP_END = '<!-- mcp: end -->';

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');

/** The MCP section of BENCHMARKS.md, between markers so that `npm run bench:mcp` can replace it alone. */
export function renderMcp(r: McpResult, run: { command: string; date: string; machine?: string }): string[] {
  const row = (label: string, l: LoadResult) =>
    `| ${label} | ${l.requests} | ${l.errors} | ${ms(percentile(l.latencies, 50))} | ${ms(percentile(l.latencies, 95))} | ` +
    `${ms(percentile(l.latencies, 99))} | ${ms(l.latencies[l.latencies.length - 1])} |`;
  return [
    MCP_START,
    '',
    '## MCP tool calls against the REST tool route',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    '- The same `query_records` arguments (won deals, 3 fields, orderBy amount desc, limit 20) with a member key:',
    '  `POST /api/v1/ai/tools/query_records/execute`, and a JSON-RPC `tools/call` POSTed to `/mcp` as the SDK client sends it',
    '  after `initialize` (stateless: the server builds an MCP server and a Streamable HTTP transport for each request, and',
    '  answers with JSON). Before the load the official SDK client (`initialize`, `callTool`) checked that MCP returns the',
    '  records REST returns.',
    `- ${r.requests} requests on one keep-alive client, ${r.concurrency} in flight, every other one to each route, so that`,
    '  whatever else the machine does at any moment weighs on both alike; a warm-up of the same kind is not counted.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...mcpGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    '| route | requests | errors | p50 ms | p95 ms | p99 ms | max ms |',
    '|---|---|---|---|---|---|---|',
    row('REST `POST /api/v1/ai/tools/query_records/execute`', r.rest),
    row('MCP `POST /mcp` `tools/call` `query_records`', r.mcp),
    '',
    MCP_END,
  ];
}
