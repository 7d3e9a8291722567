import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { projectRoot } from '../src/common/project-root';
import { extractNumbers, type Grounding, type NumberClaim } from '../src/runtime/grounding';

export const CASE_EXPECTATIONS = ['figure', 'refusal', 'clarification'] as const;
export type CaseExpectation = (typeof CASE_EXPECTATIONS)[number];

/** How a date in a term column is named in an answer: `2025-04-01` is "Q2 2025" for a quarter. */
export const PERIOD_GRAINS = ['month', 'quarter', 'year'] as const;
export type PeriodGrain = (typeof PERIOD_GRAINS)[number];

/** One question over the sample data (or a short conversation) and what a good answer to it holds. */
export interface EvalCase {
  id: string;
  /** lookup, filter, count, sum, group_by, top_n, time_grain, relative_date, follow_up, period_over_period, ratio, derived, row_filter, cross_object, metric_synonym, clarification, refusal. */
  kind: string;
  /** The first message of the chat. */
  question: string;
  /** Later messages of the same chat, each sent once the previous answer is in; the last answer is graded. */
  followUps?: string[];
  expects: CaseExpectation;
  /**
   * figure cases: run against the server's database at eval time; its result holds the expected
   * figures. `:today` is the eval's date (--now), `:subject` the member key's subject.
   */
  sql?: string;
  /** Columns of the SQL result that are figures (default: every numeric column that is not a term). */
  figures?: string[];
  /** Columns of the SQL result that label a row's figures (an account, a stage, a period); `a|b` lists names a label may take. */
  terms?: string[];
  /** Terms that are dates name periods of this grain. */
  period?: PeriodGrain;
  /** Relative difference allowed between an answer's figure and the expected one (default 0.01). */
  tolerance?: number;
  /** Most tool calls a passing answer may make (default 6 per message sent). */
  maxToolCalls?: number;
  /** Most numbers a passing answer may state beyond the expected figures (default 3). */
  extraNumbers?: number;
  /** clarification cases: what the question could mean; the answer must name at least one. */
  options?: string[];
  /** Asked with the eval's member key, under the suite's row filter. */
  member?: boolean;
}

/** The member key the runner creates for `member` cases: its subject and the policy it runs under. */
export interface MemberSpec {
  subject: string;
  attributes?: Record<string, string | number>;
  /** The policy's `objects` (read grants, row filters), as POST /api/v1/policies takes them. */
  objects: Record<string, unknown>;
}

export interface EvalSuite {
  cases: EvalCase[];
  member?: MemberSpec;
}

export const DEFAULT_TOLERANCE = 0.01;
export const DEFAULT_TOOL_BUDGET = 6;
export const DEFAULT_EXTRA_NUMBERS = 3;

/** One row of a case's SQL result: the names of its labels (each with the forms it may take) and its figures. */
export interface ExpectedRow {
  labels: string[][];
  figures: number[];
}

/** What the SQL of a case says a good answer holds. */
export interface Expected {
  rows: ExpectedRow[];
  /** Every figure, row by row. */
  figures: number[];
  /** Every label, in its first form. */
  terms: string[];
}

/** What the runner saw of one answer. */
export interface Observed {
  /** The graded answer: the last one of the chat. */
  answer: string;
  grounding: Grounding | null;
  toolCalls: number;
  /** What the user sent, every message: numbers in it are the user's own, not claims. */
  asked: string[];
  /** The chat ended in error, or did not end in time. */
  failure?: string;
}

export interface Grade {
  passed: boolean;
  /** Why it failed, one reason per unmet check. */
  reasons: string[];
  /** Expected figures the answer does not state. */
  missingFigures: number[];
  /** Expected figures the answer states, but not next to their label. */
  misplacedFigures: number[];
  missingTerms: string[];
  /** Numbers stated beyond the expected figures (figure cases), or any figure (refusal, clarification). */
  extraNumbers: string[];
}

/** The values a case's SQL may use: `:today` (YYYY-MM-DD) and `:subject`. */
export interface SqlParams {
  today: string;
  subject?: string;
}
const SQL_PARAM = /(?<!:):(today|subject)\b/g;

export async function loadSuite(path = join(projectRoot(), 'evals', 'cases.json')): Promise<EvalSuite> {
  const file = JSON.parse(await readFile(path, 'utf8')) as EvalSuite;
  const ids = new Set<string>();
  for (const c of file.cases) {
    const fail = (why: string) => {
      throw new Error(`${path}: case ${c.id}: ${why}`);
    };
    if (!c.id || ids.has(c.id)) throw new Error(`${path}: case ids must be present and unique ("${c.id}")`);
    ids.add(c.id);
    if (!CASE_EXPECTATIONS.includes(c.expects)) fail(`expects "${String(c.expects)}"`);
    if (c.expects === 'figure' && !c.sql) fail('a figure case needs sql');
    if (c.expects !== 'figure' && c.sql) fail('only figure cases have sql');
    if (c.expects === 'clarification' && !c.options?.length) fail('a clarification case needs options');
    if (c.period && !PERIOD_GRAINS.includes(c.period)) fail(`period "${c.period}"`);
    const usesSubject = [...(c.sql ?? '').matchAll(SQL_PARAM)].some((m) => m[1] === 'subject');
    if (usesSubject && !c.member) fail(':subject is for member cases');
    if (c.member && !file.member) fail('a member case needs the suite\'s "member"');
  }
  return file;
}

/** The case's SQL with `:today` and `:subject` as bound parameters. */
export function boundSql(sql: string, params: SqlParams): { text: string; values: unknown[] } {
  const names: Array<keyof SqlParams> = [];
  const text = sql.replace(SQL_PARAM, (_, name: keyof SqlParams) => {
    if (!names.includes(name)) names.push(name);
    return `$${names.indexOf(name) + 1}`;
  });
  return { text, values: names.map((name) => params[name]) };
}

/** Runs a case's SQL (`query` as pg's Client.query takes it) and reads its expected figures. */
export async function expectedOf(
  evalCase: EvalCase,
  query: (text: string, values: unknown[]) => Promise<ReadonlyArray<Record<string, unknown>>>,
  params: SqlParams,
): Promise<Expected | null> {
  if (!evalCase.sql) return null;
  const { text, values } = boundSql(evalCase.sql, params);
  return expectedFrom(evalCase, await query(text, values));
}

/** The expected rows of a case from its SQL result rows (numbers come back from pg as numbers or decimal strings). */
export function expectedFrom(evalCase: EvalCase, rows: ReadonlyArray<Record<string, unknown>>): Expected {
  const expected: Expected = { rows: [], figures: [], terms: [] };
  for (const row of rows) {
    const labels = (evalCase.terms ?? []).map((column) => labelForms(row[column], evalCase.period));
    const figures: number[] = [];
    for (const [column, value] of Object.entries(row)) {
      if (evalCase.terms?.includes(column)) continue;
      if (evalCase.figures && !evalCase.figures.includes(column)) continue;
      const number =
        typeof value === 'number' ? value : typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
      if (Number.isFinite(number)) figures.push(number);
    }
    if (labels.some((forms) => !forms.length)) continue; // a row without a name cannot be attributed (a null group)
    expected.rows.push({ labels, figures });
    expected.figures.push(...figures);
    expected.terms.push(...labels.map((forms) => forms[0]));
  }
  return expected;
}

const MONTH_NAMES = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/** The names a label value may take in an answer, most specific first. */
export function labelForms(value: unknown, period?: PeriodGrain): string[] {
  if (value === null || value === undefined) return [];
  let text: string;
  if (value instanceof Date) {
    // pg reads a date as local midnight and a timestamp as its instant.
    const local = value.getHours() === 0 && value.getMinutes() === 0;
    const [y, m, d] = local ? [value.getFullYear(), value.getMonth() + 1, value.getDate()] : [0, 0, 0];
    text = local ? `${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}` : value.toISOString().slice(0, 10);
  } else if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') {
    text = String(value);
  } else {
    return [];
  }
  const date = /^(\d{4})-(\d{2})-\d{2}$/.exec(text);
  if (!period || !date)
    return text
      .split('|')
      .map((form) => form.trim())
      .filter(Boolean);
  const [year, month] = [date[1], Number(date[2])];
  if (period === 'year') return [year];
  if (period === 'quarter') {
    const q = `Q${Math.floor((month - 1) / 3) + 1}`;
    return [`${q} ${year}`, `${year}-${q}`, `${year} ${q}`, q];
  }
  const name = MONTH_NAMES[month - 1];
  return [...new Set([`${name} ${year}`, `${name.slice(0, 3)} ${year}`, `${year}-${date[2]}`, name, name.slice(0, 3)])];
}

const REFUSAL =
  /\b(can(?:'|no)t|cannot|unable|not able|no (?:data|information|field|record)|(?:does|do|did)(?: not|n't) (?:have|contain|include|track|record|store)|(?:is|are)(?: not|n't) (?:available|tracked|recorded|stored|part of)|not (?:available|tracked|recorded|stored) in|isn't in|aren't in|outside (?:of )?the data)\b/i;

/**
 * A figure case passes when each expected figure is stated next to its label (see isAttributed),
 * the answer states at most `extraNumbers` other numbers (dumping every number fetched fails), no
 * number is unsupported and the tool calls stay within budget. A refusal case passes when the answer says the data cannot answer; a clarification
 * case when it asks back, naming one of the case's options. Neither of those may state a figure.
 */
export function grade(evalCase: EvalCase, expected: Expected | null, observed: Observed): Grade {
  const result: Grade = {
    passed: false,
    reasons: [],
    missingFigures: [],
    misplacedFigures: [],
    missingTerms: [],
    extraNumbers: [],
  };
  const reasons = result.reasons;
  if (observed.failure) reasons.push(observed.failure);
  const budget = evalCase.maxToolCalls ?? DEFAULT_TOOL_BUDGET * (1 + (evalCase.followUps?.length ?? 0));
  if (observed.toolCalls > budget) reasons.push(`${observed.toolCalls} tool calls, budget ${budget}`);
  const unsupported = observed.grounding?.unsupported ?? [];
  if (unsupported.length) reasons.push(`unsupported numbers: ${unsupported.map((n) => n.text).join(', ')}`);
  const answer = observed.answer;
  if (evalCase.expects === 'figure') {
    if (!expected || !expected.figures.length) reasons.push('the case SQL gave nothing to check');
    const rows = expected?.rows ?? [];
    const labels = findLabels(answer, rows);
    const claims = statedNumbers(answer, observed.asked).filter((claim) => !labels.some((hit) => overlaps(hit, claim)));
    const tolerance = evalCase.tolerance ?? DEFAULT_TOLERANCE;
    rows.forEach((row, r) => {
      row.figures.forEach((figure, f) => {
        const stated = claims.filter((claim) => sameFigure(claim, figure, tolerance));
        if (!stated.length) return void result.missingFigures.push(figure);
        if (!row.labels.length) return;
        const attributed = stated.some((claim) => isAttributed(answer, claim, r, f, rows, labels, tolerance));
        if (!attributed) result.misplacedFigures.push(figure);
      });
      row.labels.forEach((forms, column) => {
        if (!labels.some((hit) => hit.owners.some(([o, c]) => o === r && c === column))) result.missingTerms.push(forms[0]);
      });
    });
    const allowed = evalCase.extraNumbers ?? DEFAULT_EXTRA_NUMBERS;
    result.extraNumbers = claims
      .filter((claim) => !(expected?.figures ?? []).some((figure) => sameFigure(claim, figure, tolerance)))
      .map((claim) => claim.text);
    if (result.missingFigures.length) reasons.push(`missing figures: ${result.missingFigures.join(', ')}`);
    if (result.missingTerms.length) reasons.push(`missing terms: ${[...new Set(result.missingTerms)].join(', ')}`);
    if (result.misplacedFigures.length) reasons.push(`not next to their label: ${result.misplacedFigures.join(', ')}`);
    if (result.extraNumbers.length > allowed) {
      reasons.push(`${result.extraNumbers.length} numbers beyond the expected figures (at most ${allowed})`);
    }
  } else {
    // A refusal or a question back holds no figure (a year is not one: "2024 or 2025?").
    result.extraNumbers = statedNumbers(answer, observed.asked)
      .filter((claim) => !isYear(claim))
      .map((claim) => claim.text);
    if (result.extraNumbers.length) reasons.push(`states figures: ${result.extraNumbers.join(', ')}`);
    if (evalCase.expects === 'refusal') {
      if (!REFUSAL.test(answer)) reasons.push('does not say the data cannot answer');
    } else {
      if (!answer.includes('?')) reasons.push('asks no clarifying question');
      const named = (evalCase.options ?? []).some((option) => formPattern(option).test(answer));
      if (!named) reasons.push(`names none of: ${(evalCase.options ?? []).join(', ')}`);
    }
  }
  result.passed = reasons.length === 0;
  return result;
}

/** The numbers an answer states as figures, without those the user wrote in any message. */
function statedNumbers(answer: string, asked: readonly string[]): NumberClaim[] {
  const own = asked.flatMap((text) => extractNumbers(text)).map(valueOf);
  return extractNumbers(answer).filter((claim) => !own.some((value) => value === valueOf(claim)));
}

const valueOf = (claim: NumberClaim) => claim.mantissa * claim.scale;

function isYear(claim: NumberClaim): boolean {
  return /^\d{4}$/.test(claim.text) && claim.mantissa >= 1900 && claim.mantissa <= 2100;
}

/** Whether a stated number is the figure: within the tolerance, a percentage as ratio ×100, a negative stated by its size. */
function sameFigure(claim: NumberClaim, figure: number, tolerance: number): boolean {
  const value = valueOf(claim);
  const candidates = claim.percent ? [figure, figure * 100] : [figure];
  return candidates.some((c) => sameValue(value, c, tolerance) || (value > 0 && sameValue(value, -c, tolerance)));
}

function sameValue(a: number | undefined, b: number, tolerance: number): boolean {
  return a !== undefined && Math.abs(a - b) <= tolerance * Math.abs(b) + 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Where a figure stands: its labels and its context
// ---------------------------------------------------------------------------------------------

interface Span {
  start: number;
  end: number;
}

/** Where the answer names a label: which (row, label column) pairs that name stands for. */
export interface LabelHit extends Span {
  owners: Array<[row: number, column: number]>;
}

/** A run of the answer's text: one sentence, bullet or table row (with its column's header), or one clause of it. */
type Scope = Span[];

/** The words of a name, case-insensitively, `_` and spaces alike, not inside a longer word. */
function formPattern(form: string, flags = 'iu'): RegExp {
  const words = form
    .trim()
    .split(/[\s_]+/)
    .map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`(?<![\\p{L}\\p{N}])${words.join('[\\s_]+')}(?![\\p{L}\\p{N}])`, flags);
}

/**
 * Every place the answer names a label of the expected rows. The longest name wins where names
 * overlap, so "Q2 2025" is that quarter's and not also every "Q2".
 */
export function findLabels(answer: string, rows: readonly ExpectedRow[]): LabelHit[] {
  const owners = new Map<string, Array<[number, number]>>();
  rows.forEach((row, r) =>
    row.labels.forEach((forms, c) =>
      forms.forEach((form) => {
        const key = form.toLowerCase().replace(/[\s_]+/g, ' ');
        owners.set(key, [...(owners.get(key) ?? []), [r, c]]);
      }),
    ),
  );
  const found: LabelHit[] = [];
  for (const [form, who] of owners) {
    for (const match of answer.matchAll(formPattern(form, 'giu'))) {
      found.push({ start: match.index, end: match.index + match[0].length, owners: who });
    }
  }
  found.sort((a, b) => b.end - b.start - (a.end - a.start) || a.start - b.start);
  const hits: LabelHit[] = [];
  for (const hit of found) if (!hits.some((h) => overlaps(h, hit))) hits.push(hit);
  return hits.sort((a, b) => a.start - b.start);
}

function overlaps(span: Span, claimOrSpan: Span | NumberClaim): boolean {
  const start = 'start' in claimOrSpan ? claimOrSpan.start : claimOrSpan.index;
  const end = 'end' in claimOrSpan ? claimOrSpan.end : claimOrSpan.index + claimOrSpan.text.length;
  return start < span.end && span.start < end;
}

/**
 * Whether a stated figure stands next to row `r`'s labels: in the widest of its scopes (row, bullet,
 * sentence; then the part between semicolons; then the clause between commas) that names them and
 * no other row with another value for that figure. Where the narrowest scope naming them also names
 * such another row ("451 were won and 419 lost"), the nearest label decides.
 */
function isAttributed(
  answer: string,
  claim: NumberClaim,
  r: number,
  f: number,
  rows: readonly ExpectedRow[],
  hits: readonly LabelHit[],
  tolerance: number,
): boolean {
  let clash: { scope: Scope; others: number[] } | undefined;
  for (const scope of contextsOf(answer, claim.index, hits)) {
    if (!rowIn(r, rows[r], hits, scope)) break;
    const others = rows
      .map((_, o) => o)
      .filter((o) => o !== r && rowIn(o, rows[o], hits, scope) && !sameValue(rows[o].figures[f], rows[r].figures[f], tolerance));
    if (!others.length) return true;
    clash = { scope, others };
  }
  if (!clash) return false;
  const { scope, others } = clash;
  const end = claim.index + claim.text.length;
  const distance = (hit: LabelHit) => (hit.end <= claim.index ? claim.index - hit.end : Math.max(0, hit.start - end));
  return rows[r].labels.every((_, column) => {
    const near = hits
      .filter((hit) => scope.some((s) => s.start <= hit.start && hit.end <= s.end))
      .filter((hit) => hit.owners.some(([o, c]) => c === column && (o === r || others.includes(o))))
      .sort((a, b) => distance(a) - distance(b))[0];
    return near?.owners.some(([o, c]) => o === r && c === column) ?? false;
  });
}

/** Whether every label of row `r` is named inside the scope. */
function rowIn(r: number, row: ExpectedRow, hits: readonly LabelHit[], scope: Scope): boolean {
  return row.labels.every((_, column) =>
    hits.some(
      (hit) =>
        hit.owners.some(([o, c]) => o === r && c === column) && scope.some((s) => s.start <= hit.start && hit.end <= s.end),
    ),
  );
}

const BULLET = /^\s*(?:[-*•+]|\d+[.)])\s/;
const TABLE_ROW = /^\s*\|/;
const TABLE_RULE = /^\s*\|?\s*:?-{2,}/;
/** Words whose period ends no sentence: "Inc.", "N.V.", "e.g.". */
const ABBREVIATION = /(?:^|[^\p{L}])(?:inc|ltd|corp|co|vs|approx|etc|no|e\.g|i\.e|\p{L}(?:\.\p{L})*)$/iu;

/** Where a sentence ends (`.` not after an abbreviation, `!`, `?`), a part, a clause and a conjunct. */
const SENTENCE_END = /[.!?](?=\s)/g;
const PART_END = /;(?=\s)/g;
const CLAUSE_END = /,(?=\s)/g;
const CONJUNCTION = /\s(?:and|but|while|whereas|versus|vs\.?)(?=\s)/gi;

/**
 * The scopes a number at `index` is read in, widest first: its table row (with the header of its
 * column); or its bullet or sentence, then the part of it between semicolons, the clause between
 * commas and the conjunct between "and", "while", "but"... Punctuation and words inside a label
 * ("Riverstone Capital Co., Ltd.") split nothing.
 */
export function contextsOf(answer: string, index: number, labels: readonly LabelHit[]): Scope[] {
  const inLabel = (at: number) => labels.some((hit) => hit.start <= at && at < hit.end);
  const lineStart = answer.lastIndexOf('\n', index - 1) + 1;
  const newline = answer.indexOf('\n', index);
  const lineEnd = newline < 0 ? answer.length : newline;
  const line = answer.slice(lineStart, lineEnd);
  if (TABLE_ROW.test(line)) return [tableScope(answer, lineStart, lineEnd, index)];
  /** The stretch of `within` around `index` between two separators (those inside labels left out). */
  const around = (within: Span, separator: RegExp): Span => {
    let start = within.start;
    let end = within.end;
    for (const match of answer.slice(within.start, within.end).matchAll(separator)) {
      const at = within.start + match.index;
      if (inLabel(at) || (match[0] === '.' && ABBREVIATION.test(answer.slice(Math.max(lineStart, at - 12), at)))) continue;
      if (at < index) start = at + match[0].length;
      else {
        end = at;
        break;
      }
    }
    return { start, end };
  };
  // A bullet is one scope however many sentences it has.
  const segment = BULLET.test(line)
    ? { start: lineStart, end: lineEnd }
    : around({ start: lineStart, end: lineEnd }, SENTENCE_END);
  const part = around(segment, PART_END);
  const clause = around(part, CLAUSE_END);
  return [[segment], [part], [clause], [around(clause, CONJUNCTION)]];
}

/** A table row, plus the header cell above the number's cell (a wide table names periods in its header). */
function tableScope(answer: string, lineStart: number, lineEnd: number, index: number): Scope {
  const scope: Scope = [{ start: lineStart, end: lineEnd }];
  const lines: Span[] = [];
  let start = lineStart;
  while (start > 0) {
    const prevStart = answer.lastIndexOf('\n', start - 2) + 1;
    const prev = answer.slice(prevStart, start - 1);
    if (!TABLE_ROW.test(prev)) break;
    lines.unshift({ start: prevStart, end: start - 1 });
    start = prevStart;
  }
  if (lines.length < 2 || !TABLE_RULE.test(answer.slice(lines[1].start, lines[1].end))) return scope;
  const column = answer.slice(lineStart, index).split('|').length - 1;
  const header = lines[0];
  let cellStart = header.start;
  for (let cell = 0, at = header.start; at <= header.end; at++) {
    if (at === header.end || answer[at] === '|') {
      if (cell === column) return [...scope, { start: cellStart, end: at }];
      cell++;
      cellStart = at + 1;
    }
  }
  return scope;
}
