import { ToolRegistry } from '../tool.registry';
import type { ToolContext, TurnDataResult } from '../tool.types';
import { buildChart, VEGA_LITE_SCHEMA, type ChartRequest } from './chart-spec';
import { renderChartSvg } from './chart-svg';
import { createVisualizeTool } from './visualize.tool';

const BY_STAGE: TurnDataResult = {
  toolCallId: 'call_stage',
  name: 'aggregate_data',
  arguments: {
    objectName: 'deal',
    groupBy: ['stage'],
    aggregations: [
      { function: 'count', alias: 'n' },
      { function: 'sum', field: 'amount', alias: 'total' },
      { function: 'avg', field: 'amount', alias: 'average' },
    ],
  },
  content: {
    count: 4,
    rows: [
      { stage: 'won', n: 451, total: '344260723.50', average: 763327.55 },
      { stage: 'lost', n: 419, total: '120000', average: 286396.18 },
      { stage: 'open', n: 900, total: '99000.25', average: 110.0 },
      { stage: 'qualified', n: 230, total: '5000', average: 21.74 },
    ],
  },
  columns: {
    n: { kind: 'count', aggregate: 'count' },
    total: { kind: 'money', currency: 'EUR', aggregate: 'sum' },
    average: { kind: 'money', currency: 'USD', aggregate: 'avg' },
  },
  labels: { stage: 'Stage', n: 'Count', total: 'Total Amount', average: 'Average Amount' },
};

const BY_MONTH: TurnDataResult = {
  toolCallId: 'call_month',
  name: 'query_metric',
  arguments: { metrics: ['revenue'], timeGrain: 'month' },
  content: {
    rows: [
      { period: '2026-01-01', owner: 'ann', revenue: 10 },
      { period: '2026-01-01', owner: 'bob', revenue: 12 },
      { period: '2026-02-01', owner: 'ann', revenue: 14 },
      { period: '2026-02-01', owner: 'bob', revenue: 9 },
    ],
  },
  columns: { revenue: { kind: 'money', currency: 'USD', aggregate: 'sum' } },
  labels: { revenue: 'Revenue', period: 'Period' },
};

const stages = (count: number, extra: Record<string, unknown> = {}): TurnDataResult => ({
  ...BY_STAGE,
  content: { rows: Array.from({ length: count }, (_, i) => ({ stage: `stage ${i}`, n: i + 1 })), ...extra },
});

/** A spec read as plain JSON, for assertions. */
interface Spec {
  $schema: string;
  title: string;
  data: { values: unknown[]; format?: unknown };
  transform?: unknown[];
  hconcat?: unknown[];
  mark: { type: string };
  encoding: Record<string, Record<string, unknown> & { legend?: { labelExpr: string }; axis?: unknown }>;
}
const chart = (result: TurnDataResult, request: ChartRequest = {}) => buildChart(result, request) as unknown as Spec;
const markOf = (spec: Spec) => (spec.hconcat ? 'table' : spec.mark.type);

describe('visualize: the chart a result’s shape gives', () => {
  it.each<[string, TurnDataResult, ChartRequest, string]>([
    ['time on x: a line', BY_MONTH, {}, 'line'],
    ['counts of up to 6 groups, every group there: a pie', stages(6), {}, 'arc'],
    ['7 to 20 groups: bars', stages(7), {}, 'bar'],
    ['groups of a result cut short (a limit reached): bars', stages(4, { note: 'more groups' }), {}, 'bar'],
    ['an average is no part of a whole: bars', BY_STAGE, { y: ['average'] }, 'bar'],
    ['more than 20 groups: a table', stages(21), {}, 'table'],
    [
      'two measures: a scatter',
      {
        ...BY_STAGE,
        content: {
          rows: [
            { a: 1, b: 2 },
            { a: 3, b: 4 },
          ],
        },
      },
      {},
      'point',
    ],
    ['three measures per group: a table', BY_STAGE, {}, 'table'],
  ])('%s', (_, result, request, mark) => {
    expect(markOf(chart(result, request))).toBe(mark);
  });

  it('draws bars sorted by the measure, titled with labels, formatted by unit, over the rows as they are', () => {
    const spec = chart(BY_STAGE, { type: 'bar', x: 'stage', y: ['total'] });
    expect(spec.$schema).toBe(VEGA_LITE_SCHEMA);
    expect(spec.data.values).toEqual((BY_STAGE.content as { rows: unknown[] }).rows);
    // Numeric text (PostgreSQL numerics) read as numbers.
    expect(spec.data.format).toEqual({ parse: { total: 'number' } });
    expect(spec.title).toBe('Total Amount by Stage');
    expect(spec.encoding.x).toEqual({ field: 'stage', type: 'nominal', title: 'Stage', sort: '-y' });
    expect(spec.encoding.y).toEqual({
      field: 'total',
      type: 'quantitative',
      title: 'Total Amount (EUR)',
      axis: { format: ',.2~f' },
    });
    expect(chart(BY_STAGE, { type: 'bar', y: ['average'] }).encoding.y.axis).toEqual({ format: '$,.2~f' });
    expect(chart(BY_STAGE, { type: 'bar', y: ['n'], title: 'Deals' }).title).toBe('Deals');
  });

  it('splits a line by a short list of text values, with the time grain as the axis format', () => {
    const spec = chart(BY_MONTH);
    expect(spec.encoding.x).toEqual({ field: 'period', type: 'temporal', title: 'Period', axis: { format: '%b %Y' } });
    expect(spec.encoding.color).toEqual({ field: 'owner', type: 'nominal', title: 'owner' });
    expect(markOf(chart(BY_MONTH, { type: 'area' }))).toBe('area');
  });

  it('folds several measures into one y, coloured by measure with their labels', () => {
    const spec = chart(BY_STAGE, { type: 'bar', x: 'stage', y: ['n', 'average'] });
    expect(spec.transform).toEqual([{ fold: ['n', 'average'], as: ['measure', 'value'] }]);
    expect(spec.encoding.color.legend?.labelExpr).toBe(
      'datum.label === "n" ? "Count" : datum.label === "average" ? "Average Amount" : datum.label',
    );
  });

  it('escapes a dot in a column name: a name, not a path', () => {
    const result = { ...BY_STAGE, content: { rows: [{ 'account.industry': 'Retail', n: 3 }] } };
    expect(chart(result, { type: 'bar' }).encoding.x.field).toBe('account\\.industry');
  });

  it.each<[string, ChartRequest, string]>([
    [
      'a column not in the rows',
      { x: 'owner' },
      'Column "owner" (x) is not in the rows of call_stage. Its columns: stage, n, total, average.',
    ],
    ['text as a measure', { y: ['stage'] }, 'Column "stage" (y) holds text, not numbers'],
    [
      'a pie of two measures',
      { type: 'pie', y: ['n', 'total'] },
      'A pie chart needs a category column (x) and exactly one numeric y',
    ],
    ['a scatter of text', { type: 'scatter', x: 'stage' }, 'Column "stage" (x) holds text'],
  ])('refuses %s with invalid_chart', (_, request, message) => {
    expect(() => buildChart(BY_STAGE, request)).toThrow(message);
  });
});

describe('visualize (the tool)', () => {
  const registry = new ToolRegistry();
  registry.register(createVisualizeTool());
  const results = new Map<string, TurnDataResult>([[BY_STAGE.toolCallId, BY_STAGE]]);
  const ctx = (withEvidence = true): ToolContext => ({
    signal: new AbortController().signal,
    ...(withEvidence
      ? { evidence: { supportOf: () => undefined, dataResult: (id: string) => Promise.resolve(results.get(id)) } }
      : {}),
  });
  const run = (args: Record<string, unknown>, withEvidence = true) =>
    registry.execute({ id: 'call_chart', name: 'visualize', arguments: args }, ctx(withEvidence));

  it('returns the spec with its provenance', async () => {
    const result = await run({ source: 'call_stage', type: 'pie', x: 'stage', y: ['n'] });
    expect(result.isError).toBe(false);
    expect(result.content).toMatchObject({ source: 'call_stage', rows: 4, spec: { mark: { type: 'arc' } } });
  });

  it('refuses a chart past the tool output cap rather than have it cut to a preview', async () => {
    const wide = { toolCallId: 'call_wide', name: 'query_records', content: { records: [] as unknown[] } };
    for (let i = 0; i < 200; i++) wide.content.records.push({ name: `deal ${i} ${'x'.repeat(60)}`, amount: i });
    results.set('call_wide', wide);
    const result = await run({ source: 'call_wide', type: 'table' });
    expect(result.content).toMatchObject({
      error: { code: 'invalid_chart', message: expect.stringContaining('16 KB') as unknown },
    });
  });

  it.each([
    ['an unknown call id', { source: 'call_nope' }, true, 'unknown_chart_source'],
    ['outside a chat turn', { source: 'call_stage' }, false, 'unknown_chart_source'],
    ['a column not in the rows', { source: 'call_stage', y: ['amount'] }, true, 'invalid_chart'],
    ['a type it does not know', { source: 'call_stage', type: 'radar' }, true, 'invalid_arguments'],
  ])('answers %s with an error result the model reads', async (_, args, withEvidence, code) => {
    const result = await run(args, withEvidence);
    expect(result.isError).toBe(true);
    expect(result.content).toMatchObject({ error: { code } });
  });

  it('name, description and parameters (hidden from listings, like calculate)', () => {
    const tool = createVisualizeTool();
    expect(tool.scope).toBe('platform');
    expect({ name: tool.name, description: tool.description, parameters: tool.parameters }).toMatchSnapshot();
  });
});

describe('renderChartSvg', () => {
  it('draws one bar per group, heights ordered as the values, without a browser', async () => {
    const svg = await renderChartSvg(buildChart(BY_STAGE, { type: 'bar', x: 'stage', y: ['n'] }));
    expect(svg.startsWith('<svg')).toBe(true);
    // Each bar: `d="M<x>,<top>h<width>v<height>..."`.
    const bars = [...svg.matchAll(/<path aria-label="Stage: (\w+); Count: ([\d,]+)"[^>]*d="M([\d.]+),[\d.]+h[\d.]+v([\d.]+)/g)]
      .map((m) => ({ stage: m[1], count: Number(m[2].replace(',', '')), x: Number(m[3]), height: Number(m[4]) }))
      .sort((a, b) => a.x - b.x);
    // Left to right by count, each as tall as its count.
    expect(bars.map((b) => b.stage)).toEqual(['open', 'won', 'lost', 'qualified']);
    const heights = bars.map((b) => b.height);
    expect(heights).toEqual([...heights].sort((a, b) => b - a));
    for (const bar of bars) expect(bar.height / bars[0].height).toBeCloseTo(bar.count / bars[0].count, 2);
  });

  it('writes text of the rows and the title as text, never as markup', async () => {
    const result = { ...BY_STAGE, content: { rows: [{ stage: '<script>alert(1)</script>', n: 1 }] } };
    const svg = await renderChartSvg(buildChart(result, { type: 'bar', title: '<img src=x onerror=alert(1)>' }));
    expect(svg).not.toMatch(/<script|<img/);
    expect(svg).toContain('&lt;script&gt;');
  });

  it('renders every chart type', async () => {
    for (const request of [
      { type: 'line' },
      { type: 'area' },
      { type: 'pie' },
      { type: 'scatter' },
      { type: 'table' },
    ] as const) {
      const svg = await renderChartSvg(buildChart(request.type === 'scatter' ? BY_STAGE : BY_MONTH, { ...request }));
      expect(svg).toMatch(/^<svg[\s\S]*<\/svg>$/);
    }
  });
});
