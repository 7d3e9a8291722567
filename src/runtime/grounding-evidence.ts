/**
 * The evidence of a turn: the cells of the rows its data tools returned, each with what its column
 * means (money in a currency, a percentage, a ratio, a count) and with the values that name its row
 * (an owner, a stage, a period), including the filter the call applied. Text that only describes
 * the data (object and metric definitions) is kept apart: it is never evidence.
 */
import { fieldTypeOf } from '../metadata/field-types';
import type { FieldMeta } from '../metadata/object-metadata.types';
import type { MetricDefinition } from '../metrics/metric.types';
import type { ToolResultKind } from '../tools/tool.types';
import { currencyCodeIn, readText } from './grounding-figures';

/** A tool call's result as grounding reads it. */
export interface GroundingSource {
  toolCallId: string;
  /** The tool; absent = a data result. */
  name?: string;
  /** What the tool declares its result holds (ToolDefinition.holds): rows and values are data, the rest describes. */
  holds?: ToolResultKind;
  /** The arguments the model passed (a filter names the rows' values; a grain, their periods). */
  arguments?: unknown;
  /** The parsed JSON (or raw text) the model read. */
  content: unknown;
  /** What each column means, from metadata (see `describeColumns`). */
  columns?: Record<string, ColumnMeaning>;
  /** Each column's label from metadata (see `describeLabels`): a chart's axis titles. */
  labels?: Record<string, string>;
}

/** What the numbers of a column are: the unit an answer must state them in. `any`: not known. */
export type ColumnKind = 'money' | 'percent' | 'ratio' | 'count' | 'number' | 'any';

export interface ColumnMeaning {
  kind: ColumnKind;
  /** ISO 4217 code of a money column, when its metadata names one. */
  currency?: string;
  /** Values that every number of the column is about (a metric's filter: stage = won). */
  context?: Record<string, string[]>;
  /** What a count counts (an object name), for "12 accounts" against a count of deals. */
  counts?: string;
  /** The aggregate that made the numbers, for "the average deal" against a sum. */
  aggregate?: string;
}

/** A period a row is about: a date cell, a time bucket, or the from/to of the call. */
export interface RowPeriod {
  from: string;
  to: string;
  grain: string;
}

/** A row of a data result (or the result's own top-level values). */
export interface EvidenceRow {
  source: GroundingSource;
  /** Index in the result's list of rows; absent for the result's top-level values (and a single record). */
  index?: number;
  /** The values that name the row, by dimension (lower-case last segment of the column: `industry`). */
  labels: Map<string, Set<string>>;
  /** The row's own dates and time buckets. */
  periods: RowPeriod[];
  /** The date range the call filtered on (from/to, a where on a date): the row's period when it has none of its own. */
  rangePeriods: RowPeriod[];
  cells: Cell[];
  /** Columns of the row that are empty (null): "deals with no owner" are about a row whose owner is empty. */
  empty?: Set<string>;
}

/** A number of a row. */
export interface Cell {
  row: EvidenceRow;
  column: string;
  value: number;
  meaning: ColumnMeaning;
  /** Whether its sign is part of the value (a percent change), or only of how it was subtracted. */
  signed: boolean;
  /**
   * A calculation's change: `relative` (pct_change, a percentage of the old value), `points` (one percentage or
   * ratio minus another: percentage points), `ratio` (one value divided by another: "2.2 times").
   */
  change?: 'relative' | 'points' | 'ratio';
}

export interface Evidence {
  rows: EvidenceRow[];
  cells: Cell[];
  /** Every value that names a row, normalised, with its dimensions. */
  vocabulary: Map<string, Set<string>>;
  /** Date cells by day (YYYY-MM-DD) and times of day of datetime cells (HH:MM, UTC), with a cell holding each. */
  dates: Map<string, DateCell>;
  times: Map<string, DateCell>;
  /** Years the results use as labels (of dates, periods, names). */
  years: Set<number>;
  /** Strings of the results with digits that are no figure (ids, phone numbers, codes, names): masked verbatim. */
  identifiers: string[];
  /** Numbers found only in text that describes the data (definitions, descriptions): never evidence. */
  descriptive: number[];
  /** Values the calls filtered on (where, from/to): an answer may restate its filter. */
  filters: Set<number>;
  filterDates: Set<string>;
  /** Object names the results are about, singular and plural, to what a count counts. */
  objects: Map<string, string>;
}

/** Where a date or time of day was found. */
export interface DateCell {
  row: EvidenceRow;
  column: string;
}

/** Whether a source's numbers are evidence: a data result (rows or a computed value), never a description. */
export function isDataSource(source: Pick<GroundingSource, 'name' | 'holds'>): boolean {
  return source.name === undefined || source.holds === 'rows' || source.holds === 'value';
}

/** Whether a source is one computed value (calculate's): its sign is the expression's, its row its operands'. */
export function isValueSource(source: Pick<GroundingSource, 'holds'>): boolean {
  return source.holds === 'value';
}

/** Keys the server adds to rows (figure references): they name no value of the data. */
const REFERENCE_KEYS: ReadonlySet<string> = new Set(['ref', 'resultRef']);

/** Most cells read from one turn: results are capped by the tools, this only bounds the work. */
const MAX_CELLS = 200_000;

/** `account.industry` → `industry`. */
export function dimensionOf(column: string): string {
  return column.split('.').at(-1)!.toLowerCase();
}

/** Lower case, `_` and dashes as spaces, one space between words: how values and answers are compared. */
export function normalise(text: string): string {
  return text
    .toLowerCase()
    .replace(/[_\-–—]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** An ISO date, maybe with a time (group 4 is its hour): how results write dates and timestamps. */
export const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A number written as text in a result. */
export const NUMERIC = /^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$/i;

/** The last day of the period starting on `from` at `grain`. */
function periodEnd(from: string, grain: string): string {
  const [y, m, d] = from.split('-').map(Number);
  const date = new Date(Date.UTC(y, m - 1, d));
  if (grain === 'week') date.setUTCDate(date.getUTCDate() + 6);
  else if (grain === 'month') date.setUTCMonth(date.getUTCMonth() + 1, 0);
  else if (grain === 'quarter') date.setUTCMonth(date.getUTCMonth() + 3, 0);
  else if (grain === 'year') date.setUTCFullYear(date.getUTCFullYear() + 1, 0, 0);
  return date.toISOString().slice(0, 10);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Equality filters of a where object: `{stage: "won"}`, `{stage: {$in: ["won"]}}`, `$and` of those. */
export function filterValues(where: unknown, into: Record<string, string[]> = {}): Record<string, string[]> {
  if (!isRecord(where)) return into;
  for (const [key, condition] of Object.entries(where)) {
    if (key === '$and' && Array.isArray(condition)) {
      for (const part of condition) filterValues(part, into);
      continue;
    }
    if (key.startsWith('$')) continue;
    const values: unknown[] = [];
    if (typeof condition === 'string') values.push(condition);
    else if (isRecord(condition)) {
      if (typeof condition.$eq === 'string') values.push(condition.$eq);
      if (Array.isArray(condition.$in)) values.push(...(condition.$in as unknown[]));
    }
    const strings = values.filter((v): v is string => typeof v === 'string' && !ISO_DATE.test(v));
    if (strings.length) (into[dimensionOf(key)] ??= []).push(...strings.map(normalise));
  }
  return into;
}

/** Date ranges of a where object (`{close_date: {$gte, $lte}}`) and a metric call's from/to. */
function filterPeriods(args: Record<string, unknown>): RowPeriod[] {
  const periods: RowPeriod[] = [];
  const from = typeof args.from === 'string' ? args.from : undefined;
  const to = typeof args.to === 'string' ? args.to : undefined;
  if (from || to)
    periods.push({ from: (from ?? '0000-01-01').slice(0, 10), to: (to ?? '9999-12-31').slice(0, 10), grain: 'range' });
  const visit = (where: unknown) => {
    if (!isRecord(where)) return;
    for (const [key, condition] of Object.entries(where)) {
      if (key === '$and' && Array.isArray(condition)) condition.forEach(visit);
      if (!isRecord(condition)) continue;
      const low = [condition.$gte, condition.$gt].find((v): v is string => typeof v === 'string' && ISO_DATE.test(v));
      const high = [condition.$lte, condition.$lt].find((v): v is string => typeof v === 'string' && ISO_DATE.test(v));
      if (low || high)
        periods.push({ from: (low ?? '0000-01-01').slice(0, 10), to: (high ?? '9999-12-31').slice(0, 10), grain: 'range' });
    }
  };
  visit(args.where);
  return periods;
}

/** Every number in a call's arguments and every date: what an answer may restate as its filter. */
function argumentValues(args: unknown, numbers: Set<number>, dates: Set<string>): void {
  const visit = (node: unknown, key?: string) => {
    if (typeof node === 'number' && key !== 'limit' && key !== 'offset') numbers.add(node);
    else if (typeof node === 'string') {
      const date = ISO_DATE.exec(node);
      if (date) dates.add(node.slice(0, 10));
      else if (NUMERIC.test(node.trim())) numbers.add(Number(node));
    } else if (Array.isArray(node)) node.forEach((item) => visit(item, key));
    else if (isRecord(node)) for (const [k, v] of Object.entries(node)) visit(v, k);
  };
  visit(args);
}

/** What the aggregations of an aggregate_data call compute, by alias. */
function aggregationsOf(args: Record<string, unknown>): Map<string, { function: string; field?: string }> {
  const map = new Map<string, { function: string; field?: string }>();
  if (!Array.isArray(args.aggregations)) return map;
  for (const agg of args.aggregations) {
    if (isRecord(agg) && typeof agg.alias === 'string' && typeof agg.function === 'string')
      map.set(agg.alias, { function: agg.function, field: typeof agg.field === 'string' ? agg.field : undefined });
  }
  return map;
}

/** Metadata `describeColumns` reads: fields of objects and metric definitions. */
export interface ColumnCatalog {
  field(objectName: string, fieldName: string): FieldMeta | undefined;
  metric(name: string): MetricDefinition | undefined;
}

/** What a field's numbers are. */
function fieldMeaning(field: FieldMeta | undefined): ColumnMeaning {
  if (!field) return { kind: 'any' };
  const kind = fieldTypeOf(field.type).figure;
  if (kind === 'money') {
    const currency = currencyCodeIn(field.description);
    return currency ? { kind, currency } : { kind };
  }
  return { kind: kind ?? 'any' };
}

/** What a metric's numbers are, with its filter as the context of every number. */
function metricMeaning(catalog: ColumnCatalog, name: string): ColumnMeaning | undefined {
  const metric = catalog.metric(name);
  if (!metric) return undefined;
  const context = metric.filter ? filterValues(metric.filter) : undefined;
  const withContext = (meaning: ColumnMeaning): ColumnMeaning =>
    context && Object.keys(context).length ? { ...meaning, context } : meaning;
  if (metric.type === 'ratio') return { kind: 'ratio' };
  const measure = metric.measure;
  if (!measure) return withContext({ kind: 'any' });
  if (measure.function === 'count') return withContext({ kind: 'count', counts: metric.object, aggregate: 'count' });
  if (measure.function === 'count_distinct')
    return withContext({ kind: 'count', counts: measure.field ? dimensionOf(measure.field) : metric.object, aggregate: 'count' });
  const field = measure.field ? catalog.field(metric.object, measure.field) : undefined;
  const meaning: ColumnMeaning = { ...fieldMeaning(field), aggregate: measure.function };
  // A money field's description may not name the currency; the metric's may ("Total amount (USD)").
  if (meaning.kind === 'money' && !meaning.currency) {
    const currency = currencyCodeIn(metric.description);
    if (currency) meaning.currency = currency;
  }
  return withContext(meaning);
}

/** What each column of a data call's result means, from the object and metric definitions. */
export function describeColumns(
  source: Pick<GroundingSource, 'name' | 'arguments' | 'content'>,
  catalog: ColumnCatalog,
): Record<string, ColumnMeaning> {
  const args = isRecord(source.arguments) ? source.arguments : {};
  const columns: Record<string, ColumnMeaning> = {};
  const objectName = typeof args.objectName === 'string' ? args.objectName : undefined;
  switch (source.name) {
    case 'aggregate_data':
      for (const [alias, agg] of aggregationsOf(args)) {
        if (agg.function === 'count') columns[alias] = { kind: 'count', counts: objectName, aggregate: 'count' };
        else if (agg.function === 'count_distinct')
          columns[alias] = { kind: 'count', counts: agg.field && dimensionOf(agg.field), aggregate: 'count' };
        else {
          const field = objectName && agg.field ? fieldMeaning(catalog.field(objectName, agg.field)) : { kind: 'any' as const };
          columns[alias] = { ...field, aggregate: agg.function };
        }
      }
      break;
    case 'query_metric':
      if (Array.isArray(args.metrics))
        for (const name of args.metrics)
          if (typeof name === 'string') {
            const meaning = metricMeaning(catalog, name);
            if (meaning) columns[name] = meaning;
          }
      break;
    case 'query_records':
    case 'get_record':
      if (objectName) {
        columns.count = { kind: 'count', counts: objectName };
        columns.total = { kind: 'count', counts: objectName };
        const records = source.name === 'get_record' ? [source.content] : isRecord(source.content) ? source.content.records : [];
        const names = new Set<string>();
        if (Array.isArray(records))
          for (const record of records.slice(0, 50)) if (isRecord(record)) Object.keys(record).forEach((k) => names.add(k));
        for (const name of names)
          if (name !== 'count' && name !== 'total') columns[name] = fieldMeaning(catalog.field(objectName, name));
      }
      break;
  }
  return columns;
}

const AGGREGATE_WORDS: Record<string, string> = {
  count: 'Count',
  count_distinct: 'Distinct count',
  sum: 'Total',
  avg: 'Average',
  min: 'Minimum',
  max: 'Maximum',
};

/**
 * The label of each column of a data call's result a definition names: fields by their label, a
 * metric by its own, an aggregation as "Total Amount"; a time bucket is "Period".
 */
export function describeLabels(
  source: Pick<GroundingSource, 'name' | 'arguments' | 'content'>,
  catalog: ColumnCatalog,
): Record<string, string> {
  const args = isRecord(source.arguments) ? source.arguments : {};
  const objectName = typeof args.objectName === 'string' ? args.objectName : undefined;
  const labels: Record<string, string> = {};
  const fieldLabel = (object: string | undefined, name: string) => (object ? catalog.field(object, name)?.label : undefined);
  const rows =
    source.name === 'get_record'
      ? [source.content]
      : isRecord(source.content)
        ? [source.content.records, source.content.rows].find(Array.isArray)
        : undefined;
  const names = new Set<string>();
  for (const row of (rows ?? []).slice(0, 50)) if (isRecord(row)) Object.keys(row).forEach((k) => names.add(k));
  for (const name of names) {
    const label = fieldLabel(objectName, name);
    if (label) labels[name] = label;
  }
  if (source.name === 'aggregate_data')
    for (const [alias, agg] of aggregationsOf(args)) {
      const field = agg.field ? (fieldLabel(objectName, agg.field) ?? agg.field) : undefined;
      const word = AGGREGATE_WORDS[agg.function] ?? agg.function;
      labels[alias] = field ? `${word} ${field}` : word;
    }
  if (source.name === 'query_metric') {
    const metric = Array.isArray(args.metrics) ? args.metrics : [];
    for (const name of metric) {
      const definition = typeof name === 'string' ? catalog.metric(name) : undefined;
      if (definition) labels[definition.name] = definition.label;
      if (!definition) continue;
      for (const dimension of definition.dimensions) {
        const label = fieldLabel(definition.object, dimension);
        if (label && names.has(dimension)) labels[dimension] = label;
      }
    }
  }
  if (names.has('period') && !labels.period) labels.period = 'Period';
  return labels;
}

/** The meaning of a column without metadata: counts are counts, the rest is not known. */
function fallbackMeaning(source: GroundingSource, column: string, row: boolean): ColumnMeaning {
  const args = isRecord(source.arguments) ? source.arguments : {};
  const objectName = typeof args.objectName === 'string' ? args.objectName : undefined;
  if (source.name === 'aggregate_data') {
    const agg = aggregationsOf(args).get(column);
    if (agg?.function === 'count') return { kind: 'count', counts: objectName, aggregate: 'count' };
    if (agg?.function === 'count_distinct')
      return { kind: 'count', counts: agg.field && dimensionOf(agg.field), aggregate: 'count' };
    if (agg) return { kind: 'any', aggregate: agg.function };
    if (!row && column === 'count') return { kind: 'count' };
  }
  if (source.name === 'query_records' && !row && (column === 'count' || column === 'total'))
    return { kind: 'count', counts: objectName };
  return { kind: 'any' };
}

/** Whether a string names a row: a short label, not a date, an id, a number, an address or prose. */
function isLabel(value: string): boolean {
  if (value.length < 2 || value.length > 80) return false;
  if (ISO_DATE.test(value) || UUID.test(value) || NUMERIC.test(value)) return false;
  if (/@|:\/\//.test(value)) return false;
  if (value.split(/\s+/).length > 8) return false;
  return /\p{L}/u.test(value);
}

/** Reads the turn's results into rows and cells. */
export function collectEvidence(sources: readonly GroundingSource[]): Evidence {
  const evidence: Evidence = {
    rows: [],
    cells: [],
    vocabulary: new Map(),
    dates: new Map(),
    times: new Map(),
    years: new Set(),
    identifiers: [],
    descriptive: [],
    filters: new Set(),
    filterDates: new Set(),
    objects: new Map(),
  };
  const identifiers = new Set<string>();
  for (const source of sources) {
    // A chart restates its source's rows (already evidence); its own numbers (sizes, formats) describe nothing.
    if (source.holds === 'chart') continue;
    if (!isDataSource(source)) {
      collectDescriptive(source.content, evidence.descriptive);
      continue;
    }
    const args = isRecord(source.arguments) ? source.arguments : {};
    argumentValues(source.arguments, evidence.filters, evidence.filterDates);
    if (typeof args.objectName === 'string') addObject(evidence.objects, args.objectName);
    const context = filterValues(args.where);
    const contextPeriods = filterPeriods(args);
    const grain = typeof args.timeGrain === 'string' ? args.timeGrain : 'day';
    const signed =
      !isValueSource(source) || (typeof args.expression === 'string' && /^\s*pct_change\s*\(/i.test(args.expression));
    const addRow = (cells: Record<string, unknown>, index: number | undefined) => {
      const row: EvidenceRow = { source, index, labels: new Map(), periods: [], rangePeriods: contextPeriods, cells: [] };
      for (const [dimension, values] of Object.entries(context)) row.labels.set(dimension, new Set(values));
      for (const [column, value] of Object.entries(cells)) {
        if (evidence.cells.length >= MAX_CELLS) break;
        if (REFERENCE_KEYS.has(column)) continue;
        if (typeof value === 'number') {
          if (Number.isFinite(value))
            pushCell(evidence, row, source, column, value, index !== undefined || source.name === 'get_record', signed);
          continue;
        }
        if (value === null) (row.empty ??= new Set()).add(dimensionOf(column));
        if (typeof value !== 'string') continue;
        const text = value.trim();
        if (NUMERIC.test(text)) {
          pushCell(evidence, row, source, column, Number(text), index !== undefined, signed);
          continue;
        }
        const date = ISO_DATE.exec(text);
        if (date) {
          const day = `${date[1]}-${date[2]}-${date[3]}`;
          if (!evidence.dates.has(day)) evidence.dates.set(day, { row, column });
          evidence.years.add(Number(date[1]));
          const instant = date[4] !== undefined ? new Date(text) : undefined;
          if (instant && !Number.isNaN(instant.getTime())) {
            const time = instant.toISOString().slice(11, 16);
            if (!evidence.times.has(time)) evidence.times.set(time, { row, column });
          }
          // A record's bookkeeping stamps say when it was stored, not what period its figures are about.
          if (column !== 'created_at' && column !== 'updated_at') {
            const cellGrain = column === 'period' ? grain : 'day';
            row.periods.push({ from: day, to: periodEnd(day, cellGrain), grain: cellGrain });
          }
          continue;
        }
        if (/\d/.test(text)) {
          identifiers.add(text);
          for (const token of text.split(/\s+/))
            if (/\d/.test(token) && /[^\d.,]/.test(token) && token.length >= 4) identifiers.add(token);
          for (const year of text.matchAll(/\b(?:19|20)\d{2}\b/g)) evidence.years.add(Number(year[0]));
        }
        if (isLabel(text)) {
          const label = normalise(text);
          const dimension = dimensionOf(column);
          if (!row.labels.has(dimension)) row.labels.set(dimension, new Set());
          row.labels.get(dimension)!.add(label);
        }
      }
      for (const [dimension, values] of row.labels) {
        for (const value of values) {
          if (!evidence.vocabulary.has(value)) evidence.vocabulary.set(value, new Set());
          evidence.vocabulary.get(value)!.add(dimension);
        }
      }
      evidence.rows.push(row);
    };
    if (isValueSource(source)) {
      const value = isRecord(source.content) ? source.content.value : undefined;
      if (typeof value === 'number') addRow({ value }, undefined);
    } else readRows(source.content, addRow);
  }
  evidence.identifiers = [...identifiers].sort((a, b) => b.length - a.length);
  linkCalculations(evidence);
  return evidence;
}

function addObject(objects: Map<string, string>, name: string): void {
  const lower = name.toLowerCase();
  objects.set(lower, lower);
  objects.set(lower.endsWith('y') ? `${lower.slice(0, -1)}ies` : `${lower}s`, lower);
}

function pushCell(
  evidence: Evidence,
  row: EvidenceRow,
  source: GroundingSource,
  column: string,
  value: number,
  inRow: boolean,
  signed: boolean,
): void {
  const meaning = source.columns?.[column] ?? fallbackMeaning(source, column, inRow);
  const cell: Cell = { row, column, value, meaning, signed };
  row.cells.push(cell);
  evidence.cells.push(cell);
}

/**
 * Calls `addRow` for each row of a result: the objects of each list it holds (nested objects
 * flattened to `a.b` columns), then its top-level values as one more row (a single record's fields,
 * a count, a calculation's value).
 */
function readRows(content: unknown, addRow: (cells: Record<string, unknown>, index: number | undefined) => void): void {
  if (Array.isArray(content)) {
    content.forEach((item, i) => {
      if (isRecord(item)) addRow(flatten(item), i);
    });
    return;
  }
  if (!isRecord(content)) {
    if (typeof content === 'number' || typeof content === 'string') addRow({ value: content }, undefined);
    return;
  }
  const top: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(content)) {
    if (Array.isArray(value) && value.some(isRecord)) {
      value.forEach((item, i) => {
        if (isRecord(item)) addRow(flatten(item), i);
      });
    } else if (Array.isArray(value)) {
      // A list of numbers or labels (tags, a calculation's operands): values of the result.
      value.forEach((item, i) => {
        if (typeof item === 'number' || typeof item === 'string') top[`${key}.${i}`] = item;
      });
    } else if (isRecord(value)) Object.assign(top, flatten(value, `${key}.`));
    else top[key] = value;
  }
  if (Object.keys(top).length) addRow(top, undefined);
}

function flatten(
  record: Record<string, unknown>,
  prefix = '',
  into: Record<string, unknown> = {},
  depth = 0,
): Record<string, unknown> {
  for (const [key, value] of Object.entries(record)) {
    if (isRecord(value) && depth < 3) flatten(value, `${prefix}${key}.`, into, depth + 1);
    else if (Array.isArray(value)) {
      value.forEach((item, i) => {
        if (typeof item === 'string' || typeof item === 'number') into[`${prefix}${key}.${i}`] = item;
      });
    } else into[`${prefix}${key}`] = value;
  }
  return into;
}

/** Numbers of text that only describes the data: JSON numbers and the figures inside strings. */
function collectDescriptive(content: unknown, into: number[]): void {
  const visit = (node: unknown) => {
    if (into.length >= MAX_CELLS) return;
    if (typeof node === 'number') into.push(node);
    else if (typeof node === 'string') {
      if (NUMERIC.test(node.trim())) into.push(Number(node));
      else if (/\d/.test(node)) for (const figure of readText(node).figures) into.push(figure.mantissa * figure.scale);
    } else if (Array.isArray(node)) node.forEach(visit);
    else if (isRecord(node)) Object.values(node).forEach(visit);
  };
  visit(content);
}

/**
 * A calculation is about the rows of its operands: its value's row gets their labels, so "Maya has
 * 3 more deals than Liam" can be checked against the rows of Maya and Liam.
 */
function linkCalculations(evidence: Evidence): void {
  for (const row of evidence.rows) {
    if (!isValueSource(row.source)) continue;
    const content = row.source.content as { operands?: Array<{ text?: unknown; toolCallId?: unknown }> } | null;
    const operandKinds: string[] = [];
    for (const operand of content?.operands ?? []) {
      const value = Number(operand.text);
      if (!Number.isFinite(value)) continue;
      const decimals = String(operand.text).split('.')[1]?.length ?? 0;
      let kind: string | undefined;
      for (const other of evidence.rows) {
        if (other.source.toolCallId !== operand.toolCallId || other === row) continue;
        const cell = other.cells.find((c) => Math.abs(c.value - value) <= 0.5 * 10 ** -decimals + 1e-9);
        if (!cell) continue;
        kind ??= cell.meaning.kind;
        for (const [dimension, values] of other.labels) {
          if (!row.labels.has(dimension)) row.labels.set(dimension, new Set());
          for (const value of values) row.labels.get(dimension)!.add(value);
        }
        row.periods.push(...other.periods);
        row.rangePeriods.push(...other.rangePeriods);
      }
      operandKinds.push(kind ?? 'any');
    }
    const change = calculationChange(row.source.arguments, operandKinds);
    if (change) for (const cell of row.cells) cell.change = change;
  }
}

/** What a calculation computed from its expression and the kinds of its operands' cells. */
function calculationChange(args: unknown, operandKinds: readonly string[]): Cell['change'] {
  const expression = isRecord(args) && typeof args.expression === 'string' ? args.expression.trim() : '';
  if (/^pct_change\s*\(/i.test(expression)) return 'relative';
  const operand = String.raw`\(?\s*-?\d+(?:\.\d+)?(?:e[+-]?\d+)?\s*\)?`;
  if (new RegExp(`^${operand}\\s*/\\s*${operand}$`, 'i').test(expression)) return 'ratio';
  const shares = operandKinds.length === 2 && operandKinds.every((kind) => kind === 'ratio' || kind === 'percent');
  if (shares && new RegExp(`^${operand}\\s*-\\s*${operand}$`, 'i').test(expression)) return 'points';
  return undefined;
}
