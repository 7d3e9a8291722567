/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for asserting on what
 * GET /metrics serves. Strict on purpose: a malformed line, a sample before its TYPE, a family
 * declared twice, or a histogram whose buckets do not add up fails the test instead of being skipped.
 *
 * (The npm parser there is, parse-prometheus-text-format, merges the samples of a labelled histogram
 * into one and drops their _sum and _count, so it cannot tell one route's latency from another's.)
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  /** The sample's own name: `x_bucket`, `x_sum` and `x_count` for a histogram `x`. */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface MetricFamily {
  name: string;
  help: string;
  type: MetricType;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

/** Parses a whole exposition; throws with the line number on anything that is not the format. */
export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const helps = new Map<string, string>();
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  lines.forEach((line, index) => {
    const fail = (why: string): never => {
      throw new Error(`line ${index + 1}: ${why}: ${JSON.stringify(line)}`);
    };
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const [, keyword, name, rest] = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line) ?? [];
      if (!keyword) return; // a plain comment
      if (!NAME.test(name)) fail('bad metric name');
      if (keyword === 'HELP') {
        if (helps.has(name)) fail('a second HELP');
        helps.set(name, unescape(rest ?? '', false, fail));
      } else {
        if (families.has(name)) fail('a second TYPE');
        if (!TYPES.includes(rest as MetricType)) fail('unknown type');
        families.set(name, { name, help: '', type: rest as MetricType, samples: [] });
      }
      return;
    }
    const sample = parseSample(line, fail);
    const family = familyOf(families, sample.name) ?? fail('a sample before the TYPE of its family');
    family.samples.push(sample);
  });
  for (const family of families.values()) {
    family.help = helps.get(family.name) ?? '';
    if (family.type === 'histogram') checkHistogram(family);
  }
  return families;
}

function familyOf(families: Map<string, MetricFamily>, sampleName: string): MetricFamily | undefined {
  const exact = families.get(sampleName);
  if (exact) return exact;
  const [, base, suffix] = /^(.*)_(bucket|sum|count)$/.exec(sampleName) ?? [];
  const family = base ? families.get(base) : undefined;
  if (family?.type === 'histogram') return family;
  if (family?.type === 'summary' && suffix !== 'bucket') return family;
  return undefined;
}

function parseSample(line: string, fail: (why: string) => never): Sample {
  const nameEnd = line.search(/[{\s]/);
  if (nameEnd <= 0) fail('no value');
  const name = line.slice(0, nameEnd);
  if (!NAME.test(name)) fail('bad metric name');
  let position = nameEnd;
  const labels: Record<string, string> = {};
  if (line[position] === '{') {
    position += 1;
    while (line[position] !== '}') {
      const [match, labelName] = /^\s*([^=\s]+)\s*=\s*"/.exec(line.slice(position)) ?? [];
      if (!match || !LABEL_NAME.test(labelName)) fail('bad label');
      if (labelName in labels) fail('a label given twice');
      position += match.length;
      let raw = '';
      while (line[position] !== '"') {
        if (position >= line.length) fail('unterminated label value');
        if (line[position] === '\\') raw += line[position++];
        raw += line[position++];
      }
      labels[labelName] = unescape(raw, true, fail);
      position += 1;
      if (line[position] === ',') position += 1;
      else if (line[position] !== '}') fail('expected , or } after a label');
    }
    position += 1;
  }
  const [, value, timestamp] = /^\s+(\S+)(?:\s+(\S+))?\s*$/.exec(line.slice(position)) ?? [];
  if (value === undefined) fail('no value');
  if (timestamp !== undefined && !/^-?\d+$/.test(timestamp)) fail('bad timestamp');
  return { name, labels, value: parseValue(value, fail) };
}

/** A float as Prometheus reads one (Go's ParseFloat): NaN and Inf in any case, as prom-client writes `Nan`. */
function parseValue(text: string, fail: (why: string) => never): number {
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) fail('bad value');
  return Number(text);
}

/** HELP text escapes `\\` and `\n`; label values also `\"`. */
function unescape(text: string, quotes: boolean, fail: (why: string) => never): string {
  return text.replace(/\\(.?)/g, (_, next: string) => {
    if (next === '\\') return '\\';
    if (next === 'n') return '\n';
    if (next === '"' && quotes) return '"';
    return fail(`bad escape \\${next}`);
  });
}

/** Per label set: cumulative buckets, a +Inf bucket equal to _count, and a _sum. */
function checkHistogram(family: MetricFamily): void {
  const series = new Map<string, { buckets: Array<[number, number]>; count?: number; sum?: number }>();
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const entry = series.get(key) ?? { buckets: [] };
    series.set(key, entry);
    if (sample.name.endsWith('_bucket')) entry.buckets.push([parseValue(le, fail), sample.value]);
    else if (sample.name.endsWith('_count')) entry.count = sample.value;
    else if (sample.name.endsWith('_sum')) entry.sum = sample.value;
  }
  function fail(why: string): never {
    throw new Error(`histogram ${family.name}: ${why}`);
  }
  for (const [key, { buckets, count, sum }] of series) {
    buckets.sort((a, b) => a[0] - b[0]);
    buckets.forEach(([, value], i) => {
      if (i > 0 && value < buckets[i - 1][1]) fail(`buckets of ${key} are not cumulative`);
    });
    if (buckets.at(-1)?.[0] !== Infinity || buckets.at(-1)?.[1] !== count) fail(`+Inf bucket of ${key} is not its count`);
    if (sum === undefined) fail(`${key} has no _sum`);
  }
}

/** A scrape of GET /metrics, parsed, with lookups by name and labels. */
export class Scrape {
  readonly families: ReadonlyMap<string, MetricFamily>;

  constructor(readonly text: string) {
    this.families = parsePrometheusText(text);
  }

  family(name: string): MetricFamily {
    const family = this.families.get(name);
    if (!family) throw new Error(`no metric ${name} in the scrape`);
    return family;
  }

  /** Samples named `name` (a family's, or its `_count`/`_sum`/`_bucket`) whose labels include `labels`. */
  samples(name: string, labels: Record<string, string> = {}): Sample[] {
    const family = familyOf(this.families as Map<string, MetricFamily>, name);
    if (!family) throw new Error(`no metric ${name} in the scrape`);
    return family.samples.filter(
      (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
    );
  }

  /** The sum of the matching samples (0 when none match). */
  value(name: string, labels: Record<string, string> = {}): number {
    return this.samples(name, labels).reduce((sum, sample) => sum + sample.value, 0);
  }

  /** How many observations the matching series of histogram `name` hold. */
  count(name: string, labels: Record<string, string> = {}): number {
    return this.value(`${name}_count`, labels);
  }

  /** Every label value of every sample. */
  labelValues(): string[] {
    return [...this.families.values()].flatMap((family) => family.samples.flatMap((sample) => Object.values(sample.labels)));
  }
}
