/**
 * Figures by reference: the model writes `{{r3.2.won_revenue}}` (the chat's third data result, row 2, that column)
 * instead of copying a number, and the server fills in the value, formatted for the column's type and the agent's
 * locale, and keeps a receipt of where it came from. A stream never shows a reference half-written: text from `{{`
 * is held back until it closes (or can no longer be one).
 */
import type { LlmMessage } from '../llm/llm.types';
import { refNumber, resultRows } from '../tools/result-refs';
import type { ToolResultKind } from '../tools/tool.types';
import { ISO_DATE, NUMERIC, type ColumnMeaning, type GroundingSource } from './grounding-evidence';

/** What a reference that does not resolve is shown as. */
export const UNAVAILABLE_FIGURE = '[figure unavailable]';

/** Longest text from `{{` to `}}` that can be a reference: a stream holds back at most this much. */
const MAX_REFERENCE_LENGTH = 120;
/** References of one answer filled in at most; later ones show [figure unavailable] (no answer needs more). */
export const MAX_REFERENCES = 1_000;

const REFERENCE =
  /^\{\{\s*r([1-9]\d{0,5})(?:\.([1-9]\d{0,5}))?(?:\.([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+){0,3}))?\s*(?:\|\s*([a-z]+)\s*)?\}\}$/;

export const REFERENCE_FORMATS = ['compact', 'int', 'percent', 'date', 'plain'] as const;
export type ReferenceFormat = (typeof REFERENCE_FORMATS)[number];

/** A reference as written: `{{r3.2.won_revenue|compact}}`. */
export interface ParsedReference {
  result: number;
  row?: number;
  column?: string;
  format?: ReferenceFormat;
}

/** Where a reference pointed, when it resolved. */
export interface ReferencedCell {
  source: GroundingSource;
  /** Index of the row in the result's rows (from 0); absent for a value result. */
  rowIndex?: number;
  column: string;
  value: unknown;
}

/** A reference of an answer, as shown. */
export interface RenderedReference {
  /** The reference without braces and format: `r3.2.won_revenue`. */
  ref: string;
  /** What the model wrote. */
  raw: string;
  /** What was shown in its place, and where in the shown answer. */
  text: string;
  start: number;
  end: number;
  cell?: ReferencedCell;
  /** Why it did not resolve: no such result, row or column, or a result withheld from the caller. */
  unresolved?: 'malformed' | 'unknown_result' | 'unknown_row' | 'unknown_column' | 'withheld' | 'bad_format' | 'too_many';
}

export interface RenderedText {
  text: string;
  references: RenderedReference[];
}

/** A data result of the conversation, by its number. */
interface NumberedResult {
  toolCallId: string;
  name: string;
  kind?: ToolResultKind;
  arguments?: unknown;
  /** Absent: withheld from the caller. */
  content?: unknown;
}

/** `{{r3.2.won_revenue|compact}}` → its parts; undefined when it is no reference. */
export function parseReference(raw: string): ParsedReference | undefined {
  if (raw.length > MAX_REFERENCE_LENGTH) return undefined;
  const match = REFERENCE.exec(raw);
  if (!match) return undefined;
  const [, result, row, column, format] = match;
  return {
    result: Number(result),
    ...(row ? { row: Number(row) } : {}),
    ...(column ? { column } : {}),
    ...(format ? { format: format as ReferenceFormat } : {}),
  };
}

/**
 * Whether text from `{{` to `}}` is meant as a reference: `r` and a digit first. One that does not parse (`{{r1.0.x}}`,
 * `{{r2.1.total amount}}`) is still one, shown as unavailable, never as the raw braces.
 */
function isReferenceAttempt(raw: string): boolean {
  return raw.length <= MAX_REFERENCE_LENGTH && REFERENCE_ATTEMPT.test(raw);
}
const REFERENCE_ATTEMPT = /^\{\{\s*r\d[^{}\n]*\}\}$/;

/** The ref of a parsed reference, as receipts name it. */
function refName(parsed: ParsedReference): string {
  return [`r${parsed.result}`, parsed.row, parsed.column].filter((part) => part !== undefined).join('.');
}

/**
 * The conversation's data results by number, read from its tool messages (`resultRef`); a withheld result keeps its
 * number (see WITHHELD_CONTENT) and resolves to nothing.
 */
export function numberedResults(
  messages: readonly LlmMessage[],
  kindOf: (toolName: string) => ToolResultKind | undefined,
): Map<number, NumberedResult> {
  const calls = new Map<string, { name: string; arguments: unknown }>();
  const results = new Map<number, NumberedResult>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) {
        if (call.type === 'function')
          calls.set(call.id, { name: call.function.name, arguments: parseJson(call.function.arguments) });
        else calls.set(call.id, { name: call.custom.name, arguments: call.custom.input });
      }
      continue;
    }
    if (message.role !== 'tool' || typeof message.content !== 'string') continue;
    const content = message.content;
    const withheld = WITHHELD_REF.exec(content);
    if (withheld) {
      const call = calls.get(message.tool_call_id);
      results.set(Number(withheld[1]), { toolCallId: message.tool_call_id, name: call?.name ?? 'unknown' });
      continue;
    }
    const parsed = referencedResult(content);
    const n = refNumber(parsed?.resultRef);
    if (n === undefined) continue;
    const call = calls.get(message.tool_call_id);
    const name = call?.name ?? 'unknown';
    results.set(n, { toolCallId: message.tool_call_id, name, kind: kindOf(name), arguments: call?.arguments, content: parsed });
  }
  return results;
}

/** The number the next data result of this conversation gets. */
export function nextResultNumber(messages: readonly LlmMessage[]): number {
  let highest = 0;
  for (const message of messages) {
    if (message.role !== 'tool' || typeof message.content !== 'string') continue;
    // Read off the text, not parsed: this runs at every tool step over the whole conversation. A data value keyed
    // "resultRef" (escaped inside strings, so only a JSON field's own key) could only leave a gap in the numbering.
    const withheld = WITHHELD_REF.exec(message.content);
    if (withheld) highest = Math.max(highest, Number(withheld[1]));
    else for (const match of message.content.matchAll(RESULT_REF_KEY)) highest = Math.max(highest, Number(match[1]));
  }
  return highest + 1;
}

/** How a withheld result that had a number keeps it, so the numbering of later results stays the same. */
export function withheldWithRef(text: string, resultRef: string | undefined): string {
  return refNumber(resultRef) === undefined ? text : `${text} (${resultRef})`;
}
const WITHHELD_REF = /^result withheld: [^(]*\(r(\d{1,6})\)$/;
const RESULT_REF_KEY = /"resultRef":"r(\d{1,6})"/g;

/**
 * Resolves and formats the references of answers of one conversation. `describe` reads what the columns of the cited
 * results mean (money in which currency, a percentage, a ratio) from the definitions.
 */
export class FigureReferences {
  private readonly described = new Map<number, GroundingSource>();
  private readonly numberFormat: string;
  private numbered?: ReadonlyMap<number, NumberedResult>;
  private resolvedCount = 0;
  private readonly formats = new Map<string, Intl.NumberFormat | Intl.DateTimeFormat>();

  /** `results` is read on the first reference only: most text cites nothing. */
  constructor(
    private readonly results: () => ReadonlyMap<number, NumberedResult>,
    private readonly describe: (sources: readonly GroundingSource[]) => Promise<GroundingSource[]>,
    locale: string | undefined,
  ) {
    this.numberFormat = supportedLocale(locale);
  }

  /** The whole text with its references filled in. */
  async render(text: string): Promise<RenderedText> {
    if (!text.includes('{{')) return { text, references: [] };
    const references: RenderedReference[] = [];
    const scanner = new ReferenceScanner((raw) => this.resolve(raw));
    const parts = await scanner.push(text);
    parts.push(scanner.end());
    let shown = '';
    for (const part of parts) {
      if (typeof part === 'string') {
        shown += part;
        continue;
      }
      references.push({ ...part, start: shown.length, end: shown.length + part.text.length });
      shown += part.text;
    }
    return { text: shown, references };
  }

  /** A stream filter: text goes out as it comes, each reference once it is complete, in order. */
  stream(emit: (text: string) => void): ReferenceStream {
    return new ReferenceStream(new ReferenceScanner((raw) => this.resolve(raw)), emit);
  }

  /** One reference: what to show and where it points. */
  private async resolve(raw: string): Promise<Omit<RenderedReference, 'start' | 'end'>> {
    const parsed = parseReference(raw);
    const ref = parsed ? refName(parsed) : raw.slice(2, -2).trim();
    const unavailable = (unresolved: RenderedReference['unresolved']) => ({ ref, raw, text: UNAVAILABLE_FIGURE, unresolved });
    if (!parsed) return unavailable('malformed');
    if (++this.resolvedCount > MAX_REFERENCES) return unavailable('too_many');
    this.numbered ??= this.results();
    const result = this.numbered.get(parsed.result);
    if (!result) return unavailable('unknown_result');
    if (result.content === undefined) return unavailable('withheld');
    if (parsed.format && !REFERENCE_FORMATS.includes(parsed.format)) return unavailable('bad_format');
    const source = await this.describedSource(parsed.result, result);
    let rowIndex: number | undefined;
    let row: Record<string, unknown>;
    let column: string;
    if (result.kind === 'value') {
      if (parsed.row !== undefined) return unavailable('unknown_row');
      column = parsed.column ?? 'value';
      row = result.content as Record<string, unknown>;
    } else {
      if (parsed.row === undefined) return unavailable('unknown_row');
      if (parsed.column === undefined) return unavailable('unknown_column');
      const rows = resultRows(result.content);
      if (parsed.row > rows.length) return unavailable('unknown_row');
      rowIndex = parsed.row - 1;
      row = rows[rowIndex];
      column = parsed.column;
    }
    const value = cellValue(row, column);
    if (value === undefined || column === 'ref' || column === 'resultRef') return unavailable('unknown_column');
    const cell: ReferencedCell = { source, ...(rowIndex !== undefined ? { rowIndex } : {}), column, value };
    const meaning = source.columns?.[column] ?? (result.kind === 'value' ? await this.valueMeaning(result) : undefined);
    return { ref, raw, text: this.format(value, meaning, parsed.format), cell };
  }

  /**
   * What a computed value is: a percent change is a percentage; a sum or difference of amounts in one currency is an
   * amount in it. Anything else (a share, a ratio of amounts) is shown as a plain number.
   */
  private async valueMeaning(result: NumberedResult): Promise<ColumnMeaning | undefined> {
    const expression = (result.arguments as { expression?: unknown } | undefined)?.expression;
    if (typeof expression !== 'string') return undefined;
    if (/^\s*pct_change\s*\(/i.test(expression)) return { kind: 'percent' };
    if (/[*/%]|[a-z]\s*\(/i.test(expression)) return undefined;
    const operands = (result.content as { operands?: Array<{ text?: unknown; toolCallId?: unknown }> }).operands ?? [];
    const meanings: ColumnMeaning[] = [];
    for (const operand of operands.slice(0, 50)) {
      const meaning = await this.operandMeaning(String(operand.text), operand.toolCallId);
      if (!meaning) return undefined;
      meanings.push(meaning);
    }
    const [first] = meanings;
    const sameMoney = first?.kind === 'money' && meanings.every((m) => m.kind === 'money' && m.currency === first.currency);
    return sameMoney ? { kind: 'money', ...(first.currency ? { currency: first.currency } : {}) } : undefined;
  }

  /** The meaning of the column of an operand's cell in the result it came from. */
  private async operandMeaning(text: string, toolCallId: unknown): Promise<ColumnMeaning | undefined> {
    this.numbered ??= this.results();
    const value = Number(text);
    const entry = [...this.numbered].find(([, r]) => r.toolCallId === toolCallId && r.content !== undefined);
    if (!entry || !Number.isFinite(value)) return undefined;
    const [n, result] = entry;
    const source = await this.describedSource(n, result);
    const half = 0.5 * 10 ** -(text.split('.')[1]?.length ?? 0) + 1e-9;
    const rows = result.kind === 'value' ? [result.content as Record<string, unknown>] : resultRows(result.content);
    for (const row of rows)
      for (const [column, cell] of Object.entries(row))
        if (typeof cell === 'number' && Math.abs(Math.abs(cell) - Math.abs(value)) <= half)
          return source.columns?.[column] ?? (result.kind === 'value' ? await this.valueMeaning(result) : undefined);
    return undefined;
  }

  private async describedSource(n: number, result: NumberedResult): Promise<GroundingSource> {
    let source = this.described.get(n);
    if (!source) {
      const plain: GroundingSource = {
        toolCallId: result.toolCallId,
        name: result.name,
        arguments: result.arguments,
        content: result.content,
        ...(result.kind ? { holds: result.kind } : {}),
      };
      [source] = await this.describe([plain]);
      this.described.set(n, source);
    }
    return source;
  }

  /** A value as the answer shows it: by the column's type and the locale, or as the format asks. */
  format(value: unknown, meaning: ColumnMeaning | undefined, format: ReferenceFormat | undefined): string {
    if (value === null) return '—';
    if (typeof value === 'string') {
      if (format === 'plain') return value;
      const date = ISO_DATE.exec(value);
      if (date && (format === undefined || format === 'date')) return this.formatDate(value, date[4] !== undefined);
      const number = NUMERIC.test(value.trim()) ? Number(value) : undefined;
      return number === undefined || format === undefined ? value : this.format(number, meaning, format);
    }
    if (typeof value === 'boolean') return String(value);
    if (typeof value !== 'number' || !Number.isFinite(value)) return JSON.stringify(value) ?? UNAVAILABLE_FIGURE;
    if (format === 'plain' || format === 'date') return String(value);
    const kind = meaning?.kind ?? 'any';
    const options: Intl.NumberFormatOptions = {};
    if (format === 'percent' || (format === undefined && (kind === 'percent' || kind === 'ratio'))) {
      // A percent column holds 45.2 for 45.2%; anything else formatted as a percentage is a ratio.
      const ratio = kind === 'percent' ? value / 100 : value;
      return this.numbers({ style: 'percent', maximumFractionDigits: 1 }).format(ratio);
    }
    if (kind === 'money' && meaning?.currency) {
      options.style = 'currency';
      options.currency = meaning.currency;
    }
    if (format === 'compact') {
      options.notation = 'compact';
      options.maximumFractionDigits = 1;
    } else if (format === 'int' || kind === 'count') {
      options.maximumFractionDigits = 0;
      if (options.style === 'currency') options.minimumFractionDigits = 0;
    } else if (options.style === 'currency') {
      // Cents only where there are some: $19,870,000 and $5,120,400.50.
      options.minimumFractionDigits = Number.isInteger(value) ? 0 : 2;
      options.maximumFractionDigits = Number.isInteger(value) ? 0 : 2;
    } else {
      options.maximumFractionDigits = 2;
    }
    return this.numbers(options).format(value);
  }

  /** One formatter per set of options: an answer formats many figures alike. */
  private numbers(options: Intl.NumberFormatOptions): Intl.NumberFormat {
    const key = `n${JSON.stringify(options)}`;
    let format = this.formats.get(key) as Intl.NumberFormat | undefined;
    if (!format) this.formats.set(key, (format = new Intl.NumberFormat(this.numberFormat, options)));
    return format;
  }

  private formatDate(value: string, withTime: boolean): string {
    const date = new Date(withTime ? value : `${value.slice(0, 10)}T00:00:00Z`);
    if (Number.isNaN(date.getTime())) return value;
    const key = `d${withTime}`;
    let format = this.formats.get(key) as Intl.DateTimeFormat | undefined;
    if (!format) {
      format = new Intl.DateTimeFormat(this.numberFormat, {
        dateStyle: 'medium',
        ...(withTime ? { timeStyle: 'short' } : {}),
        timeZone: 'UTC',
      });
      this.formats.set(key, format);
    }
    return format.format(date);
  }
}

/** A cell by column: the key itself, else a path into nested values (`metadata.seats`). */
function cellValue(row: Record<string, unknown>, column: string): unknown {
  if (Object.hasOwn(row, column)) return row[column];
  let node: unknown = row;
  for (const key of column.split('.')) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

function supportedLocale(locale: string | undefined): string {
  try {
    return (locale && Intl.NumberFormat.supportedLocalesOf([locale])[0]) || 'en';
  } catch {
    return 'en';
  }
}

/**
 * A tool message's result when it carries a reference (its keys in any order: a stored result comes back from JSONB
 * reordered); only those are parsed again, the others cannot be cited.
 */
function referencedResult(content: string): { resultRef?: unknown } | undefined {
  if (!content.startsWith('{') || !content.includes('"resultRef":"r')) return undefined;
  const parsed = parseJson(content);
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

type Resolved = Omit<RenderedReference, 'start' | 'end'>;

/**
 * A unit typed right after a figure filled in from a reference, which already shows it (`$`, `USD`, `dólares` after
 * "$92.5M"; `%` after "23.2%"), as the symbol it repeats. Models add them out of habit; shown, they read "$92.5M $".
 */
const REPEATED_UNITS: ReadonlyArray<[RegExp, RegExp]> = [
  [/^[ \u00a0\u202f]?(?:US\$|USD|\$|US-Dollars?|dollars?|dólares|dollari|Dollar)(?![\p{L}\p{N}$])/iu, /\$|USD/],
  [/^[ \u00a0\u202f]?(?:€|EUR|euros?)(?![\p{L}\p{N}])/iu, /€|EUR/],
  [/^[ \u00a0\u202f]?(?:%|Prozent|por ?ciento|pour ?cent|per ?cento|por ?cento|procent)(?![\p{L}\p{N}])/iu, /%/],
];
/** Longest unit REPEATED_UNITS reads, with its space and the character that must not follow it. */
const REPEATED_UNIT_REACH = 14;

/**
 * How many characters of `after` repeat a unit that `shown` already has: 0 when none, undefined when `after` is too
 * short to tell yet (a stream's next delta may complete it) unless the text has ended.
 */
function repeatedUnit(after: string, shown: string, ended: boolean): number | undefined {
  for (const [unit, symbol] of REPEATED_UNITS) {
    if (!symbol.test(shown)) continue;
    const match = unit.exec(after);
    if (match && (ended || after.length > match[0].length)) return match[0].length;
  }
  if (
    !ended &&
    after.length < REPEATED_UNIT_REACH &&
    /^[ \u00a0\u202f]?[\p{L}$€%-]*$/u.test(after) &&
    /[$€%]|USD|EUR/.test(shown)
  )
    return undefined;
  return 0;
}

/**
 * Splits text into plain stretches and references, holding back from `{{` until the reference closes or can no longer
 * be one. The same scanner renders a whole answer and a stream, so both show exactly the same text.
 */
class ReferenceScanner {
  private held = '';
  /** What the last reference showed, while the text right after it may still repeat its unit. */
  private unitOwner?: string;

  constructor(private readonly resolve: (raw: string) => Promise<Resolved>) {}

  async push(delta: string): Promise<Array<string | Resolved>> {
    let text = this.held + delta;
    this.held = '';
    const out: Array<string | Resolved> = [];
    if (this.unitOwner !== undefined) {
      const repeat = repeatedUnit(text, this.unitOwner, false);
      if (repeat === undefined) {
        this.held = text;
        return out;
      }
      text = text.slice(repeat);
      this.unitOwner = undefined;
    }
    // Indexes, not slices: hostile text full of `{{` costs one pass, and a `}}` is looked for only as far as a
    // reference can reach.
    let from = 0;
    let at = 0;
    for (;;) {
      const open = text.indexOf('{{', at);
      if (open < 0) {
        // A last `{` may open a reference with the next delta.
        const end = text.length > at && text.endsWith('{') ? text.length - 1 : text.length;
        if (end > from) out.push(text.slice(from, end));
        this.held = text.slice(end);
        return out;
      }
      const reach = text.slice(open, open + MAX_REFERENCE_LENGTH + 2);
      const close = reach.indexOf('}}');
      if (close < 0 && text.length - open < MAX_REFERENCE_LENGTH) {
        if (open > from) out.push(text.slice(from, open));
        this.held = text.slice(open);
        return out;
      }
      const raw = close >= 0 ? reach.slice(0, close + 2) : '';
      if (raw && isReferenceAttempt(raw)) {
        if (open > from) out.push(text.slice(from, open));
        const resolved = await this.resolve(raw);
        out.push(resolved);
        from = open + close + 2;
        // "{{r1.2.won_revenue|compact}} $": the unit the model typed again after a figure that shows it.
        const repeat = repeatedUnit(text.slice(from), resolved.text, false);
        if (repeat === undefined) {
          this.unitOwner = resolved.text;
          this.held = text.slice(from);
          return out;
        }
        from = at = from + repeat;
      } else {
        // Not a reference: its first brace is text, and a reference may still start at the next one.
        at = open + 1;
      }
    }
  }

  /** What is still held back, as text (a stream ended inside something that was no reference). */
  end(): string {
    let rest = this.held;
    if (this.unitOwner !== undefined) rest = rest.slice(repeatedUnit(rest, this.unitOwner, true) ?? 0);
    this.held = '';
    this.unitOwner = undefined;
    return rest;
  }
}

/** A model's text deltas with their references filled in, emitted in order. */
export class ReferenceStream {
  private chain: Promise<void> = Promise.resolve();
  private failed?: Error;

  constructor(
    private readonly scanner: ReferenceScanner,
    private readonly emit: (text: string) => void,
  ) {}

  push(delta: string): void {
    this.chain = this.chain.then(async () => {
      if (this.failed) return;
      try {
        const parts = await this.scanner.push(delta);
        const text = parts.map((part) => (typeof part === 'string' ? part : part.text)).join('');
        if (text) this.emit(text);
      } catch (error) {
        this.failed = error instanceof Error ? error : new Error(String(error));
      }
    });
  }

  /** Waits for what was pushed, then lets out what is still held. */
  async end(): Promise<void> {
    await this.chain;
    if (this.failed) throw this.failed;
    const rest = this.scanner.end();
    if (rest) this.emit(rest);
  }

  /** Drops what is held (the model call is being retried: its text is taken back). */
  async reset(): Promise<void> {
    await this.chain;
    this.scanner.end();
  }
}
