import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_BODY_DEPTH } from '../../src/common/json-body.parser';
import { MAX_INSTRUCTIONS_CHARS } from '../../src/mcp/mcp.mapper';
import type { AggregateDataResult } from '../../src/tools/data-tools/aggregate-data.tool';
import type { DescribeObjectResult } from '../../src/tools/data-tools/describe-object.tool';
import { DATA_TOOL_NAMES } from '../../src/tools/data-tools';
import { METRIC_TOOL_NAMES } from '../../src/tools/metric-tools';
import type { ListObjectsResult } from '../../src/tools/data-tools/list-objects.tool';
import type { QueryRecordsResult } from '../../src/tools/data-tools/query-records.tool';
import type { ToolErrorContent } from '../../src/tools/tool.types';
import type { ExecuteToolResponse, ToolListResponse } from '../../src/tools/tools.dto';
import { listen } from '../support/chat-helpers';
import { match } from '../support/matchers';
import { bodyOf, errorOf, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createAgent, createApiKey } from '../support/fixtures';

/** One HTTP exchange of an MCP client, as its transport's fetch saw it. */
interface Exchange {
  method: string;
  path: string;
  status: number;
  headers: Headers;
  /** The body as text; event streams are not read. */
  body: string;
}

type Line = Record<string, unknown>;

const ALLOWED_ORIGIN = 'https://analytics.example.com';

/** What `callTool` resolves to: a current result, or the pre-2024 `{ toolResult }` shape (never sent here). */
type ToolCallAnswer = CallToolResult | { toolResult: unknown };

/** What a tool call returned: its JSON text and its structured content, which must say the same. */
function structured<T>(answer: ToolCallAnswer): T {
  if (!('content' in answer)) throw new Error(`a legacy toolResult answer: ${JSON.stringify(answer)}`);
  const result = answer;
  expect(result.content).toEqual([{ type: 'text', text: JSON.stringify(result.structuredContent) }]);
  return result.structuredContent as T;
}

const errorCodeOf = (result: ToolCallAnswer) => structured<ToolErrorContent>(result).error.code;

describe('MCP server (official SDK client over Streamable HTTP)', () => {
  let t: TestApp;
  let baseUrl: string;
  let memberKey: string;
  const clients: Client[] = [];
  const logs: string[] = [];
  const logLines = (): Line[] =>
    logs
      .join('')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Line);

  /** A connected SDK client for `path` with `key`, recording every HTTP exchange into `exchanges`. */
  async function connect(
    path: string,
    key: string | undefined,
    options: { headers?: Record<string, string>; exchanges?: Exchange[] } = {},
  ): Promise<Client> {
    const exchanges = options.exchanges ?? [];
    const transport = new StreamableHTTPClientTransport(new URL(path, baseUrl), {
      requestInit: { headers: { ...(key === undefined ? {} : bearer(key)), ...options.headers } },
      fetch: async (url, init) => {
        const response = await fetch(url, init);
        const streamed = response.headers.get('content-type')?.includes('text/event-stream');
        exchanges.push({
          method: init?.method ?? 'GET',
          path: new URL(url).pathname,
          status: response.status,
          headers: response.headers,
          body: streamed ? '' : await response.clone().text(),
        });
        return response;
      },
    });
    const client = new Client({ name: 'mcp-e2e', version: '1.0.0' });
    clients.push(client);
    await client.connect(transport);
    return client;
  }

  /** The HTTP error an SDK client meets when connecting is refused, with the response it got. */
  async function refusal(path: string, key: string | undefined, headers?: Record<string, string>) {
    const exchanges: Exchange[] = [];
    const error = await connect(path, key, { headers, exchanges }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StreamableHTTPError);
    const response = exchanges.at(-1)!;
    return { code: (error as StreamableHTTPError).code, response, body: JSON.parse(response.body) as Record<string, unknown> };
  }

  async function rest<T>(name: string, args: Record<string, unknown>, key = memberKey): Promise<T> {
    const res = await t.http.post(`/api/v1/ai/tools/${name}/execute`).set(bearer(key)).send({ arguments: args }).expect(200);
    return bodyOf<ExecuteToolResponse & { result: T }>(res).result;
  }

  beforeAll(async () => {
    t = await startTestApp({
      env: { SEED: 'true', LOG_LEVEL: 'info', CORS_ORIGINS: `${ALLOWED_ORIGIN},http://localhost:5173` },
      logDestination: { write: (chunk: string) => void logs.push(chunk) },
    });
    baseUrl = await listen(t);
    memberKey = (await createApiKey(t, { name: 'analyst', role: 'member' })).secret;
    const agent = (spec: Record<string, unknown>) => createAgent(t, spec);
    await agent({
      name: 'deal_desk',
      label: 'Deal desk',
      description: 'Looks up deals and their accounts.',
      instructions: 'You answer questions about deals. Quote deal names exactly.',
      tools: ['list_objects', 'describe_object', 'query_records', 'get_record'],
      allowedObjects: ['deal', 'account'],
    });
    await agent({
      name: 'board_pack',
      label: 'Board pack',
      instructions: 'Prepare figures for the board.',
      tools: ['aggregate_data'],
      access: { roles: ['admin'] },
    });
    await agent({ name: 'retired', label: 'Retired', instructions: 'Old.', tools: ['list_objects'], active: false });
  });
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await t.close();
  });

  describe('/mcp: every data tool the key may use', () => {
    let mcp: Client;
    beforeAll(async () => {
      mcp = await connect('/mcp', memberKey);
    });

    it('lists the five data tools and the two metric tools with the descriptions and JSON Schemas the tools API gives', async () => {
      const { tools } = await mcp.listTools();
      expect(tools.map((tool) => tool.name)).toEqual([...DATA_TOOL_NAMES, ...METRIC_TOOL_NAMES]);
      const registry = bodyOf<ToolListResponse>(await t.http.get('/api/v1/ai/tools').set(bearer(memberKey)).expect(200)).tools;
      expect(tools.map(({ name, description, inputSchema }) => ({ name, description, parameters: inputSchema }))).toEqual(
        registry.filter((tool) => [...DATA_TOOL_NAMES, ...METRIC_TOOL_NAMES].includes(tool.name as never)),
      );
      const query = tools.find((tool) => tool.name === 'query_records')!;
      expect(query.inputSchema).toMatchObject({ type: 'object', required: ['objectName'], additionalProperties: false });
    });

    it('tells the host in initialize what the data is: the objects with their labels, within a bounded size', () => {
      const instructions = mcp.getInstructions() ?? '';
      for (const line of ['- account (Account)', '- contact (Contact)', '- deal (Deal)', '- activity (Activity)']) {
        expect(instructions).toContain(line);
      }
      expect(instructions).toContain('aggregate_data');
      expect(instructions.length).toBeLessThanOrEqual(MAX_INSTRUCTIONS_CHARS);
      expect(mcp.getServerVersion()).toMatchObject({ name: 'data-copilot' });
      expect(mcp.getServerCapabilities()).toMatchObject({ tools: {}, resources: {}, prompts: {} });
    });

    it('query_records returns the rows the records API returns for the same filter', async () => {
      const where = { stage: 'won', amount: { $gt: 50000 } };
      const orderBy = [{ field: 'amount', order: 'desc' }];
      const fields = ['name', 'amount', 'close_date', 'account'];
      const result = await mcp.callTool({
        name: 'query_records',
        arguments: { objectName: 'deal', where, fields, orderBy, limit: 15 },
      });
      expect(result.isError).toBe(false);
      const page = structured<QueryRecordsResult>(result);
      const api = bodyOf<RecordPage>(
        await t.http
          .get('/api/v1/objects/deal/records')
          .query({ where: JSON.stringify(where), orderBy: JSON.stringify(orderBy), fields: fields.join(','), limit: 15 })
          .set(bearer(memberKey))
          .expect(200),
      );
      expect(page.records).toHaveLength(15);
      expect(page.records).toEqual(api.records);
      expect(page.total).toBe(api.total);
      expect(page.hasMore).toBe((api.total ?? 0) > 15);
    });

    it('aggregate_data gives the figures SQL gives', async () => {
      const result = await mcp.callTool({
        name: 'aggregate_data',
        arguments: {
          objectName: 'deal',
          groupBy: ['stage'],
          aggregations: [
            { function: 'count', alias: 'deals' },
            { function: 'sum', field: 'amount', alias: 'total' },
          ],
          orderBy: [{ field: 'stage', order: 'asc' }],
        },
      });
      expect(result.isError).toBe(false);
      const expected = await t.sql<{ stage: string; deals: string; total: string }>(
        'select stage, count(*) as deals, sum(amount) as total from data.deal group by stage order by stage',
      );
      expect(expected.length).toBeGreaterThan(2);
      expect(structured<AggregateDataResult>(result).rows).toEqual(
        expected.map((r) => ({ stage: r.stage, deals: Number(r.deals), total: Number(r.total) })),
      );
    });

    it('answers bad arguments, an unknown field or object and an unknown tool with isError results the model can read', async () => {
      const missing = await mcp.callTool({ name: 'query_records', arguments: { where: { stage: 'won' } } });
      expect(missing.isError).toBe(true);
      expect(structured<ToolErrorContent>(missing).error).toMatchObject({ code: 'invalid_arguments' });
      expect(structured<ToolErrorContent>(missing).error.message).toContain('objectName');

      const field = await mcp.callTool({ name: 'query_records', arguments: { objectName: 'deal', where: { colour: 'red' } } });
      expect([field.isError, errorCodeOf(field)]).toEqual([true, 'unknown_field']);

      const object = await mcp.callTool({ name: 'describe_object', arguments: { objectName: 'invoice' } });
      expect([object.isError, errorCodeOf(object)]).toEqual([true, 'object_not_found']);

      const tool = await mcp.callTool({ name: 'drop_database', arguments: {} });
      expect([tool.isError, errorCodeOf(tool)]).toEqual([true, 'tool_not_found']);
    });

    it('lists one resource per object, and reads object://deal as describe_object describes it', async () => {
      const { resources } = await mcp.listResources();
      expect(resources.map((r) => [r.uri, r.name, r.title, r.mimeType])).toEqual([
        ['object://account', 'account', 'Account', 'application/json'],
        ['object://activity', 'activity', 'Activity', 'application/json'],
        ['object://contact', 'contact', 'Contact', 'application/json'],
        ['object://deal', 'deal', 'Deal', 'application/json'],
      ]);
      const { contents } = await mcp.readResource({ uri: 'object://deal' });
      expect(contents).toHaveLength(1);
      expect(contents[0]).toMatchObject({ uri: 'object://deal', mimeType: 'application/json' });
      const deal = JSON.parse((contents[0] as { text: string }).text) as DescribeObjectResult;
      expect(deal).toEqual(await rest<DescribeObjectResult>('describe_object', { objectName: 'deal' }));
      expect(deal.fields.find((f) => f.name === 'stage')).toMatchObject({
        type: 'select',
        options: match.arrayContaining(['won']),
      });
      const { resourceTemplates } = await mcp.listResourceTemplates();
      expect(resourceTemplates.map((r) => r.uriTemplate)).toEqual(['object://{name}']);
    });

    it('refuses to read an object that does not exist, or a URI that names none, with resource-not-found', async () => {
      for (const uri of ['object://invoice', 'object://Deal', 'file:///etc/passwd', 'object://deal/../account']) {
        const error = await mcp.readResource({ uri }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(McpError);
        expect((error as McpError).code).toBe(-32002);
      }
    });

    it('offers the agents a member may use as prompts, with their instructions', async () => {
      const { prompts } = await mcp.listPrompts();
      // board_pack is for admins, retired is inactive.
      expect(prompts.map((p) => p.name)).toEqual(['data_chat', 'deal_desk']);
      expect(prompts[1]).toMatchObject({ title: 'Deal desk', description: 'Looks up deals and their accounts.' });
      const prompt = await mcp.getPrompt({ name: 'deal_desk' });
      expect(prompt.messages).toEqual([
        { role: 'user', content: { type: 'text', text: 'You answer questions about deals. Quote deal names exactly.' } },
      ]);
      for (const name of ['board_pack', 'retired', 'nobody']) {
        await expect(mcp.getPrompt({ name })).rejects.toBeInstanceOf(McpError);
      }
    });

    it('offers an admin every active agent as a prompt', async () => {
      const admin = await connect('/mcp', t.adminKey);
      expect((await admin.listPrompts()).prompts.map((p) => p.name)).toEqual(['board_pack', 'data_chat', 'deal_desk']);
    });
  });

  describe('/mcp/agents/:agentName: the tools and objects of that agent only', () => {
    let desk: Client;
    beforeAll(async () => {
      desk = await connect('/mcp/agents/deal_desk', memberKey);
    });

    it('lists only the tools of the agent', async () => {
      expect((await desk.listTools()).tools.map((tool) => tool.name)).toEqual([
        'list_objects',
        'describe_object',
        'query_records',
        'get_record',
      ]);
    });

    it('lists only the objects of the agent, as resources and through list_objects', async () => {
      expect((await desk.listResources()).resources.map((r) => r.uri)).toEqual(['object://account', 'object://deal']);
      const listed = await desk.callTool({ name: 'list_objects', arguments: {} });
      expect(structured<ListObjectsResult>(listed).objects.map((o) => o.name)).toEqual(['account', 'deal']);
      const instructions = desk.getInstructions() ?? '';
      expect(instructions).toContain('Agent "Deal desk" (deal_desk): Looks up deals and their accounts.');
      expect(instructions).toContain('- deal (Deal)');
      expect(instructions).not.toContain('contact');
      expect(instructions).not.toContain('aggregate_data');
    });

    it('refuses a tool and an object the agent lacks as isError results, and hides the object as a resource', async () => {
      const hiddenObject = await desk.callTool({ name: 'query_records', arguments: { objectName: 'contact' } });
      expect([hiddenObject.isError, errorCodeOf(hiddenObject)]).toEqual([true, 'object_not_allowed']);
      const hiddenTool = await desk.callTool({
        name: 'aggregate_data',
        arguments: { objectName: 'deal', aggregations: [{ function: 'count', alias: 'n' }] },
      });
      expect([hiddenTool.isError, errorCodeOf(hiddenTool)]).toEqual([true, 'tool_not_allowed']);
      await expect(desk.readResource({ uri: 'object://contact' })).rejects.toMatchObject({ code: -32002 });
      const allowed = await desk.callTool({ name: 'query_records', arguments: { objectName: 'deal', limit: 2 } });
      expect(structured<QueryRecordsResult>(allowed).count).toBe(2);
    });

    it('offers the agent itself as the one prompt', async () => {
      expect((await desk.listPrompts()).prompts.map((p) => p.name)).toEqual(['deal_desk']);
    });

    it('answers an unknown agent, or one the key may not use, with 404, and an inactive one with 403', async () => {
      const unknown = await refusal('/mcp/agents/nobody', memberKey);
      expect([unknown.code, unknown.body.code]).toEqual([404, 'agent_not_found']);
      const adminsOnly = await refusal('/mcp/agents/board_pack', memberKey);
      expect([adminsOnly.code, adminsOnly.body.code]).toEqual([404, 'agent_not_found']);
      const inactive = await refusal('/mcp/agents/retired', memberKey);
      expect([inactive.code, inactive.body.code]).toEqual([403, 'agent_inactive']);
      const board = await connect('/mcp/agents/board_pack', t.adminKey);
      expect((await board.listTools()).tools.map((tool) => tool.name)).toEqual(['aggregate_data']);
    });
  });

  describe('the HTTP edge', () => {
    it('answers a request without a key, or with an unknown key, with 401 and WWW-Authenticate: Bearer', async () => {
      for (const key of [undefined, 'not-a-key']) {
        const { code, response, body } = await refusal('/mcp', key);
        expect(code).toBe(401);
        expect(response.headers.get('www-authenticate')).toBe('Bearer');
        expect(body).toMatchObject({ code: 'unauthorized' });
      }
      // Without an identity provider there is no sign-in to discover: API keys only.
      const metadata = await t.http.get('/.well-known/oauth-protected-resource/mcp').expect(404);
      expect(errorOf(metadata).code).toBe('route_not_found');
    });

    it('refuses a browser Origin outside CORS_ORIGINS with 403, and serves a listed one', async () => {
      const { code, body } = await refusal('/mcp', memberKey, { Origin: 'https://evil.example.com' });
      expect([code, body.code]).toEqual([403, 'forbidden']);
      const agentPath = await refusal('/mcp/agents/deal_desk', memberKey, { Origin: 'null' });
      expect([agentPath.code, agentPath.body.code]).toEqual([403, 'forbidden']);
      const browser = await connect('/mcp', memberKey, { headers: { Origin: ALLOWED_ORIGIN } });
      expect((await browser.listTools()).tools).toHaveLength(DATA_TOOL_NAMES.length + METRIC_TOOL_NAMES.length);
    });

    it('answers every POST with a request id and a request log line, and the GET for an event stream with 405', async () => {
      const exchanges: Exchange[] = [];
      const mcp = await connect('/mcp/agents/deal_desk', memberKey, { exchanges });
      await mcp.callTool({ name: 'list_objects', arguments: {} });
      // The client opens its optional event stream without waiting for it.
      for (let i = 0; i < 50 && !exchanges.some((e) => e.method === 'GET'); i++) await sleep(20);
      const get = exchanges.find((e) => e.method === 'GET')!;
      expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST']);
      expect(JSON.parse(get.body)).toEqual({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
      const posts = exchanges.filter((e) => e.method === 'POST');
      // initialize, notifications/initialized (202), tools/call
      expect(posts.map((e) => e.status)).toEqual([200, 202, 200]);
      const requestId = posts[2].headers.get('x-request-id')!;
      expect(requestId).toEqual(expect.any(String));
      let lines: Line[] = [];
      for (let i = 0; i < 50 && !lines.some((l) => l.msg === 'request completed'); i++) {
        await sleep(20);
        lines = logLines().filter((l) => l.requestId === requestId);
      }
      expect(lines).toContainEqual(
        expect.objectContaining({ msg: 'request completed', route: '/mcp/agents/:agentName', method: 'POST', status: 200 }),
      );
      expect(lines).toContainEqual(
        expect.objectContaining({ context: 'ToolAudit', tool: 'list_objects', agent: 'deal_desk', isError: false }),
      );
    });

    it('answers a body that is not JSON with the JSON-RPC parse error (-32700, id null, 400), as the SDK transports do', async () => {
      const post = (path: string, body: string) =>
        fetch(new URL(path, baseUrl), {
          method: 'POST',
          headers: {
            ...bearer(memberKey),
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
          body,
        });
      for (const [path, body] of [
        ['/mcp', '{"jsonrpc":"2.0","id":1,"method":"tools/list"'],
        ['/mcp', ''],
        ['/mcp/agents/deal_desk', 'not json'],
      ]) {
        const response = await post(path, body);
        expect([path, body, response.status]).toEqual([path, body, 400]);
        expect(response.headers.get('content-type')).toMatch(/^application\/json/);
        expect(await response.json()).toEqual({
          jsonrpc: '2.0',
          error: { code: -32700, message: 'Parse error: Invalid JSON' },
          id: null,
        });
      }
      // The rest of the API keeps its own error body; a well-formed MCP request is still served.
      const rest = await t.http.post('/api/v1/objects').set(bearer(memberKey)).set('content-type', 'application/json').send('{');
      expect([rest.status, (rest.body as { code: string }).code]).toEqual([400, 'invalid_json']);
      const mcp = await connect('/mcp', memberKey);
      expect((await mcp.listTools()).tools).toHaveLength(DATA_TOOL_NAMES.length + METRIC_TOOL_NAMES.length);
    });

    it('holds MCP bodies to the JSON body limits of every route', async () => {
      const mcp = await connect('/mcp', memberKey);
      let where: unknown = { stage: 'won' };
      for (let i = 0; i < MAX_BODY_DEPTH; i++) where = { $and: [where] };
      const deep = await mcp.callTool({ name: 'query_records', arguments: { objectName: 'deal', where } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(deep).toBeInstanceOf(StreamableHTTPError);
      expect((deep as StreamableHTTPError).code).toBe(400);
      expect((deep as Error).message).toContain('validation_failed');
      const large = await mcp
        .callTool({ name: 'query_records', arguments: { objectName: 'deal', where: { name: 'x'.repeat(3 * 1024 * 1024) } } })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect((large as StreamableHTTPError).code).toBe(413);
    });
  });
});
