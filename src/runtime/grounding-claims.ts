/**
 * Claims an answer makes in words rather than digits, checked against the order and the ratios of the
 * results: a rank ("#2", "second place", "zweiter Platz", "the best quarter of 2024 was Q3"), the order of
 * a numbered list, and a multiple ("doubled", "halbiert", "el doble", "more than twice"). Each is checked
 * only where the results let it be: a row the clause names, among rows of one result to rank it against.
 */
import { between, type AnswerScopes, type Mention, type Span } from './grounding-clauses';
import { isValueSource, type Cell, type Evidence, type EvidenceRow } from './grounding-evidence';
import type { PeriodMention } from './grounding-figures';

/** A figure of the answer, with the cell that supports it when one does. */
export interface BoundFigure {
  index: number;
  end: number;
  cell?: Cell;
}

/** A claim in words, and whether the results bear it out (`cell`: one that does). */
export interface ClaimCheck {
  index: number;
  text: string;
  supported: boolean;
  cell?: Cell;
}

interface Context {
  answer: string;
  scopes: AnswerScopes;
  mentions: readonly Mention[];
  periods: readonly PeriodMention[];
  figures: readonly BoundFigure[];
  evidence: Evidence;
}

/** Ranks, list orders and multiples of `answer` the results can say something of. */
export function checkClaims(
  answer: string,
  scopes: AnswerScopes,
  mentions: readonly Mention[],
  periods: readonly PeriodMention[],
  figures: readonly BoundFigure[],
  evidence: Evidence,
): ClaimCheck[] {
  const context: Context = { answer, scopes, mentions, periods, figures, evidence };
  return [...rankClaims(context), ...listClaims(context), ...multipleClaims(context)];
}

// ---------------------------------------------------------------------------------------------
// Words

/** Ordinal words up to ten in the languages read (with German and Romance endings). */
const ORDINAL_STEMS: ReadonlyArray<[number, string]> = [
  [1, 'first|erste[nrsm]?|premi(?:er|ère)|primer[oa]?|prim[oa]|primeir[oa]|eerste'],
  [2, 'second|zweite[nrsm]?|deuxième|seconde?|segund[oa]|second[oa]|tweede'],
  [3, 'third|dritte[nrsm]?|troisième|tercer[oa]?|terz[oa]|terceir[oa]|derde'],
  [4, 'fourth|vierte[nrsm]?|quatrième|cuart[oa]|quart[oa]|vierde'],
  [5, 'fifth|fünfte[nrsm]?|cinquième|quint[oa]|vijfde'],
  [6, 'sixth|sechste[nrsm]?|sixième|sext[oa]|sest[oa]|zesde'],
  [7, 'seventh|siebte[nrsm]?|septième|séptim[oa]|settim[oa]|sétim[oa]|zevende'],
  [8, 'eighth|achte[nrsm]?|huitième|octav[oa]|ottav[oa]|oitav[oa]|achtste'],
  [9, 'ninth|neunte[nrsm]?|neuvième|noven[oa]|non[oa]|negende'],
  [10, 'tenth|zehnte[nrsm]?|dixième|décim[oa]|decim[oa]|tiende'],
];
const ORDINAL_PATTERNS = ORDINAL_STEMS.map(([n, stem]) => [n, new RegExp(`^(?:${stem})$`, 'i')] as const);
const ORDINAL_WORD = ORDINAL_STEMS.map(([, stem]) => stem).join('|');
const DIGIT_ORDINAL = String.raw`\d{1,2}(?:st|nd|rd|th|\.|er|re|e|ème|eme|º|°|ª|o|a)`;
const PLACE = String.raw`place|position|spot|rank|platz|rang|stelle|plaats|positie|lugar|puesto|posición|posto|posizione|posição|colocado|classificato`;
const COPULA = String.raw`makes it|making it|is|was|ranks|ranked|comes|came|finished|sits|stands|ist|liegt|steht|landet|est|arrive|se classe|se place|es|está|queda|quedó|ocupa|è|si classifica|si piazza|é|fica|ficou|vem|staat|eindigt|komt`;
const ARTICLE = String.raw`the|der|die|das|den|dem|le|la|el|il|lo|o|a|de|het|auf|in|en|em|al|au|op|at|on`;
/** Words after an ordinal that make it no rank ("second quarter", "the first time"). */
const NOT_A_PLACE = String.raw`quarter|quartal|trimestre|kwartaal|half|halbjahr|hälfte|semestre|halfjaar|helft|time|mal|fois|vez|volta|keer|week|woche|semaine|semana|settimana|month|monat|mois|mes|mese|mês|maand|year|jahr|année|año|anno|ano|jaar|deal|deals|line|row|item`;
const DESC_WORDS = String.raw`largest|biggest|highest|best|strongest|größte\w*|grösste\w*|höchste\w*|beste\w*|stärkste\w*|plus (?:grande?s?|gros(?:se)?s?|élevée?s?|importante?s?)|meilleure?s?|mayor(?:es)?|más (?:grandes?|alt[oa]s?)|mejor(?:es)?|più (?:grandi?|grande|alt[oaie])|maggiore|migliore|maior(?:es)?|melhor(?:es)?|mais (?:alt[oa]s?)|grootste|hoogste|sterkste`;
const ASC_WORDS = String.raw`smallest|lowest|worst|weakest|fewest|kleinste\w*|niedrigste\w*|schlechteste\w*|schwächste\w*|wenigsten|plus (?:petite?s?|bas(?:se)?s?|faibles?)|pire|menor(?:es)?|más (?:baj[oa]s?|pequeñ[oa]s?)|peor(?:es)?|più (?:piccol[oaie]|bass[oaie])|peggiore|minore|mais (?:baix[oa]s?)|pior(?:es)?|laagste|slechtste|zwakste|minste`;

function ordinalOf(word: string): number {
  const digits = /^(\d{1,2})/.exec(word);
  if (digits) return Number(digits[1]);
  return ORDINAL_PATTERNS.find(([, pattern]) => pattern.test(word))?.[0] ?? 0;
}

type Direction = 'desc' | 'asc';
interface RankWords {
  index: number;
  end: number;
  rank: number;
  direction: Direction;
}

const RANK_PATTERNS: ReadonlyArray<{ pattern: RegExp; rank: (m: RegExpMatchArray) => number; direction?: Direction }> = [
  // #2, No. 2, Nr. 2, n° 2, Platz 2, rank 3
  {
    pattern: new RegExp(
      String.raw`(?:#\s?|\b(?:no\.|nr\.|number|nummer|numéro|número|numero)\s?|(?<![\p{L}])n[°º]\s?|\b(?:rank(?:ed|s)?|platz|rang)\s+(?:#\s?)?)(\d{1,2})(?![\p{N}]|[.,]\d)`,
      'giu',
    ),
    rank: (m) => Number(m[1]),
  },
  // second place, zweiten Platz, 2º lugar, tweede plaats, 1st place
  {
    pattern: new RegExp(String.raw`(?<![\p{L}\p{N}])(${ORDINAL_WORD}|${DIGIT_ORDINAL})\s*(?:${PLACE})(?![\p{L}])`, 'giu'),
    rank: (m) => ordinalOf(m[1]),
  },
  // is second, è secondo, es el quinto, se classe deuxième, is tweede, vem em segundo
  {
    pattern: new RegExp(
      String.raw`(?<![\p{L}])(?:${COPULA})\s+(?:(?:${ARTICLE})\s+){0,2}(${ORDINAL_WORD}|${DIGIT_ORDINAL})(?![\p{L}\p{N}])(?!\s*-?\s*(?:${NOT_A_PLACE}|${DESC_WORDS}|${ASC_WORDS}|plus|más|più|mais)(?![\p{L}]))`,
      'giu',
    ),
    rank: (m) => ordinalOf(m[1]),
  },
  // second-largest, zweitgrößte, deuxième plus grand, segundo mayor
  {
    pattern: new RegExp(String.raw`(?<![\p{L}\p{N}])(${ORDINAL_WORD}|${DIGIT_ORDINAL})[-\s]?(${DESC_WORDS})(?![\p{L}])`, 'giu'),
    rank: (m) => ordinalOf(m[1]),
    direction: 'desc',
  },
  {
    pattern: new RegExp(String.raw`(?<![\p{L}\p{N}])(${ORDINAL_WORD}|${DIGIT_ORDINAL})[-\s]?(${ASC_WORDS})(?![\p{L}])`, 'giu'),
    rank: (m) => ordinalOf(m[1]),
    direction: 'asc',
  },
  // Dutch: "op één na grootste" (second largest), "op twee na grootste" (third).
  {
    pattern: /(?<![\p{L}])op (één|een|twee|drie) na (?:grootste|hoogste|beste|sterkste)(?![\p{L}])/giu,
    rank: (m) => (['één', 'een', 'twee', 'drie'].indexOf(m[1].toLowerCase()) < 2 ? 2 : m[1].toLowerCase() === 'twee' ? 3 : 4),
    direction: 'desc',
  },
  {
    pattern: /(?<![\p{L}])(zweit|dritt|viert|fünft)(größte|grösste|beste|höchste|stärkste)\w*/giu,
    rank: (m) => ['zweit', 'dritt', 'viert', 'fünft'].indexOf(m[1].toLowerCase()) + 2,
    direction: 'desc',
  },
  // Rank one: the largest, the best quarter, le meilleur, el mayor, leads, lidera, führt, en tête, bovenaan.
  {
    pattern: new RegExp(
      String.raw`(?<![\p{L}])(?:(?:the|der|die|das|den|dem|le|la|les|el|los|las|il|lo|i|gli|o|os|as|het|de)\s+)(?:${DESC_WORDS})(?![\p{L}])|(?<![\p{L}])(?:größte\w*|höchste\w*|stärkste\w*|grootste|hoogste|leads (?:the|with|on|in|all|everyone)|led (?:the|with)|is (?:in the )?lead|takes the lead|tops the|top (?:performer|rep|seller|earner|spot)|führt (?:die|das|den|mit)|an der Spitze|en tête|lidera|encabeza|in testa|guida la classifica|bovenaan)(?![\p{L}])`,
      'giu',
    ),
    rank: () => 1,
    direction: 'desc',
  },
  {
    pattern: new RegExp(
      String.raw`(?<![\p{L}])(?:(?:the|der|die|das|den|dem|le|la|les|el|los|las|il|lo|i|gli|o|os|as|het|de)\s+)(?:${ASC_WORDS})(?![\p{L}])`,
      'giu',
    ),
    rank: () => 1,
    direction: 'asc',
  },
];

/** Words near a rank that count it from the bottom: "second from the bottom", "second-lowest". */
const FROM_BOTTOM = /\b(?:from the bottom|from last|von unten|en partant du bas|desde abajo|dal basso|de baixo|van onderen)\b/i;

function rankWords(answer: string): RankWords[] {
  const found: RankWords[] = [];
  for (const { pattern, rank, direction } of RANK_PATTERNS) {
    for (const match of answer.matchAll(pattern)) {
      const [index, end] = [match.index, match.index + match[0].length];
      if (found.some((f) => f.index < end && index < f.end)) continue;
      const n = rank(match);
      if (n < 1 || n > 50) continue;
      const bottom = FROM_BOTTOM.test(answer.slice(end, end + 25));
      found.push({ index, end, rank: n, direction: direction ?? (bottom ? 'asc' : 'desc') });
    }
  }
  return found.sort((a, b) => a.index - b.index);
}

// ---------------------------------------------------------------------------------------------
// Ranks

/** What a claim is about: a value of the results (an owner, a stage, a deal) or a period. */
type Target = { kind: 'value'; mention: Mention } | { kind: 'period'; period: PeriodMention; within: PeriodMention[] };

function inside<T extends { index: number; end: number }>(sorted: readonly T[], span: Span): T[] {
  return between(sorted, span.start, span.end);
}

/**
 * The values and periods the clause of [index, end) names (else the parts of its sentence before it, nearest
 * first) that a result can rank: the one such is what the claim is about.
 */
function targetOf(context: Context, index: number, end: number): { target: Target; ranked: Ranked[] } | undefined {
  const { clause, nearby } = context.scopes.clauseAt(index, end);
  for (const span of [clause, ...nearby]) {
    const candidates: Target[] = [];
    for (const mention of inside(context.mentions, span))
      if (!candidates.some((c) => c.kind === 'value' && c.mention.value === mention.value))
        candidates.push({ kind: 'value', mention });
    const periods = inside(context.periods, span);
    for (const period of periods)
      candidates.push({
        kind: 'period',
        period,
        within: periods.filter((p) => p !== period && !p.yearless && p.grain !== period.grain),
      });
    const rankable = candidates.flatMap((target) => {
      // A value ranked among the rows of the periods the clause names.
      const ranked = ranksOf(context, target, new Set(), target.kind === 'value' ? periods.filter((p) => !p.yearless) : []);
      return ranked.length ? [{ target, ranked }] : [];
    });
    if (rankable.length === 1) return rankable[0];
    if (rankable.length > 1) return undefined;
  }
  return undefined;
}

function overlaps(period: { from: string; to: string }, mention: PeriodMention): boolean {
  if (mention.yearless) {
    const month = (date: string) => Number(date.slice(5, 7));
    const [from, to] = [month(mention.from), month(mention.to)];
    const [start, stop] = [month(period.from), month(period.to)];
    return start <= to && from <= stop;
  }
  return mention.from <= period.to && period.from <= mention.to;
}

/** Whether a row is the target, and whether it is one of the rows the target is ranked among. */
function matcher(target: Target): { is: (row: EvidenceRow) => boolean; among: (row: EvidenceRow) => boolean } {
  if (target.kind === 'value') {
    const dimensions = [...target.mention.dimensions];
    return {
      is: (row) => dimensions.some((d) => row.labels.get(d)?.has(target.mention.value)),
      among: (row) => dimensions.some((d) => (row.labels.get(d)?.size ?? 0) > 0),
    };
  }
  const within = (row: EvidenceRow) => target.within.every((p) => row.periods.some((rp) => overlaps(rp, p)));
  return {
    is: (row) => within(row) && row.periods.some((p) => overlaps(p, target.period)),
    among: (row) => row.periods.length > 0 && within(row),
  };
}

interface Ranked {
  row: EvidenceRow;
  cell: Cell;
  desc: number;
  asc: number;
}

/**
 * The target's rank by each number of its row, among the rows of the same result (of the periods `within`, for
 * a value: "the largest deal of 2024"); columns may be narrowed.
 */
function ranksOf(
  context: Context,
  target: Target,
  columns: ReadonlySet<string>,
  within: readonly PeriodMention[] = [],
): Ranked[] {
  const matched = matcher(target);
  const inPeriods = (row: EvidenceRow) => !row.periods.length || within.every((p) => row.periods.some((rp) => overlaps(rp, p)));
  const is = (row: EvidenceRow) => matched.is(row) && inPeriods(row);
  const among = (row: EvidenceRow) => matched.among(row) && inPeriods(row);
  const bySource = new Map<string, EvidenceRow[]>();
  for (const row of context.evidence.rows) {
    if (row.index === undefined || isValueSource(row.source)) continue;
    const key = row.source.toolCallId;
    bySource.set(key, [...(bySource.get(key) ?? []), row]);
  }
  const ranked: Ranked[] = [];
  for (const rows of bySource.values()) {
    const targets = rows.filter(is);
    if (targets.length !== 1) continue;
    const [row] = targets;
    const competitors = rows.filter(among);
    if (competitors.length < 2) continue;
    for (const cell of row.cells) {
      if (columns.size && !columns.has(cell.column)) continue;
      const values = competitors.flatMap((r) => r.cells.filter((c) => c.column === cell.column).map((c) => c.value));
      if (values.length < 2) continue;
      const eps = 1e-9 * Math.max(1, Math.abs(cell.value));
      ranked.push({
        row,
        cell,
        desc: 1 + values.filter((v) => v > cell.value + eps).length,
        asc: 1 + values.filter((v) => v < cell.value - eps).length,
      });
    }
  }
  return ranked;
}

/** A figure said against a rank ("Platz 2 mit nur 20 Deals", "despite only 20 deals"): not what the rank is by. */
const CONTRAST =
  /(?<![\p{L}])(?:only|just|despite|nur|lediglich|trotz|seulement|malgré|solo|sólo|pese a|apenas|somente|soltanto|nonostante|slechts|ondanks|maar)(?![\p{L}])/iu;

function sentenceText(context: Context, words: RankWords): string {
  const span = sentenceAround(context, words.index, words.end);
  return context.answer.slice(span.start, span.end);
}

function rankOf(ranked: Ranked, words: RankWords): number {
  return words.direction === 'asc' ? ranked.asc : ranked.desc;
}

/** Whether the rank holds among the rows of the target's result that the answer names (two or more). */
function holdsAmongNamed(context: Context, ranked: Ranked, words: RankWords): boolean {
  const named = new Set(context.mentions.map((m) => m.value));
  const rows = context.evidence.rows.filter(
    (row) => row.source === ranked.row.source && [...row.labels.values()].some((values) => [...values].some((v) => named.has(v))),
  );
  if (rows.length < 2 || !rows.includes(ranked.row)) return false;
  const values = rows.flatMap((r) => r.cells.filter((c) => c.column === ranked.cell.column).map((c) => c.value));
  const eps = 1e-9 * Math.max(1, Math.abs(ranked.cell.value));
  const rank =
    1 + values.filter((v) => (words.direction === 'asc' ? v < ranked.cell.value - eps : v > ranked.cell.value + eps)).length;
  return rank === words.rank;
}

/** The columns of the figures of a span bound to a row: what a rank in that span is by. */
function boundColumns(context: Context, span: Span, row?: EvidenceRow): Set<string> {
  return new Set(
    inside(context.figures, span)
      .filter((f) => f.cell && (!row || f.cell.row === row))
      .map((f) => f.cell!.column),
  );
}

/** Whether a result that is a top-N by one order can rank from the other end. */
function partial(row: EvidenceRow): boolean {
  const args = row.source.arguments as { limit?: unknown } | undefined;
  const content = row.source.content as { hasMore?: unknown } | undefined;
  return content?.hasMore === true || typeof args?.limit === 'number';
}

function rankClaims(context: Context): ClaimCheck[] {
  const checks: ClaimCheck[] = [];
  for (const words of rankWords(context.answer)) {
    const found = targetOf(context, words.index, words.end);
    if (!found) continue;
    const { target } = found;
    let { ranked } = found;
    const { clause } = context.scopes.clauseAt(words.index, words.end);
    const anchor = target.kind === 'value' ? target.mention : target.period;
    // A figure of the clause says what the rank is by; one of no row of the ranking (a calculation) says it is by
    // something the results do not rank.
    const figures = inside(context.figures, clause).filter((f) => f.cell);
    if (figures.length && figures.every((f) => f.cell!.row !== ranked[0].row)) continue;
    const columns = boundColumns(context, sentenceAround(context, words.index, words.end), ranked[0].row);
    if (columns.size) ranked = ranked.filter((r) => columns.has(r.cell.column));
    if (!ranked.length) continue;
    if (words.direction === 'asc' && ranked.every((r) => partial(r.row))) continue;
    const fits = ranked.find((r) => (words.direction === 'asc' ? r.asc : r.desc) === words.rank);
    // A rank that holds among the rows the answer itself names ("the largest open stage" of a table of open stages),
    // or by another number of the row where the sentence sets its figure against the rank ("Platz 2 mit nur 20
    // Deals": by revenue, despite its deals), may be the one meant.
    if (!fits && ranked.some((r) => holdsAmongNamed(context, r, words))) continue;
    if (!fits && CONTRAST.test(sentenceText(context, words)) && found.ranked.some((r) => rankOf(r, words) === words.rank))
      continue;
    const [start, end] = [Math.min(words.index, anchor.index), Math.max(words.end, anchor.end)];
    checks.push({ index: start, text: context.answer.slice(start, end), supported: fits !== undefined, cell: fits?.cell });
  }
  return checks;
}

// ---------------------------------------------------------------------------------------------
// Numbered lists

const LIST_ITEM = /^[ \t]*(?:[-*+][ \t]+)?(?:\*\*)?(\d{1,2})[.)](?:\*\*)?[ \t]+\S/;

/** A numbered list of values of the results in another order than any number of their rows (nor the results', nor A-Z). */
function listClaims(context: Context): ClaimCheck[] {
  const { answer } = context;
  const lists: Array<Array<{ start: number; end: number; mention: Mention }>> = [];
  let current: Array<{ start: number; end: number; mention: Mention }> | undefined;
  let offset = 0;
  for (const line of answer.split('\n')) {
    const span = { start: offset, end: offset + line.length };
    offset += line.length + 1;
    const item = LIST_ITEM.exec(line);
    const mention = item ? inside(context.mentions, span)[0] : undefined;
    if (!item || !mention) {
      current = undefined;
      continue;
    }
    if (!current) lists.push((current = []));
    current.push({ start: span.start + line.indexOf(item[1]), end: span.end, mention });
  }
  const checks: ClaimCheck[] = [];
  for (const items of lists) {
    if (items.length < 2) continue;
    const values = items.map((i) => i.mention.value);
    if (new Set(values).size !== values.length) continue;
    const dimensions = [...items[0].mention.dimensions].filter((d) => items.every((i) => i.mention.dimensions.has(d)));
    if (!dimensions.length) continue;
    const rowsOf = new Map<string, EvidenceRow[]>();
    for (const row of context.evidence.rows) {
      if (row.index === undefined || isValueSource(row.source)) continue;
      const match = items.findIndex((i) => dimensions.some((d) => row.labels.get(d)?.has(i.mention.value)));
      if (match < 0) continue;
      const list = rowsOf.get(row.source.toolCallId) ?? new Array<EvidenceRow>(items.length);
      if (list[match]) continue;
      list[match] = row;
      rowsOf.set(row.source.toolCallId, list);
    }
    const rows = [...rowsOf.values()].find((list) => items.every((_, i) => list[i]));
    if (!rows) continue;
    const bound = new Set(
      context.figures
        .filter((f) => f.cell && rows.includes(f.cell.row) && items.some((i) => f.index >= i.start && f.end <= i.end))
        .map((f) => f.cell!.column),
    );
    // Without figures of its own, a list in the results' order, or A to Z, has an order of its own.
    if (!bound.size && rows.every((row, i) => i === 0 || row.index! > rows[i - 1].index!)) continue;
    if (!bound.size && values.every((v, i) => i === 0 || values[i - 1].localeCompare(v) <= 0)) continue;
    const columns = [...new Set(rows[0].cells.map((c) => c.column))].filter((c) => !bound.size || bound.has(c));
    let best: number[] | undefined;
    for (const column of columns) {
      const numbers = rows.map((row) => row.cells.find((c) => c.column === column)?.value);
      if (numbers.some((n) => n === undefined)) continue;
      for (const sign of [1, -1]) {
        const order = numbers.map((n, i) => ({ n: n! * sign, i })).sort((a, b) => b.n - a.n || a.i - b.i);
        const misplaced = items.flatMap((_, i) => (order[i].i !== i && numbers[order[i].i] !== numbers[i] ? [i] : []));
        if (!best || misplaced.length < best.length) best = misplaced;
      }
    }
    if (!best || !best.length) continue;
    for (const i of best) {
      const item = items[i];
      checks.push({ index: item.start, text: answer.slice(item.start, item.mention.end), supported: false });
    }
  }
  return checks;
}

// ---------------------------------------------------------------------------------------------
// Multiples

type Kind = 'growth' | 'comparison';
const MULTIPLES: ReadonlyArray<[RegExp, number, Kind]> = [
  [
    /(?<![\p{L}])(?:doubled|verdoppelt\w*|(?:a |ont )?doublée?s?|se duplicó|duplicó|duplicaron|duplicad[oa]s?|raddoppiat[oaie]|dobrou|dobraram|duplicou|verdubbeld)(?![\p{L}])/giu,
    2,
    'growth',
  ],
  [
    /(?<![\p{L}])(?:tripled|verdreifacht\w*|triplée?s?|se triplicó|triplicó|triplicaron|triplicad[oa]s?|triplicat[oaie]|triplicou|verdrievoudigd)(?![\p{L}])/giu,
    3,
    'growth',
  ],
  [
    /(?<![\p{L}])(?:quadrupled|vervierfacht\w*|quadruplée?s?|cuadruplicó|quadruplicat[oaie]|quadruplicou|verviervoudigd)(?![\p{L}])/giu,
    4,
    'growth',
  ],
  [
    /(?<![\p{L}])(?:halved|halbiert\w*|divisée? par deux|réduite? de moitié|(?:se )?redujo a la mitad|se redujeron a la mitad|cayó a la mitad|dimezzat[oaie]|caiu (?:pela|para (?:menos da |mais da )?)metade|reduziu-se à metade|gehalveerd)(?![\p{L}])/giu,
    0.5,
    'growth',
  ],
  [
    /(?<![\p{L}])(?:twice|two times|double(?!-)|doppelt so|zweimal so|deux fois|le double|el doble|dos veces|il doppio|due volte|o dobro|duas vezes|twee keer|dubbel zo)(?![\p{L}])/giu,
    2,
    'comparison',
  ],
  [
    /(?<![\p{L}])(?:three times|triple(?!-)|dreimal so|trois fois|le triple|el triple|tres veces|il triplo|tre volte|o triplo|três vezes|drie keer)(?![\p{L}])/giu,
    3,
    'comparison',
  ],
];
const MULTIPLE_OVER =
  /(?:more than|over|well over|mehr als|über|plus que|plus de|más que|más del|más de|più che|più del|oltre|mais que|mais do que|mais de|meer dan|ruim)\s+(?:(?:the|le|el|il|o|het|das)\s+)?$/i;
const MULTIPLE_UNDER =
  /(?:nearly|almost|fast|beinahe|knapp|presque|près de|casi|quasi|quase|bijna)\s+(?:(?:the|le|el|il|o)\s+)?$/i;
const MULTIPLE_ABOUT =
  /(?:about|roughly|around|approximately|etwa|ungefähr|rund|environ|à peu près|aproximadamente|alrededor de|circa|cerca de|ongeveer|zo'n)\s+(?:(?:the|le|el|il|o)\s+)?$/i;

/** When a row's period starts ('' when it has none). */
function startOf(row: EvidenceRow): string {
  return row.periods[0]?.from ?? row.rangePeriods[0]?.from ?? '';
}

/** The range of ratios a multiple holds for, hedged or not. */
function ratioRange(factor: number, hedge: 'over' | 'under' | 'about' | undefined): [number, number] {
  const growing = factor >= 1;
  switch (hedge) {
    case 'over':
      return growing ? [factor, factor * 1.5] : [factor / 2, factor];
    case 'under':
      return growing ? [factor * 0.8, factor] : [factor, factor * 1.25];
    case 'about':
      return [factor * 0.85, factor * 1.15];
    default:
      return [factor * 0.88, factor * 1.12];
  }
}

function multipleClaims(context: Context): ClaimCheck[] {
  const { answer } = context;
  const checks: ClaimCheck[] = [];
  for (const [pattern, factor, kind] of MULTIPLES) {
    for (const match of answer.matchAll(pattern)) {
      const before = answer.slice(Math.max(0, match.index - 30), match.index);
      const hedgeMatch = [MULTIPLE_OVER, MULTIPLE_UNDER, MULTIPLE_ABOUT].map((p) => p.exec(before));
      const hedge = hedgeMatch[0] ? 'over' : hedgeMatch[1] ? 'under' : hedgeMatch[2] ? 'about' : undefined;
      let hedged = hedgeMatch.find(Boolean);
      if (/^less than|^weniger als|^moins de|^menos de|^meno di|^minder dan/i.test(hedged?.[0] ?? '')) hedged = undefined;
      const start = hedged ? match.index - hedged[0].length : match.index;
      // "caiu para menos da metade": fell to less than half.
      const range = ratioRange(factor, hedge ?? (/menos da metade/i.test(match[0]) ? 'over' : undefined));
      const verdict = multipleVerdict(context, match.index, match.index + match[0].length, range, kind);
      if (verdict === undefined) continue;
      checks.push({ index: start, text: answer.slice(start, match.index + match[0].length), supported: verdict });
    }
  }
  return checks;
}

/** The sentence around [index, end). */
function sentenceAround(context: Context, index: number, end: number): Span {
  return context.scopes.sentenceAt(index) ?? { start: index, end };
}

/**
 * Whether the ratio a multiple claims holds: between the first two figures of its sentence bound to one
 * column, else a calculation's ratio or change, else between the two rows its sentence names. Undefined
 * when nothing in the results says.
 */
function multipleVerdict(
  context: Context,
  index: number,
  end: number,
  [low, high]: [number, number],
  kind: Kind,
): boolean | undefined {
  const fits = (ratio: number) => Number.isFinite(ratio) && ratio >= low - 1e-9 && ratio <= high + 1e-9;
  const sentence = sentenceAround(context, index, end);
  const bound = inside(context.figures, sentence).filter((f) => f.cell);
  for (let i = 0; i < bound.length; i++) {
    const j = bound.findIndex((f, k) => k > i && f.cell!.column === bound[i].cell!.column && f.cell!.row !== bound[i].cell!.row);
    if (j < 0) continue;
    // A growth goes from the earlier period to the later, whichever the sentence names first.
    const [first, second] = [bound[i].cell!, bound[j].cell!];
    const [a, b] =
      kind === 'growth' && startOf(second.row) < startOf(first.row) ? [second.value, first.value] : [first.value, second.value];
    return fits(kind === 'growth' ? b / a : a / b);
  }
  const calculated = context.evidence.cells.filter((c) => c.change === 'ratio' || c.change === 'relative');
  if (calculated.some((c) => fits(c.change === 'ratio' ? c.value : 1 + c.value / 100))) return true;
  // Two rows the sentence names, in order: the ratio of a number they both have.
  const named: Target[] = [];
  for (const mention of inside(context.mentions, sentence))
    if (!named.some((t) => t.kind === 'value' && t.mention.value === mention.value)) named.push({ kind: 'value', mention });
  // Only values that name one row of a result ("won" names them all).
  named.splice(0, named.length, ...named.filter((target) => ranksOf(context, target, new Set()).length));
  if (named.length !== 2) {
    named.length = 0;
    const periods = inside(context.periods, sentence).filter(
      (p) => p.grain !== 'year' || !inside(context.periods, sentence).some((q) => q.grain !== 'year'),
    );
    const years = inside(context.periods, sentence).filter((p) => p.grain === 'year');
    for (const period of periods) named.push({ kind: 'period', period, within: years.filter(() => period.yearless) });
  }
  if (named.length !== 2) return undefined;
  const [first, second] = named.map((target) => ranksOf(context, target, new Set()));
  let checked = false;
  for (const a of first) {
    const match = second.find((r) => r.cell.column === a.cell.column && r.row.source === a.row.source && r.row !== a.row);
    if (!match || !a.cell.value || !match.cell.value) continue;
    checked = true;
    const [x, y] = kind === 'growth' && startOf(match.row) < startOf(a.row) ? [match.cell, a.cell] : [a.cell, match.cell];
    if (fits(kind === 'growth' ? y.value / x.value : x.value / y.value)) return true;
  }
  return checked ? false : undefined;
}
