/**
 * Grounding: every figure an answer states is a claim about a cell. It is supported only when a
 * cell of a row of this turn's data results (or of a `calculate` over such cells) equals it at the
 * precision shown, in its unit, currency, scale and sign, and when that row agrees with what the
 * figure's clause names (an owner, a stage, a period). Anything else is reported with the reason:
 * a value of another row, a wrong sign, unit or scale, a number of the question, a number of a
 * description, or no such value at all.
 */
import { checkClaims } from './grounding-claims';
import { AnswerScopes, byDimension, findMentions, type Concept, type FigurePair, type FigureScope } from './grounding-clauses';
import {
  collectEvidence,
  dimensionOf,
  isDataSource,
  isValueSource,
  type Cell,
  type Evidence,
  type GroundingSource,
} from './grounding-evidence';
import { readText, type DateMention, type Figure, type PeriodMention } from './grounding-figures';
import { derivationOf, type Operand } from './grounding-derived';
import { detectLanguage } from './grounding-language';
import type { TurnEvidence } from '../tools/tool.types';
import type { RenderedReference } from './figure-references';

export type { GroundingSource } from './grounding-evidence';

/** Why a figure is not supported. */
export const UNSUPPORTED_REASONS = [
  'no_such_value',
  'other_row',
  'wrong_sign',
  'wrong_unit',
  'wrong_scale',
  'from_question',
  'not_data',
  'bad_reference',
] as const;
export type UnsupportedReason = (typeof UNSUPPORTED_REASONS)[number];

export interface SupportedFigure {
  text: string;
  /** The call whose result holds the cell. */
  toolCallId: string;
  /** Index of the row in the result's list of rows (absent for a result's top-level value or a single record). */
  row?: number;
  column?: string;
  /** The figure's clause named values of the results, and the cell's row has them. */
  entityChecked: boolean;
  /** A figure the server filled in from a reference: the reference (`r3.2.won_revenue`). */
  ref?: string;
  /** A figure worked out from two others of its sentence (a difference, change or ratio): those two, as shown. */
  derivedFrom?: string[];
}

export interface UnsupportedFigure {
  text: string;
  reason: UnsupportedReason;
  /** A reference as the model wrote it (`{{r9.1.amount}}`), when the figure was one. */
  ref?: string;
}

/** Where a figure filled in from a reference came from: enough to find the cell again and replay the call. */
export interface FigureReceipt {
  ref: string;
  /** As shown in the answer. */
  text: string;
  toolCallId: string;
  tool: string;
  /** The row of the result, from 1 (absent for a value result such as calculate's). */
  row?: number;
  column: string;
  value: unknown;
}

export interface GroundingSummary {
  /** Figures written as references. */
  referenced: number;
  /** Figures typed by hand (checked against the results as written). */
  typed: number;
  supported: number;
  unsupported: number;
}

/** The access a result the answer used was produced under, when it left rows or fields out. */
export interface GroundingCaveat {
  object: string;
  kind: 'row_filter' | 'hidden_fields';
  /** Hidden fields the caller already named (in the question or its calls); never the others. */
  fields?: string[];
}

export interface Grounding {
  /** How many figures of the answer are claims (numbers, and dates where the results hold dates). */
  numbers: number;
  supported: SupportedFigure[];
  unsupported: UnsupportedFigure[];
  /** Of the figures filled in from references. */
  receipts?: FigureReceipt[];
  summary?: GroundingSummary;
  caveats?: GroundingCaveat[];
  /** A very long answer is checked up to this character only (see groundBounded); what follows is not checked. */
  uncheckedFrom?: number;
}

export interface GroundingOptions {
  /** The user's question: its own numbers are not claims when the answer restates them. */
  question?: string;
  /** How the answer writes numbers (BCP 47; default `en`): 1,234.5 or 1.234,5 or 1 234,5. */
  locale?: string;
  /** The references the server filled in (their spans are the shown answer's): checked as cells, not read as text. */
  references?: readonly RenderedReference[];
}

/** Which figures of `answer` the data results of the turn support, and why the others are not. */
export function groundAnswer(answer: string, sources: readonly GroundingSource[], options: GroundingOptions = {}): Grounding {
  const evidence = collectEvidence(sources);
  const references = options.references ?? [];
  const language = detectLanguage(answer);
  const read = readText(answer, {
    locale: options.locale,
    language,
    masked: [...identifierSpans(answer, evidence.identifiers), ...references.map((r) => [r.start, r.end] as [number, number])],
  });
  const asked = readText(options.question ?? '', {
    locale: options.locale,
    language: detectLanguage(options.question ?? '') ?? language,
  });
  const askedYears = new Set<number>([
    ...asked.periods.filter((p) => !p.yearless).map((p) => Number(p.from.slice(0, 4))),
    ...asked.figures.filter((f) => isYear(f)).map((f) => f.mantissa),
  ]);
  // "2024 win rate": the year the calls filtered on.
  const filterYears = new Set([...evidence.filterDates].map((d) => Number(d.slice(0, 4))));
  const periods = [...read.periods];
  const claims: Array<{ figure: Figure; echo: boolean }> = [];
  for (const figure of read.figures) {
    // A year the question or the results use as a label names a period here too.
    if (
      isYear(figure) &&
      (askedYears.has(figure.mantissa) || evidence.years.has(figure.mantissa) || filterYears.has(figure.mantissa))
    ) {
      periods.push(yearPeriod(figure));
      continue;
    }
    const echo = asked.figures.some((q) => sameNumber(q, figure));
    // "32, not 40": the question's number denied, not stated.
    if (echo && NEGATION_BEFORE.test(answer.slice(Math.max(0, figure.index - 20), figure.index))) continue;
    // "4 in 10" is a share: a claim where the results hold shares, else a manner of speaking.
    if (figure.fraction && !evidence.cells.some((c) => SHARE_KINDS.has(c.meaning.kind) || isValueSource(c.row.source))) continue;
    if (
      (echo || evidence.filters.has(valueOf(figure))) &&
      restatesCondition(answer, figure, options.question ?? '', asked.figures)
    )
      continue;
    claims.push({ figure, echo });
  }
  const translated = language !== undefined && language !== 'en';
  // A short table may not tell its language: the values' names in other languages are read unless it is English.
  // The names of the cited results too: a reference may cite a result of an earlier turn.
  const cited = collectEvidence([...new Set(references.flatMap((r) => (r.cell ? [r.cell.source] : [])))]);
  const vocabulary = new Map(evidence.vocabulary);
  for (const [value, dimensions] of cited.vocabulary)
    vocabulary.set(value, new Set([...(vocabulary.get(value) ?? []), ...dimensions]));
  const mentions = findMentions(answer, vocabulary, { cognates: translated, translations: language !== 'en' });
  periods.sort((a, b) => a.index - b.index);
  const scopes = new AnswerScopes(answer, mentions, periods, translated);
  // "Lucas and Priya closed 49 and 48 deals": each figure is about its own name, typed or filled in from a reference.
  const pairs = scopes.pairs(
    [...claims.map(({ figure }) => figure), ...references.map((r) => ({ index: r.start, end: r.end }))].sort(
      (a, b) => a.index - b.index,
    ),
  );
  const scopeOf = (index: number, end: number) => narrowedScope(scopes.scopeOf(index, end), pairs.get(index));

  type Entry = { index: number; supported?: SupportedFigure; unsupported?: UnsupportedFigure };
  const entries: Entry[] = [];
  const bound: Array<{ index: number; end: number; cell?: Cell }> = [];
  for (const { figure, echo } of claims) {
    const scope = scopeOf(figure.index, figure.end);
    let { cell, ...verdict } = bind(figure, scope, evidence, echo);
    // "25.077" in an answer whose language is not told: the other reading of its digits may be the one meant.
    if (verdict.unsupported && figure.alternative) {
      const other = bind({ ...figure, ...figure.alternative, bare: false }, scope, evidence, echo);
      if (other.supported) ({ cell, ...verdict } = other);
    }
    // "fiel von 53,2 % auf 49,6 % (2024)": the first end of a change is of the period before the one named.
    if (verdict.unsupported?.reason === 'other_row' && figure.change === 'from' && scope.periods.length) {
      const other = bind(figure, { ...scope, periods: [] }, evidence, echo);
      if (other.supported) ({ cell, ...verdict } = other);
    }
    // "Japan is 6th of 11 countries", "Con 12 comerciales": the number of rows a result lists.
    if (
      verdict.unsupported?.reason === 'no_such_value' &&
      figure.bare &&
      rowCounts(evidence).has(figure.mantissa) &&
      OUT_OF_BEFORE.test(answer.slice(Math.max(0, figure.index - 24), figure.index))
    )
      continue;
    // "64,8 millones de dólares: 20,7 en el primer trimestre y 44,2 en el segundo": a scale written once before.
    const scaled = verdict.unsupported ? scaleBefore(answer, figure, read.figures) : undefined;
    if (scaled) {
      const other = bind({ ...figure, scale: scaled.scale, currency: scaled.currency, bare: false }, scope, evidence, echo);
      if (other.supported) ({ cell, ...verdict } = other);
    }
    // "Three reps won more than 40 deals: A, B and C": a count of what the answer itself lists.
    if (verdict.unsupported && countsListed(answer, figure, scopes)) continue;
    entries.push({ index: figure.index, ...verdict });
    bound.push({ index: figure.index, end: figure.end, ...(verdict.supported ? { cell } : {}) });
  }
  // Ranks, the order of numbered lists, multiples ("doubled"): claims in words.
  for (const claim of checkClaims(answer, scopes, mentions, periods, bound, evidence)) {
    const { cell } = claim;
    entries.push(
      claim.supported && cell
        ? {
            index: claim.index,
            supported: {
              text: claim.text,
              toolCallId: cell.row.source.toolCallId,
              ...(cell.row.index !== undefined ? { row: cell.row.index } : {}),
              column: cell.column,
              entityChecked: true,
            },
          }
        : claim.supported
          ? { index: claim.index }
          : { index: claim.index, unsupported: { text: claim.text, reason: 'other_row' } },
    );
  }
  const dateVerdicts = new Map<DateMention, Verdict>();
  for (const mention of dateClaims(answer, read.dates, asked.dates, evidence))
    dateVerdicts.set(mention, bindDate(mention, evidence, scopes.scopeOf(mention.index, mention.index + 1)));
  for (const [mention, verdict] of dateVerdicts) {
    // "Week 14 (31 March – 6 April)": the last day of a span of days whose first day the results hold bounds it.
    if (verdict.unsupported && spanEndOf(answer, mention, read.dates, dateVerdicts)) continue;
    entries.push({ index: mention.index, ...verdict });
  }
  // A year no date of the results (nor the question, nor a filter) has is a claim no cell supports.
  if (evidence.dates.size) {
    const known = new Set([...evidence.years, ...askedYears, ...filterYears]);
    for (const period of periods) {
      const year = Number(period.from.slice(0, 4));
      if (period.yearless || known.has(year) || period.grain === 'day') continue;
      entries.push({ index: period.index, unsupported: { text: period.text, reason: 'no_such_value' } });
    }
  }
  // "down 8.2 points" after 54.9% and 46.7%: a figure worked out from two of its sentence that hold.
  const claimAt = new Map(claims.map(({ figure }) => [figure.index, figure]));
  const operands: Operand[] = [
    ...bound.flatMap(({ index, cell }) => {
      const figure = cell && claimAt.get(index);
      if (!cell || !figure) return [];
      const exact = cell.meaning.kind === 'ratio' && figure.percent ? cell.value * 100 : cell.value;
      const shown = valueOf(figure);
      return [
        {
          index,
          text: figure.text,
          shown,
          exact,
          percent: figure.percent,
          change: figure.change,
          toolCallId: cell.row.source.toolCallId,
        },
      ];
    }),
    ...references.flatMap((r) => {
      if (!r.cell || typeof r.cell.value !== 'number') return [];
      const kind = r.cell.source.columns?.[r.cell.column]?.kind;
      const value = kind === 'ratio' ? r.cell.value * 100 : r.cell.value;
      const percent = kind === 'ratio' || kind === 'percent';
      return [{ index: r.start, text: r.text, shown: value, exact: value, percent, toolCallId: r.cell.source.toolCallId }];
    }),
  ];
  for (const operand of operands) operand.base = COMPARED_WITH.test(answer.slice(Math.max(0, operand.index - 30), operand.index));
  for (const entry of entries) {
    if (entry.unsupported?.reason !== 'no_such_value') continue;
    const figure = claimAt.get(entry.index);
    const sentence = figure && scopes.sentenceAt(figure.index);
    if (!figure || !sentence) continue;
    const inSentence = operands.filter((o) => o.index >= sentence.start && o.index < sentence.end);
    const from = derivationOf(figure, inSentence, answer.slice(figure.end, figure.end + 12));
    if (from)
      entry.supported = {
        text: figure.text,
        toolCallId: from[0].toolCallId,
        entityChecked: false,
        derivedFrom: from.map((o) => o.text),
      };
    if (from) delete entry.unsupported;
  }
  // Entries of claims in words that hold without a cell (an order that matches) are no figures.
  const typed = entries.filter((e) => e.supported || e.unsupported).length;
  entries.push(...referenceEntries(references, cited, scopeOf));
  entries.sort((a, b) => a.index - b.index);
  const supported = entries.flatMap((e) => (e.supported ? [e.supported] : []));
  const unsupported = entries.flatMap((e) => (e.unsupported ? [e.unsupported] : []));
  return {
    numbers: entries.filter((e) => e.supported || e.unsupported).length,
    supported,
    unsupported,
    receipts: references.flatMap((r) => (r.cell ? [receiptOf(r, r.cell)] : [])),
    summary: { referenced: references.length, typed, supported: supported.length, unsupported: unsupported.length },
  };
}

/**
 * The verdicts on the figures filled in from references: one that did not resolve is a `bad_reference`; one whose row
 * disagrees with what its clause names (an owner, a stage, a period) is `other_row`, as for a typed figure.
 */
function referenceEntries(
  references: readonly RenderedReference[],
  evidence: Evidence,
  scopeOf: (index: number, end: number) => FigureScope,
): Array<{ index: number; supported?: SupportedFigure; unsupported?: UnsupportedFigure }> {
  if (!references.length) return [];
  // `evidence`: the cited results as the references resolved them (their own described copies), the cells to check.
  return references.map((reference) => {
    const { cell } = reference;
    if (!cell)
      return { index: reference.start, unsupported: { text: reference.text, reason: 'bad_reference', ref: reference.raw } };
    const found = evidence.cells.filter((c) => c.row.source === cell.source && c.column === cell.column);
    const numeric = found.find((c) => c.row.index === cell.rowIndex) ?? found.find((c) => c.row.index === undefined);
    const scope = scopeOf(reference.start, reference.end);
    // A computed value (calculate's) is of no row: its operands say what it is about.
    const status = numeric && cell.rowIndex !== undefined ? rowStatus(numeric, scope, evidence) : 'neutral';
    // A reference names its row exactly: one whose value is empty for what the sentence names (a person, said of the
    // row of deals with no owner) is another row, whether the clause or its line names it.
    const namesEmpty =
      !!numeric?.row.empty &&
      !scope.unassigned &&
      [...scope.own.keys(), ...scope.inherited.keys()].some((dimension) => numeric.row.empty!.has(dimension));
    // As for a typed figure: a row that has no value for what the clause names (an empty owner) is not that row.
    if (status === 'conflict' || status === 'unverifiable' || namesEmpty)
      return { index: reference.start, unsupported: { text: reference.text, reason: 'other_row', ref: reference.raw } };
    return {
      index: reference.start,
      supported: {
        text: reference.text,
        toolCallId: cell.source.toolCallId,
        ...(cell.rowIndex !== undefined ? { row: cell.rowIndex } : {}),
        column: cell.column,
        entityChecked: status === 'confirmed',
        ref: reference.ref,
      },
    };
  });
}

/** Words that name what a change is measured against, right before it: "up 62.5% on Q3 ($54.2M)", "than 29.9%". */
const COMPARED_WITH =
  /(?:\bon|\bthan|\bvs\.?|\bversus|\bover|compared (?:with|to)|\bagainst|gegenüber|\bals|im Vergleich zu|par rapport (?:à|au)|comparé (?:à|au)|\bque|frente a|respecto a|rispetto a(?:l|llo|lla|i)?|em relação a|\bdan|ten opzichte van|\bniż|\bwobec)\b[^.]{0,14}$/i;

/** A figure's scope narrowed to what it is paired with: its own name of an enumeration, or its parenthesis. */
function narrowedScope(scope: FigureScope, pair: FigurePair | undefined): FigureScope {
  if (pair?.mention) for (const dimension of pair.mention.dimensions) scope.own.set(dimension, new Set([pair.mention.value]));
  if (pair?.period) scope.periods = [pair.period];
  if (pair?.local) {
    for (const [dimension, values] of byDimension(pair.local.mentions)) {
      scope.own.set(dimension, values);
      scope.inherited.delete(dimension);
    }
    if (pair.local.periods.length) scope.periods = pair.local.periods;
  }
  return scope;
}

export function receiptOf(reference: RenderedReference, cell: NonNullable<RenderedReference['cell']>): FigureReceipt {
  return {
    ref: reference.ref,
    text: reference.text,
    toolCallId: cell.source.toolCallId,
    tool: cell.source.name ?? 'unknown',
    ...(cell.rowIndex !== undefined ? { row: cell.rowIndex + 1 } : {}),
    column: cell.column,
    value: cell.value,
  };
}

/**
 * What `calculate` may compute with and `visualize` may chart: the turn's data results so far. An
 * operand is supported when a cell equals it at the precision written (its sign is the expression's).
 * `describe` reads a result's columns from the definitions (GroundingCatalog) when one is asked for.
 */
export function operandEvidence(
  sources: readonly GroundingSource[],
  describe: (sources: readonly GroundingSource[]) => Promise<GroundingSource[]> = (s) => Promise.resolve([...s]),
): TurnEvidence {
  let evidence: Evidence | undefined;
  return {
    async dataResult(toolCallId: string) {
      // The latest result of that id (a model may reuse one).
      const source = [...sources].reverse().find((s) => s.toolCallId === toolCallId && s.name !== undefined && isDataSource(s));
      if (!source) return undefined;
      const [described] = await describe([source]);
      return { ...described, name: source.name! };
    },
    supportOf(text: string): string | undefined {
      const value = Math.abs(Number(text));
      if (!/^\d+(?:\.\d+)?$/.test(text) || !Number.isFinite(value)) return undefined;
      evidence ??= collectEvidence(sources);
      const half = 0.5 * 10 ** -(text.split('.')[1]?.length ?? 0);
      const cell = evidence.cells.find((c) => Math.abs(Math.abs(c.value) - value) <= half + 1e-9 * Math.max(1, value));
      return cell?.row.source.toolCallId;
    },
  };
}

/** A number as the text states it (kept for readers of figures such as the evaluation). */
export interface NumberClaim {
  text: string;
  mantissa: number;
  scale: number;
  decimals: number;
  percent: boolean;
  index: number;
}

/** Every figure of a text, in order (dates, ordinals, list markers and ids left out). */
export function extractNumbers(text: string, locale?: string): NumberClaim[] {
  return readText(text, { locale }).figures.map((f) => ({
    text: f.text,
    mantissa: f.basisPoints ? f.mantissa / 100 : f.mantissa,
    scale: f.scale,
    decimals: f.decimals,
    percent: f.percent || f.basisPoints,
    index: f.index,
  }));
}

/** The message that asks the model, once, to fix what it could not support. */
export function correctionRequest(grounding: Grounding): string {
  const lines = grounding.unsupported.map((figure) => `- "${figure.ref ?? figure.text}": ${REASON_TEXT[figure.reason]}`);
  return [
    'These figures in your answer are not supported by the data your tools returned in this turn:',
    ...lines,
    'Rewrite your answer. Cite each figure as a reference to its cell ({{r<N>.<row>.<column>}}, or {{r<N>}} for a ' +
      'calculate result), or state it exactly as a tool returned it (you may round it), in the row it belongs to, ' +
      'with its sign, unit and currency. For a difference, total, share or growth rate, call the calculate tool ' +
      'over the returned values and state its result; you cannot call tools now, so if you have no such result, ' +
      'leave the derived figure out. Correct or remove every figure listed; if the data does not give one, say so.',
  ].join('\n');
}

const REASON_TEXT: Record<UnsupportedReason, string> = {
  no_such_value: 'no such value in the results',
  other_row: 'this value belongs to another row than the one your sentence names',
  wrong_sign: 'wrong sign: the value has the opposite sign',
  wrong_unit: 'wrong unit: the value is in another unit or currency (a count, an amount, a percentage or a ratio)',
  wrong_scale: 'wrong scale: the value is a thousand, a million or a hundred times larger or smaller',
  from_question: 'taken from the question, not from the results',
  not_data: 'found only in a description or definition, not in the data',
  bad_reference:
    'this reference points at no cell of a result you received (no such result, row or column, or a result withheld ' +
    'from this user): cite a ref and a column exactly as a result shows them',
};

// ---------------------------------------------------------------------------------------------

type Verdict = { supported?: SupportedFigure; unsupported?: UnsupportedFigure; cell?: Cell };
type ValueMatch = 'exact' | 'sign' | 'unit' | 'scale';
type RowStatus = 'confirmed' | 'neutral' | 'unverifiable' | 'conflict';
const STATUS_RANK: Record<RowStatus, number> = { confirmed: 0, neutral: 1, unverifiable: 2, conflict: 3 };

function valueOf(figure: Figure): number {
  return figure.mantissa * figure.scale;
}

function isYear(figure: Figure): boolean {
  return (
    figure.bare &&
    !figure.words &&
    // A sign read from words ("stieg 2024") is the verb's, not the year's.
    (figure.sign === 'none' || !/[-−–+]/.test(figure.text)) &&
    /^\d{4}$/.test(figure.text) &&
    figure.mantissa >= 1900 &&
    figure.mantissa <= 2100
  );
}

function yearPeriod(figure: Figure): PeriodMention {
  const year = String(figure.mantissa);
  return {
    text: figure.text,
    index: figure.index,
    end: figure.end,
    from: `${year}-01-01`,
    to: `${year}-12-31`,
    grain: 'year',
    yearless: false,
  };
}

function sameNumber(a: Figure, b: Figure): boolean {
  const x = Math.abs(valueOf(a));
  const y = Math.abs(valueOf(b));
  return (a.percent || a.basisPoints) === (b.percent || b.basisPoints) && Math.abs(x - y) <= 1e-9 * Math.max(1, x);
}

/** Words that deny the number after them ("not 40", "nicht 40", "pas 40", "no 40", "non 50", "não 40", "niet 30"). */
const NEGATION_BEFORE =
  /(?:\bnot|\bnicht|\bkeine?|\bpas|\bno|\bnon|\bnão|\bniet|\bgeen|\binstead of|\brather than|\bstatt|\banstatt|\bau lieu de|\ben lugar de|\binvece di|\bem vez de|\bin plaats van)\s+(?:the\s+|die\s+|les\s+|los\s+|las\s+|i\s+|os\s+|de\s+)?$/i;

/** Kinds of cells a share ("4 in 10") can be: any other holds no share. */
const SHARE_KINDS: ReadonlySet<string> = new Set(['ratio', 'percent', 'any', 'number']);

const CONDITION_BEFORE =
  /(?:\b(?:over|above|under|below|more than|less than|fewer than|greater than|at least|at most|exceeding|between|from|and|to|than|threshold of|minimum of|maximum of|min|max|up to|über|unter|mehr als|weniger als|mindestens|höchstens|plus de|moins de|au-dessus de|en dessous de|dépassen?t?|au moins|más de|menos de|por encima de|por debajo de|superan?(?: las| los)?|al menos|più di|meno di|oltre|sopra|sotto|superano|almeno|mais de|menos de|acima de|abaixo de|passam de|ultrapassam|pelo menos|meer dan|minder dan|boven(?: de)?|onder(?: de)?|minstens)|[<>≤≥=])\s*(?:[$€£]|[A-Z]{3}\s)?\s*$/i;

/**
 * Whether the answer restates a condition (the question's own number, or the filter a call applied)
 * rather than claiming a result: "deals over $50,000", or the same word before it as in the question.
 */
function restatesCondition(answer: string, figure: Figure, question: string, asked: readonly Figure[]): boolean {
  const before = answer.slice(Math.max(0, figure.index - 30), figure.index);
  if (CONDITION_BEFORE.test(before)) return true;
  // The same word before it as in the question ("with probability 75"), unless that word states a
  // result ("do we have 25" → "we have 25" repeats the user's guess as a finding).
  const word = lastWord(before);
  if (word === undefined || STATES_A_RESULT.has(word)) return false;
  return asked.some((q) => sameNumber(q, figure) && word === lastWord(question.slice(Math.max(0, q.index - 30), q.index)));
}

const STATES_A_RESULT = new Set(
  'is are was were be been being have has had do does did won win lost lose closed made make reached reach hit got get generated brought total totals totaled came come exactly about around roughly approximately nearly almost only just worth at of'.split(
    ' ',
  ),
);

function lastWord(text: string): string | undefined {
  return /([\p{L}]+)[^\p{L}]*$/u.exec(text)?.[1]?.toLowerCase();
}

/**
 * Whether a small whole number counts the values its sentence (and the list it opens) names: "Three reps won more
 * than 40 deals: Lucas Moreau (49), Priya Nair (48) and Sofia Rossi (47)".
 */
function countsListed(answer: string, figure: Figure, scopes: AnswerScopes): boolean {
  const value = Math.abs(figure.mantissa * figure.scale);
  if (!figure.bare || figure.decimals || value < 2 || value > 12 || !Number.isInteger(value)) return false;
  const sentence = scopes.sentenceAt(figure.index);
  if (!sentence) return false;
  const { start } = sentence;
  let { end } = sentence;
  // A sentence that ends with a colon names the list after it (its items, up to a blank line or other text).
  if (end - figure.end < 400 && /:\s*$/.test(answer.slice(figure.end, end))) {
    const next = /\n\s*\n|\n(?![ \t]*(?:[-*+•]|\d+[.)])\s)/.exec(answer.slice(end + 1, end + 4000));
    end = next ? end + 1 + next.index : Math.min(answer.length, end + 4000);
  }
  const byDimension = new Map<string, Set<string>>();
  for (const mention of scopes.mentionsIn(start, end)) {
    for (const dimension of mention.dimensions)
      byDimension.set(dimension, (byDimension.get(dimension) ?? new Set()).add(mention.value));
  }
  return [...byDimension.values()].some((values) => values.size === value);
}

/** The scale and currency of the figure before a bare decimal in its sentence, said once for both ("44,2 M$ … 20,7"). */
function scaleBefore(
  answer: string,
  figure: Figure,
  figures: readonly Figure[],
): { scale: number; currency?: string } | undefined {
  if (!figure.decimals || figure.scale !== 1 || figure.currency || figure.percent || figure.words) return undefined;
  const at = figures.indexOf(figure);
  for (let i = at - 1; i >= 0 && i >= at - 4; i--) {
    const previous = figures[i];
    if (/[.!?\n]/.test(answer.slice(previous.end, figure.index).replace(/\d[.,]\d/g, ''))) return undefined;
    if (previous.scale !== 1) return { scale: previous.scale, currency: previous.currency };
  }
  return undefined;
}

/** Where the answer repeats an identifier of the results (an id, a phone number, a code, a name with digits). */
function identifierSpans(answer: string, identifiers: readonly string[]): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  for (const identifier of identifiers) {
    for (let at = answer.indexOf(identifier); at >= 0; at = answer.indexOf(identifier, at + 1)) {
      const end = at + identifier.length;
      if (/[\p{L}\p{N}]/u.test(answer[at - 1] ?? '') || /[\p{L}\p{N}]/u.test(answer[end] ?? '')) continue;
      spans.push([at, end]);
    }
  }
  return [...spans, ...regroupedIdentifierSpans(answer, identifiers)];
}

/** Runs of a text that may be a phone number or a code written with other separators: "+1 (319) 555-7612", "SF 0012345". */
const DIGIT_RUN = /(?<![\p{L}\p{N}])(?:[A-Za-z]{1,4}[-\s/.]?)?\+?\(?\d[\d \t\u00a0\u202f\-–()./]{0,28}\d\)?/gu;
const MAX_GROUPS = 12;

/**
 * Where the answer writes an identifier of the results (a phone number, a code with four digits or more) with
 * other separators, or a phone number without its country code: "(319) 555-7612" for "+1 319 555 7612",
 * "SF 0012345" for "SF-0012345".
 */
function regroupedIdentifierSpans(answer: string, identifiers: readonly string[]): Array<[number, number]> {
  const known = new Set<string>();
  for (const identifier of identifiers) {
    const digits = identifier.replace(/\D/g, '');
    if (digits.length < 4 || identifier.length > 40) continue;
    if (/^[\d\s+\-–()./]+$/.test(identifier)) {
      // A phone number: its digits, or their end (a country code left out).
      for (let from = 0; digits.length - from >= 7; from++) known.add(digits.slice(from));
    } else if (/^[A-Za-z]{0,4}[\d\s\-–()./A-Za-z]*$/.test(identifier)) {
      const code = identifier.replace(/[^A-Za-z\d]/g, '').toLowerCase();
      if (code.length >= 5) known.add(code);
      if (digits.length >= 7 && /^[A-Za-z]*\d+$/.test(code)) known.add(digits);
    }
  }
  if (!known.size) return [];
  const spans: Array<[number, number]> = [];
  // A country code alone ("indicatif +1", "prefisso +39") of a phone number of the results.
  const countryCodes = new Set(identifiers.flatMap((id) => /^\+(\d{1,3})[\s\-.(]/.exec(id)?.[1] ?? []));
  for (const code of answer.matchAll(/(?<![\p{L}\p{N}])\+(\d{1,3})(?![\p{N}]|[.,]\d|\s*\(?\d)/gu))
    if (countryCodes.has(code[1])) spans.push([code.index, code.index + code[0].length]);
  for (const run of answer.matchAll(DIGIT_RUN)) {
    const groups = [...run[0].matchAll(/[A-Za-z]+|\d+/g)].slice(0, MAX_GROUPS);
    // The longest stretch of whole groups that is an identifier (or a phone number's end).
    let best: [number, number] | undefined;
    for (let i = 0; i < groups.length && !best; i++) {
      for (let j = groups.length - 1; j >= i; j--) {
        const parts = groups.slice(i, j + 1).map((g) => g[0].toLowerCase());
        const key = parts.join('');
        // A national number: its trunk 0 ("0211 5550120", "+31 (0)20 555 01 66") is no digit of the international one.
        const national = parts
          .filter((part, k) => k === 0 || part !== '0')
          .join('')
          .replace(/^0(?=\d)/, '');
        if (key.length < 5 || !(known.has(key) || (national.length >= 7 && known.has(national)))) continue;
        const start = run.index + groups[i].index - (/[+(]$/.test(run[0].slice(0, groups[i].index)) ? 1 : 0);
        const end =
          run.index + groups[j].index + groups[j][0].length + (run[0][groups[j].index + groups[j][0].length] === ')' ? 1 : 0);
        best = [start, end];
        break;
      }
    }
    if (best) spans.push(best);
  }
  return spans;
}

/** Before the size of a whole: "6th of 11", "sur 11 pays", "Con 12 comerciales", "among the 11 countries". */
const OUT_OF_BEFORE =
  /(?<![\p{L}])(?:of|out of|among|with|sur|parmi|avec|de|entre|con|von|unter|mit|van|onder|met|su|tra|fra|com|dos|das|dei|degli|delle)\s+(?:(?:the|all|les|los|las|die|den|der|de|le|la|i|gli|le|os|as|het|todos|todas|tutti|alle)\s+)?$/iu;

const rowCountCache = new WeakMap<Evidence, Set<number>>();

/** How many rows each result of the turn lists (two or more). */
function rowCounts(evidence: Evidence): Set<number> {
  let counts = rowCountCache.get(evidence);
  if (!counts) {
    const bySource = new Map<unknown, number>();
    for (const row of evidence.rows) bySource.set(row.source, (bySource.get(row.source) ?? 0) + 1);
    counts = new Set([...bySource.values()].filter((n) => n >= 2));
    rowCountCache.set(evidence, counts);
  }
  return counts;
}

/** Binds a figure to the best cell: equal in value, unit, scale and sign, in a row its clause agrees with. */
function bind(figure: Figure, scope: FigureScope, evidence: Evidence, echo: boolean): Verdict {
  let best: { cell: Cell; status: RowStatus } | undefined;
  const near = new Set<ValueMatch>();
  for (const cell of candidateCells(figure, evidence)) {
    const match = matchValue(figure, cell);
    if (!match) continue;
    if (match !== 'exact') {
      near.add(match);
      continue;
    }
    const status = rowStatus(cell, scope, evidence);
    if (!best || STATUS_RANK[status] < STATUS_RANK[best.status]) best = { cell, status };
    if (status === 'confirmed') break;
  }
  if (best && (best.status === 'confirmed' || best.status === 'neutral')) {
    const { cell } = best;
    return {
      cell,
      supported: {
        text: figure.text,
        toolCallId: cell.row.source.toolCallId,
        ...(cell.row.index !== undefined ? { row: cell.row.index } : {}),
        column: cell.column,
        entityChecked: best.status === 'confirmed',
      },
    };
  }
  const reason: UnsupportedReason = best
    ? 'other_row'
    : near.has('sign')
      ? 'wrong_sign'
      : near.has('unit')
        ? 'wrong_unit'
        : near.has('scale')
          ? 'wrong_scale'
          : echo
            ? 'from_question'
            : evidence.descriptive.some((value) => closeTo(figure, value))
              ? 'not_data'
              : 'no_such_value';
  return { unsupported: { text: figure.text, reason } };
}

/** Cells sorted by size, to find those near a figure without comparing it with every cell of the turn. */
const indexes = new WeakMap<Evidence, { cells: Cell[]; sizes: number[]; order: Map<Cell, number> }>();

/** The first index whose size is at least `size`. */
function lowerBound(sizes: readonly number[], size: number): number {
  let [low, high] = [0, sizes.length];
  while (low < high) {
    const middle = (low + high) >> 1;
    if (sizes[middle] < size) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The cells that could match the figure in any of the ways `matchValue` tries (as a percentage of a
 * ratio, in basis points, at another scale), in the turn's order: every other cell is too far off.
 */
function candidateCells(figure: Figure, evidence: Evidence): Cell[] {
  let index = indexes.get(evidence);
  if (!index) {
    const cells = [...evidence.cells].sort((a, b) => Math.abs(a.value) - Math.abs(b.value));
    index = { cells, sizes: cells.map((c) => Math.abs(c.value)), order: new Map(evidence.cells.map((cell, i) => [cell, i])) };
    indexes.set(evidence, index);
  }
  const target = Math.abs(figure.mantissa);
  const { half, step } = precisionOf(figure);
  // As far as `compare` reaches for this figure: its last digit, a hedge, the other end of a range.
  let reach = figure.approximation === 'about' || figure.range ? Math.max(half, step) : half;
  if (figure.approximation === 'over' || figure.approximation === 'under') reach = Math.max(half, boundReach(figure));
  if (figure.range) reach = Math.max(reach, Math.abs(Math.abs(figure.range.other / figure.scale) - target));
  const [low, high] = [Math.max(0, target - reach - half) * figure.scale, (target + reach + half) * figure.scale];
  const found = new Set<Cell>();
  for (const unit of [1, 100, 1e4]) {
    for (const factor of [1, ...SCALE_FACTORS, ...PERCENT_FACTORS]) {
      const divisor = unit * factor;
      const from = lowerBound(index.sizes, (low / divisor) * (1 - 1e-9));
      for (let i = from; i < index.cells.length && index.sizes[i] <= (high / divisor) * (1 + 1e-9); i++)
        found.add(index.cells[i]);
    }
  }
  const order = index.order;
  return [...found].sort((a, b) => order.get(a)! - order.get(b)!);
}

/** The values a cell may be written as in the figure's unit, and whether that unit fits the column. */
function shownValues(figure: Figure, cell: Cell): { values: number[]; unitFits: boolean } {
  const { kind, currency } = cell.meaning;
  const v = cell.value;
  if (figure.percent || figure.basisPoints) {
    const percents = kind === 'percent' ? [v] : kind === 'ratio' ? [v * 100] : [v, v * 100];
    const values = figure.basisPoints ? percents.map((p) => p * 100) : percents;
    // Percentage points are a difference of two percentages, a percentage change is relative: "11.7%" is no "11.7 pp".
    const change = figure.points ? cell.change !== 'relative' && cell.change !== 'ratio' : cell.change !== 'points';
    return { values, unitFits: kind !== 'money' && kind !== 'count' && (change || figure.fraction !== undefined) };
  }
  if (figure.currency) {
    const unitFits = kind !== 'count' && kind !== 'percent' && kind !== 'ratio' && (!currency || currency === figure.currency);
    return { values: [v], unitFits };
  }
  return { values: [v], unitFits: true };
}

/**
 * Half a unit of the last digit shown (in the figure's scale), and how far a hedge may reach: the
 * step of its last significant digit ("about 450": 10), at most a tenth of the figure ("about 300"
 * is not 254).
 */
function precisionOf(figure: Figure): { half: number; step: number } {
  if (figure.tolerance !== undefined) return { half: figure.tolerance, step: 2 * figure.tolerance };
  const half = 0.5 * 10 ** -figure.decimals;
  let step = 10 ** -figure.decimals;
  if (figure.decimals === 0) {
    let integer = Math.abs(Math.round(figure.mantissa));
    while (integer > 0 && integer % 10 === 0) {
      integer /= 10;
      step *= 10;
    }
  }
  return { half, step: Math.max(10 ** -figure.decimals, Math.min(step, Math.abs(figure.mantissa) / 10)) };
}

/** How far "over", "nearly" reach in their direction: a significant step, or a tenth of the figure. */
function boundReach(figure: Figure): number {
  return Math.max(precisionOf(figure).step, Math.abs(figure.mantissa) / 10);
}

function matchValue(figure: Figure, cell: Cell): ValueMatch | undefined {
  const { values, unitFits } = shownValues(figure, cell);
  let found: ValueMatch | undefined;
  for (const value of values) {
    const match = compare(figure, value, cell.signed);
    if (match === 'exact') {
      if (unitFits) return 'exact';
      found = 'unit';
    } else if (match && !found) found = match;
  }
  if (found) return found;
  // A percentage of a count or an amount, or an amount written as a percentage.
  if (!unitFits) return undefined;
  return scaleMatch(figure, cell) ? 'scale' : undefined;
}

/** `exact` when `value` is the figure at the precision shown (hedges and ranges widen it); `sign` when only the sign differs. */
function compare(figure: Figure, value: number, signed: boolean): ValueMatch | undefined {
  const shown = Math.abs(value / figure.scale);
  const target = Math.abs(figure.mantissa);
  const { half, step } = precisionOf(figure);
  const eps = 1e-9 * Math.max(1, shown);
  let fits: boolean;
  if (figure.range) {
    const other = Math.abs(figure.range.other / figure.scale);
    const [low, high] = [Math.min(target, other), Math.max(target, other)];
    // Anything between its ends only for a range of round numbers ("between 250 and 320"); "between 254 and 315"
    // names the smallest and the largest.
    const round = (n: number) => n < 20 || [0, 5].includes(Math.round(n * 10 ** figure.decimals) % 10);
    fits =
      Math.abs(shown - target) <= Math.max(half, step / 2) + eps ||
      (round(low) && round(high) && shown >= low - half && shown <= high + half);
  } else if (figure.approximation === 'about') {
    fits = Math.abs(shown - target) <= Math.max(half, step / 2) + eps;
  } else if (figure.approximation === 'over') {
    fits = shown >= target - half - eps && shown <= target + boundReach(figure) + eps;
  } else if (figure.approximation === 'under') {
    fits = shown <= target + half + eps && shown >= target - boundReach(figure) - eps;
  } else {
    fits = Math.abs(shown - target) <= half + eps;
  }
  if (!fits) return undefined;
  if (value === 0 || figure.comparative || figure.sign === 'none') return 'exact';
  const negative = value < 0;
  if ((figure.sign === 'negative') === negative) return 'exact';
  // A difference's sign depends on what was subtracted from what; its words say the direction.
  return signed ? 'sign' : 'exact';
}

const SCALE_FACTORS = [1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9];
const PERCENT_FACTORS = [100, 0.01];

/** The figure is the cell at another scale: "$1.2k" for 1,200,000, "0.25%" for a ratio of 0.25. */
function scaleMatch(figure: Figure, cell: Cell): boolean {
  if (figure.scale === 1 && !figure.percent && !figure.basisPoints && !figure.currency) return false;
  const factors = figure.percent || figure.basisPoints ? [...SCALE_FACTORS, ...PERCENT_FACTORS] : SCALE_FACTORS;
  const { half } = precisionOf(figure);
  const target = Math.abs(figure.mantissa);
  const base = cell.meaning.kind === 'ratio' && figure.percent ? cell.value * 100 : cell.value;
  return factors.some((factor) => {
    const shown = Math.abs((base * factor) / figure.scale);
    return Math.abs(shown - target) <= half + 1e-9 * Math.max(1, shown);
  });
}

/** Whether a number of a description could be the figure (at the precision shown, or as a percentage). */
function closeTo(figure: Figure, value: number): boolean {
  const candidates = figure.percent ? [value, value * 100] : [value];
  return candidates.some((candidate) => compare(figure, candidate, false) === 'exact');
}

/** Whether the cell's row agrees with what the figure's clause names. */
function rowStatus(cell: Cell, scope: FigureScope, evidence: Evidence): RowStatus {
  const labelsOf = (dimension: string): Set<string> | undefined => {
    const own = cell.row.labels.get(dimension);
    const context = cell.meaning.context?.[dimension];
    if (!context) return own;
    return new Set([...(own ?? []), ...context]);
  };
  let confirmed = 0;
  let unverifiable = 0;
  const check = (named: Map<string, Set<string>>, countUnverifiable: boolean): boolean => {
    for (const [dimension, values] of named) {
      const labels = labelsOf(dimension);
      if (!labels?.size) {
        if (countUnverifiable) unverifiable++;
        continue;
      }
      if ([...values].some((value) => labels.has(value))) confirmed++;
      else return false;
    }
    return true;
  };
  if (!check(scope.own, true) || !check(scope.inherited, false)) return 'conflict';
  // A row's own dates and buckets say which period it is; else the range its call filtered on.
  const periods = cell.row.periods.length ? cell.row.periods : cell.row.rangePeriods;
  if (scope.periods.length && periods.length) {
    const overlaps = scope.periods.some((mention) => periods.some((period) => periodsOverlap(mention, period)));
    if (!overlaps) return 'conflict';
    confirmed++;
  }
  // "Open pipeline" is no won revenue, "won" no pipeline.
  if (scope.concept && conceptConflict(scope.concept, cell, evidence, labelsOf)) return 'conflict';
  // "Deals with no owner": a row whose owner (or another label of the results) is empty.
  if (scope.unassigned) {
    if (![...(cell.row.empty ?? [])].some((dimension) => labelDimensions(evidence).has(dimension))) return 'conflict';
    confirmed++;
  }
  // "The average deal" is no sum, "the total" no average.
  const aggregate = cell.meaning.aggregate;
  if (scope.measure === 'average' && (aggregate === 'sum' || aggregate === 'count')) return 'conflict';
  if (scope.measure === 'total' && aggregate === 'avg') return 'conflict';
  // "12 accounts" is not a count of deals.
  if (cell.meaning.kind === 'count' && cell.meaning.counts) {
    const noun = /^\s*(?:[a-z]+\s+)?([a-z]+)/.exec(scope.after);
    const counted = evidence.objects.get(noun?.[1] ?? '') ?? evidence.objects.get(/^\s*([a-z]+)/.exec(scope.after)?.[1] ?? '');
    if (counted && counted !== dimensionOf(cell.meaning.counts)) return 'conflict';
  }
  // The clause names an owner (a stage, ...) this row does not have: the figure is said of another row.
  if (unverifiable > 0 && !scope.whole) return 'unverifiable';
  if (confirmed > 0) return 'confirmed';
  return 'neutral';
}

/** What a column's name says its numbers are: won, lost or open deals. */
function columnConcept(column: string): Concept | undefined {
  if (/pipeline|(?:^|[_.])open(?:$|[_.])/i.test(column)) return 'open';
  if (/(?:^|[_.])won(?:$|[_.])/i.test(column)) return 'won';
  if (/(?:^|[_.])lost(?:$|[_.])/i.test(column)) return 'lost';
  return undefined;
}

/**
 * Whether a cell is of another kind of deal than the clause says: open pipeline from a row or column of won
 * (or lost) deals, won from a row of another stage or a pipeline column.
 */
function conceptConflict(
  concept: Concept,
  cell: Cell,
  evidence: Evidence,
  labelsOf: (dimension: string) => Set<string> | undefined,
): boolean {
  const byColumn = columnConcept(cell.column);
  if (byColumn && byColumn !== concept) return true;
  // The dimensions whose values include won and lost (a stage).
  const dimensions = new Set([...(evidence.vocabulary.get('won') ?? []), ...(evidence.vocabulary.get('lost') ?? [])]);
  for (const dimension of Object.keys(cell.meaning.context ?? {})) dimensions.add(dimension);
  for (const dimension of dimensions) {
    const labels = labelsOf(dimension);
    if (!labels?.size) continue;
    if (concept === 'open' && (labels.has('won') || labels.has('lost'))) return true;
    if (
      concept !== 'open' &&
      !labels.has(concept) &&
      (labels.has('won') || labels.has('lost') || evidence.vocabulary.has(concept))
    )
      return true;
  }
  return false;
}

const labelDimensionCache = new WeakMap<Evidence, Set<string>>();

/** The dimensions some row of the results is named by (owner, stage, ...). */
function labelDimensions(evidence: Evidence): Set<string> {
  let dimensions = labelDimensionCache.get(evidence);
  if (!dimensions) {
    dimensions = new Set([...evidence.vocabulary.values()].flatMap((set) => [...set]));
    labelDimensionCache.set(evidence, dimensions);
  }
  return dimensions;
}

function periodsOverlap(mention: PeriodMention, period: { from: string; to: string }): boolean {
  if (mention.yearless) {
    // "in March": any year's March.
    const months = (from: string, to: string) => {
      const list: number[] = [];
      let [y, m] = from.split('-').map(Number);
      const [ty, tm] = to.split('-').map(Number);
      for (let guard = 0; (y < ty || (y === ty && m <= tm)) && guard < 24; guard++) {
        list.push(m);
        m = m === 12 ? 1 : m + 1;
        if (m === 1) y++;
      }
      return list;
    };
    const wanted = months(`2000${mention.from.slice(4)}`, `2000${mention.to.slice(4)}`);
    return months(period.from, period.to).some((m) => wanted.includes(m));
  }
  return mention.from <= period.to && period.from <= mention.to;
}

/** Words that date the answer itself: "as of", "Stand:", "à la date du", "a fecha de", "aggiornato al", "peildatum". */
const AS_OF =
  /(?:\bas (?:of|at)|\bStand(?:\s+vom)?:?|\bDatenstand:?|\bà la date du|\ben date du|\bmis à jour le|\ba fecha de|\ba día de|\bactualizado (?:el|a)|\baggiornat[oi] al|\bin data|\batualizado em|\bposição em|\bpeildatum:?|\bstand per|\bbijgewerkt op)\s*$/i;

/** Dates are claims when the results hold dates, except those of the question and of the calls' filters. */
function dateClaims(
  answer: string,
  dates: readonly DateMention[],
  asked: readonly DateMention[],
  evidence: Evidence,
): DateMention[] {
  return dates.filter((mention) => {
    // "as of 2025-07-01" dates the answer, not a record.
    if (AS_OF.test(answer.slice(Math.max(0, mention.index - 24), mention.index))) return false;
    if (mention.date && !evidence.dates.size) return false;
    if (!mention.date && (!mention.time || !evidence.times.size)) return false;
    if (mention.date && (evidence.filterDates.has(mention.date) || asked.some((q) => q.date === mention.date))) return false;
    return true;
  });
}

/** Between two dates of a span: "31 March – 6 April", "du 3 au 9 mars", "31 maart t/m 6 april". */
const DATE_SPAN_JOIN = /^\s*(?:-|–|—|to|until|till|bis|au|à|al|a|hasta|até|tot|t\/m|tot en met)\s*$/i;
const MAX_SPAN_DAYS = 7;

/** Whether a date bounds a span of at most a week with another date of the answer that the results hold. */
function spanEndOf(
  answer: string,
  mention: DateMention,
  dates: readonly DateMention[],
  verdicts: ReadonlyMap<DateMention, Verdict>,
): boolean {
  const at = dates.indexOf(mention);
  const day = (d: DateMention) => (d.date ? Date.parse(d.date.replace(/^--/, '2001-')) : NaN);
  return [dates[at - 1], dates[at + 1]].some((other) => {
    if (!other || !verdicts.get(other)?.supported) return false;
    const [first, second] = other.index < mention.index ? [other, mention] : [mention, other];
    if (!DATE_SPAN_JOIN.test(answer.slice(first.end, second.index))) return false;
    const days = Math.abs(day(mention) - day(other)) / 86_400_000;
    return days <= MAX_SPAN_DAYS;
  });
}

function bindDate(mention: DateMention, evidence: Evidence, scope: FigureScope): Verdict {
  let cell = mention.date ? evidence.dates.get(mention.date) : undefined;
  if (mention.date?.startsWith('--')) {
    const monthDay = mention.date.slice(2);
    const day = [...evidence.dates.keys()].find((d) => d.slice(5) === monthDay);
    cell = day ? evidence.dates.get(day) : undefined;
  }
  if (mention.time && (cell || !mention.date)) cell = evidence.times.get(mention.time);
  if (!cell) return { unsupported: { text: mention.text, reason: 'no_such_value' } };
  // The rows whose own date it is: one of them must be the row the clause names.
  if (mention.date && !mention.time) {
    const days = (day: string) =>
      mention.date!.startsWith('--') ? day.slice(5) === mention.date!.slice(2) : day === mention.date;
    const rows = evidence.rows.filter((row) => row.periods.some((p) => p.grain === 'day' && days(p.from)));
    const column = cell.column;
    const statuses = rows.map((row) => ({
      row,
      status: rowStatus({ row, column, value: 0, meaning: { kind: 'any' }, signed: false }, scope, evidence),
    }));
    const fitting = statuses.find((s) => s.status === 'confirmed') ?? statuses.find((s) => s.status === 'neutral');
    if (rows.length && !fitting) return { unsupported: { text: mention.text, reason: 'other_row' } };
    if (fitting) cell = { row: fitting.row, column };
  }
  return {
    supported: {
      text: mention.text,
      toolCallId: cell.row.source.toolCallId,
      ...(cell.row.index !== undefined ? { row: cell.row.index } : {}),
      column: cell.column,
      entityChecked: false,
    },
  };
}
