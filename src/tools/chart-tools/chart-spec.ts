import { DomainError } from '../../common/domain-error';
import { resultRows, withoutRefKeys } from '../result-refs';
import type { TurnDataResult } from '../tool.types';

export const CHART_TYPES = ['bar', 'line', 'area', 'pie', 'scatter', 'table'] as const;
export type ChartType = (typeof CHART_TYPES)[number];

/** What the model asks for: which earlier result, and optionally how to draw it. */
export interface ChartRequest {
  type?: ChartType;
  x?: string;
  y?: string[];
  series?: string;
  title?: string;
}

/** A Vega-Lite spec (v6), as JSON. */
export type VegaLiteSpec = Record<string, unknown>;

export const VEGA_LITE_SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';

/** Most groups a bar chart chosen by shape shows; a pie, at most PIE_MAX. */
const BAR_MAX = 20;
const PIE_MAX = 6;
/** Most lines a series splits a line chart into when chosen by shape. */
const SERIES_MAX = 10;
const WIDTH = 480;
const HEIGHT = 300;

type ColumnType = 'temporal' | 'quantitative' | 'nominal';

interface Column {
  name: string;
  type: ColumnType;
  /** Some value is a numeric string (a numeric column as PostgreSQL returns it): parsed as a number. */
  numericText: boolean;
  distinct: number;
  nonNegative: boolean;
  uuid: boolean;
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;
const NUMERIC = /^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Bookkeeping stamps say when a record was stored: never the time axis unless asked for. */
const STAMPS = new Set(['created_at', 'updated_at', 'periodStart', 'periodEnd']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The rows of a data result as the tool returned them, without the references the server added to each. */
export function rowsOf(result: Pick<TurnDataResult, 'name' | 'content'>): Record<string, unknown>[] {
  const content = result.content;
  if (result.name === 'calculate') return isRecord(content) ? [{ value: content.value }] : [];
  return resultRows(content).map(withoutRefKeys);
}

/** Whether the result holds every row of its question (no limit reached, nothing cut by the output cap). */
function complete(content: unknown): boolean {
  return !isRecord(content) || (content.note === undefined && content.hasMore !== true && content.truncated !== true);
}

function describeColumn(name: string, rows: readonly Record<string, unknown>[]): Column | undefined {
  const values = rows.map((row) => row[name]).filter((v) => v !== null && v !== undefined);
  if (values.some((v) => typeof v === 'object')) return undefined;
  const numbers = values.every((v) => typeof v === 'number' || (typeof v === 'string' && NUMERIC.test(v.trim())));
  const dates = values.every((v) => typeof v === 'string' && ISO_DATE.test(v));
  const type: ColumnType =
    values.length && dates ? 'temporal' : values.length && numbers && values.some((v) => v !== '') ? 'quantitative' : 'nominal';
  return {
    name,
    type,
    numericText: type === 'quantitative' && values.some((v) => typeof v === 'string'),
    distinct: new Set(values.map((v) => String(v as string | number | boolean))).size,
    nonNegative: type === 'quantitative' && values.every((v) => Number(v) >= 0),
    uuid: values.length > 0 && values.every((v) => typeof v === 'string' && UUID.test(v)),
  };
}

/** The scalar columns of the rows, in the order they first appear. */
function columnsOf(rows: readonly Record<string, unknown>[]): Map<string, Column> {
  const names = new Set<string>();
  for (const row of rows) Object.keys(row).forEach((k) => names.add(k));
  const columns = new Map<string, Column>();
  for (const name of names) {
    const column = describeColumn(name, rows);
    if (column) columns.set(name, column);
  }
  return columns;
}

/** A field reference for Vega-Lite: a dot in a column name ("account.industry") is part of the name, not a path. */
function fieldRef(name: string): string {
  return name.replace(/[\\.[\]]/g, (c) => `\\${c}`);
}

/** How a measure's numbers read: axis format and the unit its title adds. */
function numberFormat(result: TurnDataResult, column: string): { format: string; unit?: string } {
  const meaning = result.columns?.[column];
  switch (meaning?.kind) {
    case 'money':
      if (meaning.currency === 'USD') return { format: '$,.2~f' };
      return { format: ',.2~f', unit: meaning.currency };
    case 'percent':
      return { format: ',.1~f', unit: '%' };
    case 'ratio':
      return { format: '.1~%' };
    case 'count':
      return { format: ',d' };
    default:
      return { format: ',.2~f' };
  }
}

/** Whether a measure's values add up to a whole (counts and sums): what a pie can show. */
function additive(result: TurnDataResult, column: string): boolean {
  if (result.name === 'aggregate_data') {
    const aggregations = isRecord(result.arguments) ? result.arguments.aggregations : undefined;
    const agg: unknown = Array.isArray(aggregations)
      ? (aggregations as unknown[]).find((a) => isRecord(a) && a.alias === column)
      : undefined;
    return isRecord(agg) && (agg.function === 'count' || agg.function === 'sum');
  }
  const aggregate = result.columns?.[column]?.aggregate;
  return aggregate === 'count' || aggregate === 'sum';
}

function timeFormat(result: TurnDataResult): string | undefined {
  const grain = isRecord(result.arguments) ? result.arguments.timeGrain : undefined;
  return { month: '%b %Y', quarter: 'Q%q %Y', year: '%Y', week: '%Y-%m-%d', day: '%Y-%m-%d' }[String(grain)];
}

function invalid(message: string, details?: unknown): DomainError {
  return new DomainError('invalid_chart', message, details);
}

/**
 * A Vega-Lite spec over the rows of one data result: its data are those rows, inline and unchanged;
 * titles come from the columns' labels and number formats from what their numbers are. Without a
 * type the shape decides: time on x → line; one category with at most 20 values → bar sorted by the
 * measure, or a pie when the measure adds up to a whole over at most 6 of them; two measures →
 * scatter; otherwise a table. A bad reference (a column not in the rows, text as a measure) is an
 * `invalid_chart` error naming the columns there are.
 */
export function buildChart(result: TurnDataResult, request: ChartRequest): VegaLiteSpec {
  const rows = rowsOf(result);
  if (!rows.length) throw invalid(`The result of ${result.toolCallId} has no rows to chart.`);
  const columns = columnsOf(rows);
  const known = [...columns.keys()];
  const column = (name: string, role: string): Column => {
    const found = columns.get(name);
    if (!found)
      throw invalid(
        `Column "${name}" (${role}) is not in the rows of ${result.toolCallId}. Its columns: ${known.join(', ') || 'none'}.`,
        { column: name, columns: known },
      );
    return found;
  };
  const measure = (name: string, role: string): Column => {
    const found = column(name, role);
    if (found.type !== 'quantitative') {
      const numeric = [...columns.values()].filter((c) => c.type === 'quantitative').map((c) => c.name);
      throw invalid(
        `Column "${name}" (${role}) holds ${found.type === 'temporal' ? 'dates' : 'text'}, not numbers; a measure must be numeric. ` +
          `Numeric columns: ${numeric.join(', ') || 'none'}.`,
        { column: name, numericColumns: numeric },
      );
    }
    return found;
  };
  const x = request.x === undefined ? undefined : column(request.x, 'x');
  const series = request.series === undefined ? undefined : column(request.series, 'series');
  const y = request.y?.map((name) => measure(name, 'y'));
  const used = new Set([x?.name, series?.name].filter(Boolean));
  const free = [...columns.values()].filter((c) => !used.has(c.name));
  const time = x?.type === 'temporal' ? x : x ? undefined : free.find((c) => c.type === 'temporal' && !STAMPS.has(c.name));
  const category =
    x?.type === 'nominal' ? x : x ? undefined : free.find((c) => c.type === 'nominal' && !c.uuid && c.name !== 'id');
  const measures = y ?? free.filter((c) => c.type === 'quantitative' && c !== x);

  const type = request.type ?? chooseType(result, rows, { x, time, category, measures });
  const ctx: ChartContext = { result, rows, request, columns };
  switch (type) {
    case 'line':
    case 'area': {
      const axis = x ?? time ?? category;
      if (!axis || !measures.length) throw needs(type, 'an x column (a date or a category) and a numeric y', known);
      const split = series ?? (request.type || measures.length > 1 ? undefined : autoSeries(free, axis, measures));
      return xyChart(ctx, type, axis, measures, split);
    }
    case 'bar': {
      const axis = x ?? category ?? time;
      if (!axis || !measures.length) throw needs(type, 'an x column (a category or a date) and a numeric y', known);
      return xyChart(ctx, 'bar', axis, measures, series);
    }
    case 'pie': {
      const slice = x ?? series ?? category;
      if (!slice || measures.length !== 1) throw needs(type, 'a category column (x) and exactly one numeric y', known);
      return pieChart(ctx, slice, measures[0]);
    }
    case 'scatter': {
      const horizontal = x ? measure(x.name, 'x') : measures[0];
      const vertical = (y ?? measures).filter((m) => m !== horizontal)[0];
      if (!horizontal || !vertical) throw needs(type, 'two numeric columns (x and y)', known);
      return scatterChart(ctx, horizontal, vertical, series ?? category);
    }
    case 'table':
      return tableChart(ctx, x || y ? [x, ...(y ?? [])].filter((c): c is Column => !!c) : [...columns.values()]);
  }
}

function needs(type: ChartType, what: string, known: string[]): DomainError {
  return invalid(`A ${type} chart needs ${what}. The rows' columns: ${known.join(', ') || 'none'}.`, { columns: known });
}

function chooseType(
  result: TurnDataResult,
  rows: readonly Record<string, unknown>[],
  shape: { x?: Column; time?: Column; category?: Column; measures: Column[] },
): ChartType {
  const { x, time, category, measures } = shape;
  if (time && measures.length) return 'line';
  if (category && measures.length === 1) {
    const [m] = measures;
    // One row per group, every group there, none negative: the parts of a whole.
    const whole = m.nonNegative && additive(result, m.name) && complete(result.content) && category.distinct === rows.length;
    if (whole && category.distinct <= PIE_MAX) return 'pie';
    if (category.distinct <= BAR_MAX) return 'bar';
  }
  if (x?.type === 'quantitative' && measures.length === 1) return 'scatter';
  if (!x && measures.length === 2) return 'scatter';
  return 'table';
}

/** A category to split lines by: a short list of text values (an owner, a stage). */
function autoSeries(free: Column[], axis: Column, measures: Column[]): Column | undefined {
  return free.find(
    (c) => c !== axis && !measures.includes(c) && c.type === 'nominal' && !c.uuid && c.distinct > 1 && c.distinct <= SERIES_MAX,
  );
}

interface ChartContext {
  result: TurnDataResult;
  rows: Record<string, unknown>[];
  request: ChartRequest;
  columns: Map<string, Column>;
}

function label(ctx: ChartContext, column: Column): string {
  return ctx.result.labels?.[column.name] ?? column.name;
}

/** A measure's title with its unit ("Total Amount (EUR)"). */
function measureTitle(ctx: ChartContext, column: Column): string {
  const { unit } = numberFormat(ctx.result, column.name);
  return unit ? `${label(ctx, column)} (${unit})` : label(ctx, column);
}

/** The rows inline, as they are; numeric text parsed as numbers. */
function data(ctx: ChartContext): Record<string, unknown> {
  const parse: Record<string, string> = {};
  for (const column of ctx.columns.values()) if (column.numericText) parse[fieldRef(column.name)] = 'number';
  return Object.keys(parse).length ? { values: ctx.rows, format: { parse } } : { values: ctx.rows };
}

function base(ctx: ChartContext, title: string): VegaLiteSpec {
  return { $schema: VEGA_LITE_SCHEMA, title: ctx.request.title ?? title, data: data(ctx) };
}

function axisEncoding(
  ctx: ChartContext,
  column: Column,
  mark: 'bar' | 'line' | 'area',
  sortBy?: string,
): Record<string, unknown> {
  const title = label(ctx, column);
  if (column.type === 'temporal' && mark !== 'bar') {
    const format = timeFormat(ctx.result);
    return { field: fieldRef(column.name), type: 'temporal', title, ...(format ? { axis: { format } } : {}) };
  }
  // Bars stand side by side per value: dates as ordered values (ISO text sorts by time).
  if (column.type === 'temporal' || column.type === 'quantitative')
    return { field: fieldRef(column.name), type: 'ordinal', title };
  return { field: fieldRef(column.name), type: 'nominal', title, ...(sortBy ? { sort: sortBy } : {}) };
}

function tooltip(ctx: ChartContext, columns: Column[]): Record<string, unknown>[] {
  return columns.map((c) => ({
    field: fieldRef(c.name),
    type: c.type === 'quantitative' ? 'quantitative' : c.type === 'temporal' ? 'temporal' : 'nominal',
    title: label(ctx, c),
    ...(c.type === 'quantitative' ? { format: numberFormat(ctx.result, c.name).format } : {}),
  }));
}

/** Bars, lines or areas: one measure as y (split by a series), or several folded into one y coloured by measure. */
function xyChart(
  ctx: ChartContext,
  mark: 'bar' | 'line' | 'area',
  axis: Column,
  measures: Column[],
  series?: Column,
): VegaLiteSpec {
  const title = `${measures.map((m) => label(ctx, m)).join(', ')} by ${label(ctx, axis)}`;
  const markDef = mark === 'line' ? { type: 'line', point: true } : { type: mark };
  const size = { width: WIDTH, height: HEIGHT };
  if (measures.length === 1) {
    const [m] = measures;
    const { format } = numberFormat(ctx.result, m.name);
    return {
      ...base(ctx, title),
      ...size,
      mark: markDef,
      encoding: {
        // Bars of one category sorted by their value, largest first.
        x: axisEncoding(ctx, axis, mark, mark === 'bar' && !series ? '-y' : undefined),
        y: { field: fieldRef(m.name), type: 'quantitative', title: measureTitle(ctx, m), axis: { format } },
        ...(series ? { color: { field: fieldRef(series.name), type: 'nominal', title: label(ctx, series) } } : {}),
        ...(series && mark === 'bar' ? { xOffset: { field: fieldRef(series.name) } } : {}),
        tooltip: tooltip(ctx, [axis, ...(series ? [series] : []), m]),
      },
    };
  }
  const { format } = numberFormat(ctx.result, measures[0].name);
  const names = measures.map((m) => m.name);
  // The legend shows each measure's label, not its column name.
  const labelExpr = measures.reduceRight(
    (rest, m) => `datum.label === ${JSON.stringify(m.name)} ? ${JSON.stringify(measureTitle(ctx, m))} : ${rest}`,
    'datum.label',
  );
  return {
    ...base(ctx, title),
    ...size,
    transform: [{ fold: names.map(fieldRef), as: ['measure', 'value'] }],
    mark: markDef,
    encoding: {
      x: axisEncoding(ctx, axis, mark),
      y: { field: 'value', type: 'quantitative', title: measures.map((m) => measureTitle(ctx, m)).join(', '), axis: { format } },
      color: { field: 'measure', type: 'nominal', title: null, scale: { domain: names }, legend: { labelExpr } },
      ...(mark === 'bar' ? { xOffset: { field: 'measure' } } : {}),
      tooltip: [...tooltip(ctx, [axis]), { field: 'measure', type: 'nominal' }, { field: 'value', type: 'quantitative', format }],
    },
  };
}

function pieChart(ctx: ChartContext, slice: Column, m: Column): VegaLiteSpec {
  return {
    ...base(ctx, `${label(ctx, m)} by ${label(ctx, slice)}`),
    width: HEIGHT,
    height: HEIGHT,
    mark: { type: 'arc' },
    encoding: {
      theta: { field: fieldRef(m.name), type: 'quantitative', title: measureTitle(ctx, m), stack: true },
      color: {
        field: fieldRef(slice.name),
        type: 'nominal',
        title: label(ctx, slice),
        sort: { field: fieldRef(m.name), order: 'descending' },
      },
      order: { field: fieldRef(m.name), type: 'quantitative', sort: 'descending' },
      tooltip: tooltip(ctx, [slice, m]),
    },
  };
}

function scatterChart(ctx: ChartContext, horizontal: Column, vertical: Column, group?: Column): VegaLiteSpec {
  const axis = (c: Column) => ({
    field: fieldRef(c.name),
    type: 'quantitative',
    title: measureTitle(ctx, c),
    axis: { format: numberFormat(ctx.result, c.name).format },
  });
  const colored = group && group.distinct <= SERIES_MAX ? group : undefined;
  return {
    ...base(ctx, `${label(ctx, vertical)} against ${label(ctx, horizontal)}`),
    width: WIDTH,
    height: HEIGHT,
    mark: { type: 'point', filled: true },
    encoding: {
      x: axis(horizontal),
      y: axis(vertical),
      ...(colored ? { color: { field: fieldRef(colored.name), type: 'nominal', title: label(ctx, colored) } } : {}),
      tooltip: tooltip(ctx, [...(group ? [group] : []), horizontal, vertical]),
    },
  };
}

/** A table as Vega-Lite draws one: a column of text marks per column, one line per row. */
function tableChart(ctx: ChartContext, columns: Column[]): VegaLiteSpec {
  return {
    ...base(ctx, columns.map((c) => label(ctx, c)).join(', ')),
    transform: [{ window: [{ op: 'row_number', as: '_row' }] }],
    hconcat: columns.map((c) => ({
      width: 120,
      title: measureTitle(ctx, c),
      mark: { type: 'text', align: c.type === 'quantitative' ? 'right' : 'left' },
      encoding: {
        y: { field: '_row', type: 'ordinal', axis: null },
        text: {
          field: fieldRef(c.name),
          type: c.type === 'quantitative' ? 'quantitative' : 'nominal',
          ...(c.type === 'quantitative' ? { format: numberFormat(ctx.result, c.name).format } : {}),
        },
      },
    })),
  };
}
