import type { UIMessage } from 'ai';
import OpenAI from 'openai';
import type { ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import type { UiChatMessagesResponse } from '../../src/chats/durable/ui-chat.dto';
import type { StatelessChatResponse } from '../../src/chats/stateless/stateless-chat.dto';
import { parsedContent, sentMessages, startAppWithMockLlm } from '../support/agent-fixtures';
import { hasStatus, listen, waitForChat } from '../support/chat-helpers';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { bodyOf } from '../support/responses';
import { bearer, TestApp } from '../support/test-app';
import { createApiKey, memberSecret } from '../support/fixtures';
import { textOf, uiChat, waitUntil } from '../support/ui-chat';

const CHAT = '/api/v1/ai/agents/data_chat/chat';
const UI_CHATS = '/api/v1/ai/agents/data_chat/chats';
const BY_STAGE = {
  objectName: 'deal',
  groupBy: ['stage'],
  aggregations: [
    { function: 'count', alias: 'n' },
    { function: 'sum', field: 'amount', alias: 'total' },
  ],
};
const COUNT_BY_STAGE = { objectName: 'deal', groupBy: ['stage'], aggregations: [{ function: 'count', alias: 'n' }] };

interface ChartResult {
  spec: {
    $schema: string;
    title: string;
    data: { values: Array<Record<string, unknown>> };
    mark?: { type: string };
    hconcat?: unknown[];
    encoding?: Record<string, { field?: string; title?: string; axis?: { format?: string } }>;
  };
  source: string;
  rows: number;
}
type ChartPart = { type: 'data-chart'; id: string; data: { toolCallId: string; spec: ChartResult['spec'] } };

/** The message of a failed call's tool message, as the model reads it. */
const errorMessage = (content: string) =>
  (JSON.parse(content.slice('Tool call failed: '.length)) as { error: { message: string } }).error.message;

const markOf = (spec: ChartResult['spec']) => (spec.hconcat ? 'table' : spec.mark?.type);

/** A row as a chart holds it: as the tool returned it, without the figure references the server added. */
function withoutRefs(row: unknown): unknown {
  return Object.fromEntries(
    Object.entries(row as Record<string, unknown>).filter(([key]) => key !== 'ref' && key !== 'resultRef'),
  );
}

/** The rows a data result holds, as the tool returned them. */
function rowsOf(name: string, result: unknown): unknown[] {
  const content = result as { records?: unknown[]; rows?: unknown[]; value?: number };
  if (name === 'get_record') return [withoutRefs(result)];
  if (name === 'calculate') return [{ value: content.value }];
  return (content.records ?? content.rows ?? []).map(withoutRefs);
}

describe('Charts (visualize)', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let stageCounts: Map<string, number>;
  let dealId: string;

  const ask = (question: string) =>
    t.http
      .post(CHAT)
      .set(bearer(t.adminKey))
      .send({ messages: [{ role: 'user', content: question }] })
      .expect(200)
      .then((res) => bodyOf<StatelessChatResponse>(res));
  const svgOf = (chatId: string, toolCallId: string, key = t.adminKey) =>
    fetch(`${baseUrl}/api/v1/chats/${chatId}/charts/${toolCallId}.svg`, { headers: bearer(key) });

  /** A durable chat of `key` whose turn ran `steps`, then answered "Done."; waits until it is waiting. */
  async function durableChat(steps: Parameters<MockLlmServer['enqueue']>, key = t.adminKey): Promise<string> {
    llm.enqueue(...steps, MockReply.text('Done.'));
    const res = await t.http.post('/api/v1/chats').set(bearer(key)).send({ agent: 'data_chat', message: 'Chart it' }).expect(201);
    const id = bodyOf<ChatResponse>(res).id;
    await waitForChat(t, id, hasStatus('waiting', 'error'), key);
    return id;
  }

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true', CHAT_POLL_INTERVAL_MS: '200', SSE_KEEPALIVE_MS: '1000' } }));
    baseUrl = await listen(t);
    const rows = await t.sql<{ stage: string; n: string }>(`select stage, count(*) as n from data.deal group by stage`);
    stageCounts = new Map(rows.map((r) => [r.stage, Number(r.n)]));
    [{ id: dealId }] = await t.sql<{ id: string }>(`select id from data.deal where amount is not null order by id limit 1`);
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });
  beforeEach(() => llm.reset());
  afterEach(() => expect(llm.pendingSteps).toBe(0));

  const SOURCES: Array<{ name: string; args: Record<string, unknown>; charts: Array<[Record<string, unknown>, string]> }> = [
    {
      name: 'aggregate_data',
      args: BY_STAGE,
      charts: [
        [{}, 'point'],
        [{ y: ['n'] }, 'arc'],
        [{ type: 'bar', x: 'stage', y: ['total'] }, 'bar'],
        [{ type: 'line', x: 'stage', y: ['n'] }, 'line'],
        [{ type: 'area', x: 'stage', y: ['n', 'total'] }, 'area'],
        [{ type: 'pie', x: 'stage', y: ['total'] }, 'arc'],
        [{ type: 'scatter', x: 'n', y: ['total'] }, 'point'],
        [{ type: 'table' }, 'table'],
      ],
    },
    {
      name: 'query_metric',
      args: { metrics: ['won_revenue', 'won_deals'], timeGrain: 'quarter', from: '2025-01-01', to: '2025-12-31' },
      charts: [
        [{}, 'line'],
        [{ type: 'bar', x: 'period', y: ['won_revenue'] }, 'bar'],
        [{ type: 'area', y: ['won_deals'] }, 'area'],
        [{ type: 'pie', x: 'period', y: ['won_deals'] }, 'arc'],
        [{ type: 'scatter', x: 'won_deals', y: ['won_revenue'] }, 'point'],
        [{ type: 'table' }, 'table'],
      ],
    },
    {
      name: 'query_records',
      args: {
        objectName: 'deal',
        fields: ['name', 'amount', 'probability', 'close_date'],
        orderBy: [{ field: 'amount', order: 'desc' }],
        limit: 8,
      },
      charts: [
        [{ type: 'bar', x: 'name', y: ['amount'] }, 'bar'],
        [{ type: 'line', x: 'close_date', y: ['amount'] }, 'line'],
        [{ type: 'area', x: 'close_date', y: ['amount'] }, 'area'],
        [{ type: 'pie', x: 'name', y: ['amount'] }, 'arc'],
        [{ type: 'scatter', x: 'amount', y: ['probability'] }, 'point'],
        [{ type: 'table', x: 'name', y: ['amount'] }, 'table'],
      ],
    },
    {
      name: 'get_record',
      args: { objectName: 'deal', recordId: '$DEAL' },
      charts: [
        [{ type: 'bar', x: 'name', y: ['amount'] }, 'bar'],
        [{ type: 'line', x: 'close_date', y: ['amount'] }, 'line'],
        [{ type: 'pie', x: 'stage', y: ['probability'] }, 'arc'],
        [{ type: 'scatter', x: 'amount', y: ['probability'] }, 'point'],
        // A date on x (close_date): a line.
        [{}, 'line'],
        [{ type: 'table' }, 'table'],
      ],
    },
  ];

  it.each(SOURCES.map((s) => [s.name, s]))(
    'draws each chart type from the rows of %s: the data are the result’s rows, titled from the definitions',
    async (name, source) => {
      const args = JSON.parse(JSON.stringify(source.args).replace('$DEAL', dealId)) as Record<string, unknown>;
      llm.enqueue(
        MockReply.toolCalls([{ id: 'call_src', name, arguments: args }]),
        MockReply.toolCalls(
          source.charts.map(([request], i) => ({
            id: `call_chart_${i}`,
            name: 'visualize',
            arguments: { source: 'call_src', ...request },
          })),
        ),
        MockReply.text('Here are the charts.'),
      );
      const answer = await ask('Chart it');
      const [data, ...charts] = answer.toolCalls;
      expect(data).toMatchObject({ id: 'call_src', name, isError: false });
      const rows = rowsOf(name, data.result);
      expect(rows.length).toBeGreaterThan(0);
      expect(charts.map((c) => [c.isError, markOf((c.result as ChartResult).spec)])).toEqual(
        source.charts.map(([, mark]) => [false, mark]),
      );
      for (const call of charts) {
        const result = call.result as ChartResult;
        expect(result).toMatchObject({ source: 'call_src', rows: rows.length });
        expect(result.spec.$schema).toBe('https://vega.github.io/schema/vega-lite/v6.json');
        // Nothing the model sent: the rows of the stored result, every value as the tool returned it.
        expect(result.spec.data.values).toEqual(rows);
      }
      // The model read each chart's result (the spec with its provenance).
      const read = sentMessages(llm, 2).filter((m) => m.role === 'tool');
      expect(read.map((m) => m.tool_call_id)).toEqual(['call_src', ...charts.map((c) => c.id)]);
      for (const m of read.slice(1)) expect(parsedContent<ChartResult>(m)).toMatchObject({ source: 'call_src', spec: {} });
    },
  );

  it('takes axis titles from field labels and number formats from field types and currency codes', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_src', name: 'aggregate_data', arguments: BY_STAGE }]),
      MockReply.toolCalls([
        { id: 'call_bar', name: 'visualize', arguments: { source: 'call_src', type: 'bar', x: 'stage', y: ['total'] } },
      ]),
      MockReply.text('Done.'),
    );
    const [, chart] = (await ask('Totals by stage?')).toolCalls;
    const spec = (chart.result as ChartResult).spec;
    expect(spec.title).toBe('Total Amount by Stage');
    expect(spec.encoding?.x).toMatchObject({ field: 'stage', title: 'Stage' });
    // amount is a currency field "in USD".
    expect(spec.encoding?.y).toMatchObject({ field: 'total', title: 'Total Amount', axis: { format: '$,.2~f' } });
  });

  it('calculate: a table of its value', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_src', name: 'aggregate_data', arguments: COUNT_BY_STAGE }]),
      (req) => {
        const won = parsedContent<{ rows: Array<{ stage: string; n: number }> }>(
          (req.body!.messages as Array<{ role: string }>).filter((m) => m.role === 'tool').at(-1) as never,
        ).rows.find((r) => r.stage === 'won')!;
        return MockReply.toolCalls([{ id: 'call_calc', name: 'calculate', arguments: { expression: `${won.n} * 100` } }]);
      },
      MockReply.toolCalls([{ id: 'call_table', name: 'visualize', arguments: { source: 'call_calc' } }]),
      MockReply.text('Done.'),
    );
    const calls = (await ask('Won deals times 100?')).toolCalls;
    expect(calls[2]).toMatchObject({ name: 'visualize', isError: false });
    const result = calls[2].result as ChartResult;
    expect(markOf(result.spec)).toBe('table');
    expect(result.spec.data.values).toEqual([{ value: stageCounts.get('won')! * 100 }]);
  });

  it('answers bad references with error results the model reads, and never throws', async () => {
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_src', name: 'aggregate_data', arguments: COUNT_BY_STAGE },
        // In the same step: not an earlier result.
        { id: 'call_same_step', name: 'visualize', arguments: { source: 'call_src' } },
        {
          id: 'call_bad_src',
          name: 'aggregate_data',
          arguments: { objectName: 'nope', aggregations: [{ function: 'count', alias: 'n' }] },
        },
      ]),
      MockReply.toolCalls([
        { id: 'call_unknown', name: 'visualize', arguments: { source: 'call_invented' } },
        { id: 'call_failed', name: 'visualize', arguments: { source: 'call_bad_src' } },
        { id: 'call_column', name: 'visualize', arguments: { source: 'call_src', x: 'owner' } },
        { id: 'call_text', name: 'visualize', arguments: { source: 'call_src', y: ['stage'] } },
        { id: 'call_pie', name: 'visualize', arguments: { source: 'call_src', type: 'scatter' } },
        { id: 'call_data', name: 'visualize', arguments: { source: 'call_src', data: [{ stage: 'won', n: 1e9 }] } },
        { id: 'call_not_data', name: 'visualize', arguments: { source: 'call_unknown' } },
      ]),
      MockReply.text('Sorry.'),
    );
    const calls = (await ask('Chart it')).toolCalls;
    const codes = Object.fromEntries(
      calls.filter((c) => c.name === 'visualize').map((c) => [c.id, (c.result as { error: { code: string } }).error.code]),
    );
    expect(codes).toEqual({
      call_same_step: 'unknown_chart_source',
      call_unknown: 'unknown_chart_source',
      call_failed: 'unknown_chart_source',
      call_column: 'invalid_chart',
      call_text: 'invalid_chart',
      call_pie: 'invalid_chart',
      // Data of its own is no argument visualize takes.
      call_data: 'invalid_arguments',
      call_not_data: 'unknown_chart_source',
    });
    // What the model read: each failure, with a message naming what is wrong.
    const read = Object.fromEntries(
      sentMessages(llm, 2)
        .filter((m) => m.role === 'tool')
        .map((m) => {
          const content = String(m.content);
          expect(content.startsWith('Tool call failed: ')).toBe(m.tool_call_id !== 'call_src');
          return [m.tool_call_id!, content.startsWith('Tool call failed: ') ? errorMessage(content) : ''];
        }),
    );
    expect(read.call_column).toBe('Column "owner" (x) is not in the rows of call_src. Its columns: stage, n.');
    expect(read.call_text).toMatch(
      /^Column "stage" \(y\) holds text, not numbers; a measure must be numeric. Numeric columns: n\.$/,
    );
    expect(read.call_unknown).toMatch(/^No earlier successful data result of this turn has the tool call id "call_invented"/);
  });

  it('runs on /v1 (OpenAI-compatible): the model reads the chart’s result; the answer is the model’s text', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_src', name: 'aggregate_data', arguments: COUNT_BY_STAGE }]),
      MockReply.toolCalls([{ id: 'call_bar', name: 'visualize', arguments: { source: 'call_src', type: 'bar' } }]),
      MockReply.text('Charted.'),
    );
    const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: t.adminKey, maxRetries: 0 });
    const completion = await openai.chat.completions.create({
      model: 'data_chat',
      messages: [{ role: 'user', content: 'Deals by stage?' }],
    });
    expect(completion.choices[0].message.content).toBe('Charted.');
    const read = sentMessages(llm, 2).filter((m) => m.role === 'tool');
    const [rows, chart] = read.map((m) => parsedContent<ChartResult & { rows: unknown }>(m));
    expect(chart).toMatchObject({ source: 'call_src', rows: stageCounts.size, spec: { mark: { type: 'bar' } } });
    expect(chart.spec.data.values).toEqual((rows as unknown as { rows: unknown[] }).rows.map(withoutRefs));
  });

  it('sends a data-chart part after the chart’s output in the stateless UI message stream (read by the AI SDK’s Chat)', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_src', name: 'aggregate_data', arguments: COUNT_BY_STAGE }]),
      MockReply.toolCalls([{ id: 'call_bar', name: 'visualize', arguments: { source: 'call_src', type: 'bar' } }]),
      MockReply.text('Won leads.'),
    );
    const chat = uiChat(baseUrl, CHAT, t.adminKey);
    await chat.sendMessage({ text: 'Deals by stage?' });
    expect(chat.error).toBeUndefined();
    const answer = chat.messages[1];
    expect(answer.parts.map((p) => p.type)).toEqual([
      'step-start',
      'tool-aggregate_data',
      'step-start',
      'tool-visualize',
      'data-chart',
      'step-start',
      'text',
      'data-grounding',
    ]);
    const output = (answer.parts[3] as { output: ChartResult }).output;
    expect(answer.parts[4]).toEqual({ type: 'data-chart', id: 'call_bar', data: { toolCallId: 'call_bar', spec: output.spec } });
    expect(output.spec.data.values).toEqual((answer.parts[1] as { output: { rows: unknown[] } }).output.rows.map(withoutRefs));
  });

  it('stores the chart on a durable chat: the data-chart part in its useChat stream, its history and a resumed stream after a reload', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_src', name: 'aggregate_data', arguments: COUNT_BY_STAGE }]),
      MockReply.toolCalls([{ id: 'call_pie', name: 'visualize', arguments: { source: 'call_src' } }]),
      MockReply.text(['Most deals ', 'are lost.'], { delayMs: 800 }),
    );
    const id = `chart-chat-${Date.now().toString(36)}`;
    const first = uiChat(baseUrl, UI_CHATS, t.adminKey, { id });
    const sending = first.sendMessage({ text: 'Deals by stage?' });
    // A reload while the answer is being written: the history so far, then the resumed stream.
    await llm.waitForRequests(3);
    const history = async () =>
      bodyOf<UiChatMessagesResponse>(await t.http.get(`${UI_CHATS}/${id}/messages`).set(bearer(t.adminKey)).expect(200)).messages;
    const reloaded = uiChat(baseUrl, UI_CHATS, t.adminKey, { id, messages: await history() });
    await Promise.all([sending, reloaded.resumeStream()]);
    await waitUntil(() => reloaded.status === 'ready', 'the resumed stream to end');

    const chartOf = (message: UIMessage) => message.parts.find((p) => p.type === 'data-chart') as ChartPart | undefined;
    const chart = chartOf(first.messages[1])!;
    expect(chart).toMatchObject({ id: 'call_pie', data: { toolCallId: 'call_pie', spec: { mark: { type: 'arc' } } } });
    expect(chartOf(reloaded.messages[1])).toEqual(chart);
    expect(textOf(reloaded.messages[1])).toBe('Most deals are lost.');
    const stored = await history();
    expect(chartOf(stored[1] as UIMessage)).toEqual(chart);
    expect(stored).toEqual(first.messages);

    // The chat API's messages hold the visualize result with its spec.
    const chatId = (await t.sql<{ id: string }>(`select id from chats where client_id = $1`, [id]))[0].id;
    const messages = bodyOf<ChatMessagesResponse>(
      await t.http.get(`/api/v1/chats/${chatId}/messages`).set(bearer(t.adminKey)).expect(200),
    ).messages;
    const result = messages
      .flatMap((m) => m.parts as Array<{ type: string; toolCallId?: string }>)
      .find((p) => p.type === 'tool-result' && p.toolCallId === 'call_pie');
    expect(result).toMatchObject({
      toolName: 'visualize',
      output: { spec: chart.data.spec, source: 'call_src', rows: stageCounts.size },
    });
  });

  describe('GET /api/v1/chats/:id/charts/:toolCallId.svg', () => {
    let chatId: string;

    beforeAll(async () => {
      llm.reset();
      chatId = await durableChat([
        MockReply.toolCalls([{ id: 'call_src', name: 'aggregate_data', arguments: COUNT_BY_STAGE }]),
        MockReply.toolCalls([{ id: 'call_bar', name: 'visualize', arguments: { source: 'call_src', type: 'bar' } }]),
      ]);
    });

    it('renders the stored chart as SVG on the server: one bar per group, left to right by value, heights as the values', async () => {
      const res = await svgOf(chatId, 'call_bar');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
      expect(res.headers.get('content-security-policy')).toBe("default-src 'none'; style-src 'unsafe-inline'");
      const svg = await res.text();
      expect(svg).toMatch(/^<svg[\s\S]*<\/svg>$/);
      // The bars: the paths of the rect mark's group, `d="M<x>,<top>h<width>v<height>..."`.
      const marks = /<g class="mark-rect role-mark marks"[^>]*>([\s\S]*?)<\/g>/.exec(svg)![1];
      const bars = [
        ...marks.matchAll(/<path aria-label="Stage: (\w+); Count: ([\d,]+)"[^>]*d="M([\d.]+),[\d.]+h[\d.]+v([\d.]+)/g),
      ]
        .map((m) => ({ stage: m[1], count: Number(m[2].replace(/,/g, '')), x: Number(m[3]), height: Number(m[4]) }))
        .sort((a, b) => a.x - b.x);
      expect(marks.match(/<path/g)).toHaveLength(stageCounts.size);
      expect(bars).toHaveLength(stageCounts.size);
      for (const bar of bars) expect(bar.count).toBe(stageCounts.get(bar.stage));
      const expected = [...stageCounts].sort((a, b) => b[1] - a[1]).map(([stage]) => stage);
      expect(bars.map((b) => b.stage)).toEqual(expected);
      const heights = bars.map((b) => b.height);
      expect(heights).toEqual([...heights].sort((a, b) => b - a));
      expect(heights.at(-1)! / heights[0]).toBeCloseTo(bars.at(-1)!.count / bars[0].count, 2);
    });

    it('is 404 for another owner’s chat, an unknown call id, and a call that drew no chart', async () => {
      const other = (await createApiKey(t, { name: 'other owner', role: 'member', subject: 'someone-else' })).secret;
      const notFound = async (res: Response, code: string) => {
        expect(res.status).toBe(404);
        expect(((await res.json()) as { code: string }).code).toBe(code);
      };
      await notFound(await svgOf(chatId, 'call_bar', other), 'chat_not_found');
      await notFound(await svgOf(chatId, 'call_nope'), 'chart_not_found');
      await notFound(await svgOf(chatId, 'call_src'), 'chart_not_found');
      await notFound(await svgOf(chatId, 'call%00bar'), 'chart_not_found');
      await notFound(await svgOf('00000000-0000-4000-8000-000000000000', 'call_bar'), 'chat_not_found');
    });

    it('is 404 for a key of the same owner whose access would have the chart’s result withheld', async () => {
      await t.http
        .post('/api/v1/policies')
        .set(bearer(t.adminKey))
        .send({ name: 'no-amounts', objects: { deal: { read: true, hiddenFields: ['amount'] } } })
        .expect(201);
      const create = (name: string, policies: string[]) => memberSecret(t, name, { subject: 'pat', policies });
      const wide = await create('pat laptop', []);
      const narrow = await create('pat kiosk', ['no-amounts']);
      const id = await durableChat(
        [
          MockReply.toolCalls([{ id: 'call_src', name: 'aggregate_data', arguments: BY_STAGE }]),
          MockReply.toolCalls([
            { id: 'call_bar', name: 'visualize', arguments: { source: 'call_src', type: 'bar', y: ['total'] } },
          ]),
        ],
        wide,
      );
      expect((await svgOf(id, 'call_bar', wide)).status).toBe(200);
      const hidden = await svgOf(id, 'call_bar', narrow);
      expect(hidden.status).toBe(404);
      expect(((await hidden.json()) as { code: string }).code).toBe('chart_not_found');
    });
  });
});
