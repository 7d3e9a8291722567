/**
 * What a figure of an answer is about: the row values (an owner, a stage, an industry) and periods
 * its clause names. An answer is cut into clauses: Markdown table rows (with the header of the
 * figure's column), list items (with their parent item or lead-in line), sentences and their
 * comma-separated parts. A figure's clause speaks first; for a dimension it does not name, the
 * comma-parts before it in the same sentence and then its parent line do.
 */
import { translationsOf } from './grounding-glossary';
import type { PeriodMention } from './grounding-figures';

/** A value of the results named in the answer. */
export interface Mention {
  value: string;
  dimensions: ReadonlySet<string>;
  index: number;
  end: number;
}

/** What a figure's clause says it is about. */
export interface FigureScope {
  /** Values named by the figure's own clause, by dimension. */
  own: Map<string, Set<string>>;
  /** Values named nearby (earlier parts of the sentence, the parent line), by dimension the own clause leaves open. */
  inherited: Map<string, Set<string>>;
  periods: PeriodMention[];
  /** The clause speaks of a whole ("in total", "overall", "out of"): rows without its dimensions may hold the figure. */
  whole: boolean;
  /** Words right after the figure, lower case (what it counts: "deals", "accounts"). */
  after: string;
  /** The clause (or its label, or its table column's header) speaks of an average or of a total. */
  measure?: 'average' | 'total';
  /** The figure is said of rows with no owner (no assignee ...): "deals with no owner", "sans responsable". */
  unassigned?: boolean;
  /** What the words nearest the figure say it is: won, lost, or open (the pipeline). */
  concept?: Concept;
}

/** Kinds of deals every sales result tells apart, named in each language read. */
export type Concept = 'won' | 'lost' | 'open';

export interface Span {
  start: number;
  end: number;
}

interface Clause extends Span {
  /** A table cell: `previous` are the other cells of its row. */
  table?: boolean;
  /** What the clause is the value of: the text before a colon or dash ("Total value: $5M"), a table column's header. */
  label?: Span;
  /** Earlier comma-parts of the same sentence, nearest first. */
  previous: Span[];
  /** The parent list item, lead-in line or heading, and extra text for a table cell's header. */
  parents: Span[];
}

/** Values too common or too vague to say which row a figure belongs to. */
const VAGUE = new Set([
  'other',
  'others',
  'none',
  'null',
  'n/a',
  'na',
  'unknown',
  'total',
  'all',
  'yes',
  'no',
  'true',
  'false',
  'other.',
]);
const COMMON_WORDS = new Set(['the', 'and', 'for', 'new', 'open', 'closed', 'deal', 'deals', 'account', 'accounts', 'team']);

/** Words that make a clause speak of a whole. */
const WHOLE =
  /\b(?:in total|total(?:s|ed|ing)?|overall|in all|altogether|across (?:all|the|every)|company[- ]wide|all (?:deals|accounts|contacts|owners|reps|stages|industries)|out of|of all|whole|entire|grand|all told)\b/i;

const AVERAGE =
  /(?<![\p{L}])(?:average|averages|averaging|averaged|avg|mean|typical|typically|durchschnitt\w*|im schnitt|moyen(?:ne)?s?|en moyenne|promedio|medio|medi[oa] (?:di|del)|média|médio|em média|gemiddeld\w*)(?![\p{L}])/iu;
const TOTAL =
  /(?<![\p{L}])(?:total|totals|totalling|totaling|totaled|totalled|sum|summed|combined|altogether|in all|all told|insgesamt|gesamt\w*|summe|zusammen|au total|en tout|cumulé\w*|en total|suman?|in totale|complessiv\w*|totale|no total|ao todo|somam?|somando|totaal|in totaal|samen)(?![\p{L}])/iu;

/** Rows with an empty owner (assignee, rep): "no owner", "unassigned", "ohne Owner", "sans responsable", "sin propietario". */
const UNASSIGNED =
  /(?<![\p{L}])(?:no|without(?: an?)?|missing|empty|ohne|keinen?|sans|sin|senza|sem|zonder|geen)\s+(?:(?:assigned|zugewiesenen?|assigné|asignado|assegnato|atribuído|toegewezen)\s+)?(?:owners?|reps?|sales ?reps?|assignees?|salespersons?|Owner|Verantwortliche[nr]?|Zuständige[nr]?|Besitzer|Eigentümer|Vertriebler|responsables?|propriétaires?|commercial|titulaire|propietarios?|dueños?|responsabile|proprietari[oa]|venditore|responsáveis?|responsável|donos?|proprietários?|vendedor|eigenaars?|verantwoordelijke|verkoper|accountmanager)(?![\p{L}])|(?<![\p{L}])(?:unassigned|not assigned|ownerless|nicht zugewiesen|nicht zugeordnet|non attribuée?s?|non assignée?s?|sin asignar|no asignad[oa]s?|non assegnat[eoia]|não atribuíd[oa]s?|sem atribuição|niet toegewezen)(?![\p{L}])/iu;

/** Words of won, lost and open deals; the nearest to a figure says which it is. */
const CONCEPT_WORDS: ReadonlyArray<[Concept, RegExp]> = [
  [
    'open',
    /(?<![\p{L}])(?:open(?:\s+deals|\s+pipeline)?|pipeline|offene[nr]?|affaires? (?:ouvertes?|en cours)|ouverts?|operaciones abiertas|abiert[oa]s?|aperte|aperto|apert[ae]|abert[oa]s?|em aberto|openstaande?)(?![\p{L}])/giu,
  ],
  [
    'won',
    /(?<![\p{L}])(?:won|closed[- ]won|gewonnen\w*|gagnée?s?|remportée?s?|ganad[oa]s?|ganaron|ganó|ganamos|vint[eoia]|vinto|ganh[oa]s?|ganhamos|ganharam)(?![\p{L}])/giu,
  ],
  ['lost', /(?<![\p{L}])(?:lost|verloren\w*|perdue?s?|perdid[oa]s?|perdieron|pers[eoia]|perdeu|perderam)(?![\p{L}])/giu],
];

/** The mentions of the vocabulary's values in the answer, longest first where they overlap. */
export function findMentions(
  text: string,
  vocabulary: ReadonlyMap<string, ReadonlySet<string>>,
  options: { cognates?: boolean; translations?: boolean } = {},
): Mention[] {
  const { normalised, origin } = normaliseKeepingIndexes(text);
  const candidates: Array<{ form: string; value: string; dimensions: ReadonlySet<string> }> = [];
  const firstTokens = new Map<string, string[]>();
  for (const [value, dimensions] of vocabulary) {
    if (VAGUE.has(value) || value.length < 2) continue;
    candidates.push({ form: value, value, dimensions });
    // "Allemagne", "renovación": the value in the answer's language.
    if (options.translations)
      for (const word of translationsOf(value)) {
        const form = word.replace(/[_\-–—\s]+/g, ' ');
        if (!vocabulary.has(form)) candidates.push({ form, value, dimensions });
      }
    // "proposals", "industries": a plural names the value too.
    if (/^[a-z]+$/.test(value) && value.length >= 4 && !vocabulary.has(`${value}s`)) {
      candidates.push({
        form: value.endsWith('y') ? `${value.slice(0, -1)}ies` : /(?:s|x|ch|sh)$/.test(value) ? `${value}es` : `${value}s`,
        value,
        dimensions,
      });
    }
    // People and companies are named by a part of their name too: "Maya" for "Maya Chen", "Northwind" for "Northwind Analytics Inc.".
    const tokens = value.split(' ');
    if (tokens.length >= 2 && tokens.length <= 4) {
      for (const token of [tokens[0], tokens.at(-1)!]) {
        if (
          token.length < 3 ||
          COMMON_WORDS.has(token) ||
          /\d/.test(token) ||
          /^(?:inc|llc|ltd|gmbh|corp|co|plc|ag|sa|group)\.?$/.test(token)
        )
          continue;
        const list = firstTokens.get(token) ?? [];
        list.push(value);
        firstTokens.set(token, list);
      }
    }
  }
  for (const [token, values] of firstTokens) {
    if (vocabulary.has(token)) continue;
    // A part shared by two values names neither.
    const distinct = [...new Set(values)];
    if (distinct.length === 1) candidates.push({ form: token, value: distinct[0], dimensions: vocabulary.get(distinct[0])! });
  }
  candidates.sort((a, b) => b.form.length - a.form.length);
  const taken: boolean[] = new Array<boolean>(normalised.length).fill(false);
  const mentions: Mention[] = [];
  const take = (value: string, dimensions: ReadonlySet<string>, at: number, end: number) => {
    taken.fill(true, at, end);
    mentions.push({ value, dimensions, index: origin[at], end: origin[end - 1] + 1 });
  };
  for (const candidate of candidates) {
    let from = 0;
    for (;;) {
      const at = normalised.indexOf(candidate.form, from);
      if (at < 0) break;
      from = at + 1;
      const end = at + candidate.form.length;
      if (/[\p{L}\p{N}]/u.test(normalised[at - 1] ?? '') || /[\p{L}\p{N}]/u.test(normalised[end] ?? '')) continue;
      // "won't" is no "won".
      if (/^'t\b/.test(normalised.slice(end, end + 3))) continue;
      if (taken.slice(at, end).some(Boolean)) continue;
      take(candidate.value, candidate.dimensions, at, end);
    }
  }
  // The words of won and lost deals in the languages read name those values of the results ("gewonnene", "perdidas").
  for (const [concept, pattern] of CONCEPT_WORDS) {
    const dimensions = concept !== 'open' ? vocabulary.get(concept) : undefined;
    if (!dimensions) continue;
    for (const word of normalised.matchAll(pattern)) {
      const end = word.index + word[0].length;
      if (!taken.slice(word.index, end).some(Boolean)) take(concept, dimensions, word.index, end);
    }
  }
  if (options.cognates) {
    // Another language's word for a one-word value: its first seven letters (or all of a shorter value's) but one
    // the same ("proposition", "negociación" for "negotiation", "Francia" for "France").
    const stems = [...vocabulary.keys()]
      .filter((value) => /^\p{L}{6,}$/u.test(value) && !VAGUE.has(value))
      .map((value) => ({ value, stem: plain(value).slice(0, 7) }));
    for (const word of normalised.matchAll(/\p{L}{6,}/gu)) {
      if (vocabulary.has(word[0])) continue;
      const head = plain(word[0]);
      const values = stems
        .filter(({ stem }) => head.length >= stem.length && head[0] === stem[0] && nearlySame(stem, head.slice(0, stem.length)))
        .map(({ value }) => value);
      const end = word.index + word[0].length;
      if (values.length === 1 && !taken.slice(word.index, end).some(Boolean))
        take(values[0], vocabulary.get(values[0])!, word.index, end);
    }
  }
  return mentions.sort((a, b) => a.index - b.index);
}

/** Two words of equal length that differ in at most one letter. */
function nearlySame(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let differences = 0;
  for (let i = 0; i < a.length && differences <= 1; i++) if (a[i] !== b[i]) differences++;
  return differences <= 1;
}

const SEPARATOR = /[_\-–—\s]/;

/** Without accents: "négociation" → "negociation". */
function plain(word: string): string {
  return word.normalize('NFD').replace(/\p{M}/gu, '');
}

/**
 * `normalise` with the index in `text` of each character it keeps: lower case, `_` and dashes as spaces, one
 * space for a run of them.
 */
function normaliseKeepingIndexes(text: string): { normalised: string; origin: number[] } {
  const lowered = text.toLowerCase();
  const same = lowered.length === text.length;
  const chars: string[] = [];
  const origin: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    const lower = same ? lowered[i] : char.toLowerCase();
    const one = SEPARATOR.test(char) ? ' ' : lower.length === char.length ? lower : char;
    if (one === ' ' && chars[chars.length - 1] === ' ') continue;
    chars.push(one);
    origin.push(i);
  }
  return { normalised: chars.join(''), origin };
}

/** Cuts an answer into clauses. */
function clausesOf(text: string, mentions: readonly Mention[] = []): Clause[] {
  const clauses: Clause[] = [];
  const lines: Array<Span & { indent: number; bullet: boolean; heading: number; table: boolean }> = [];
  let offset = 0;
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    lines.push({
      start: offset,
      end: offset + line.length,
      indent: line.length - line.trimStart().length,
      bullet: /^(?:[-*+•]|\d+[.)])\s/.test(trimmed),
      heading: /^#+\s/.test(trimmed) ? trimmed.indexOf(' ') : 0,
      table: trimmed.startsWith('|'),
    });
    offset += line.length + 1;
  }
  let heading: Span | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const content = text.slice(line.start, line.end);
    if (!content.trim()) continue;
    if (line.heading) {
      heading = line;
      continue;
    }
    // "**Allemagne – 2024**" over a list or table: a heading written in bold, whose names the lines below inherit.
    if (!line.bullet && !line.table && BOLD_LINE.test(content.trim())) {
      const next = lines.slice(i + 1).find((l) => text.slice(l.start, l.end).trim());
      if (next && (next.bullet || next.table)) {
        sentenceClauses(text, line, heading ? [heading] : [], clauses, mentions);
        heading = line;
        continue;
      }
    }
    if (line.table) {
      i = tableClauses(text, lines, i, clauses, heading);
      continue;
    }
    const parents: Span[] = [];
    if (line.bullet) {
      // The nearest item above with less indentation, else the lead-in line ending with ":" before the list.
      for (let j = i - 1; j >= 0; j--) {
        const above = lines[j];
        if (!text.slice(above.start, above.end).trim()) continue;
        if (above.bullet && above.indent < line.indent) {
          parents.push(above);
          break;
        }
        if (!above.bullet) {
          if (/:\s*(?:\*\*)?\s*$/.test(text.slice(above.start, above.end))) parents.push(above);
          break;
        }
      }
    }
    if (heading) parents.push(heading);
    sentenceClauses(text, line, parents, clauses, mentions);
  }
  return clauses;
}

/** A span cut at each match of `separator` inside it. */
function splitAt(text: string, span: Span, separator: RegExp): Span[] {
  const parts: Span[] = [];
  let start = span.start;
  for (const match of text.slice(span.start, span.end).matchAll(separator)) {
    parts.push({ start, end: span.start + match.index });
    start = span.start + match.index + match[0].length;
  }
  parts.push({ start, end: span.end });
  return parts;
}

/** A line that is all bold: `**Germany – 2024**`, `__Summary__:`. */
const BOLD_LINE = /^(?:\*\*|__)[^*_\n]+(?:\*\*|__):?$/;

/** A Markdown table: each body cell is a clause of its row, with its column's header as parent. */
function tableClauses(
  text: string,
  lines: Array<Span & { table: boolean }>,
  first: number,
  out: Clause[],
  heading?: Span,
): number {
  let last = first;
  while (last + 1 < lines.length && lines[last + 1].table) last++;
  const cellsOf = (line: Span): Span[] => {
    const spans: Span[] = [];
    const content = text.slice(line.start, line.end);
    let start = content.indexOf('|') + 1;
    for (let at = content.indexOf('|', start); at >= 0; at = content.indexOf('|', start)) {
      spans.push({ start: line.start + start, end: line.start + at });
      start = at + 1;
    }
    if (start < content.length && content.slice(start).trim()) spans.push({ start: line.start + start, end: line.end });
    return spans;
  };
  const separator = first + 1 <= last && /^\s*\|?\s*:?-{2,}/.test(text.slice(lines[first + 1].start, lines[first + 1].end));
  const header = separator ? cellsOf(lines[first]) : [];
  for (let i = separator ? first + 2 : first; i <= last; i++) {
    const row = cellsOf(lines[i]);
    row.forEach((cell, column) => {
      const others = row.filter((_, c) => c !== column);
      out.push({
        start: cell.start,
        end: cell.end,
        table: true,
        ...(header[column] ? { label: header[column] } : {}),
        // The row's other cells name what the cell is about: they act as its own clause (see `scopeOf`).
        previous: others,
        parents: [...(header[column] ? [header[column]] : []), ...(heading ? [heading] : [])],
      });
    });
  }
  return last;
}

const ABBREVIATIONS =
  /\b(?:vs|inc|ltd|co|corp|no|approx|mr|mrs|ms|dr|st|e\.g|i\.e|etc|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|mio|mrd|tsd|md|mds|mln|mld|nr|ca|bzw|usw|inkl|ggf|evtl|dez|tél|env|aprox|núm|ecc|bijv|resp|b\.v|n\.v|k\.k|s\.a|ag)\.$/i;

/** Whether a full stop (or ! or ?) just before `at` ends a sentence: not an abbreviation's, not a German ordinal's ("2. Quartal"). */
export function endsSentence(text: string, at: number): boolean {
  const before = text.slice(Math.max(0, at - 6), at);
  return !ABBREVIATIONS.test(before) && !/(?:^|\s)\d{1,2}\.$/.test(before);
}

/**
 * Where a sentence is cut: group 1 = a strong cut (a new subject: nothing said before it carries over),
 * else a weak one (a comma, a colon, a dash, "and", brackets: what was said before still applies).
 */
const CUT =
  /(;|,?\s+(?:while|whereas|but|although|though|compared (?:with|to)|versus|vs\.?|against|ahead of|followed by|then|and then|während|aber|jedoch|wohingegen|gegenüber|alors que|tandis que|par rapport à|devant|mientras(?: que)?|pero|frente a|mentre|ma|rispetto a|davanti a|enquanto|mas|em comparação com|à frente de|terwijl|maar|vergeleken met)\s)|,\s(?:and\s|und\s|et\s|y\s|e\s)?|:\s|\s[–—-]\s|\s+and\s+(?=[\p{Lu}$€£])|\s+(?:und|et|y|e)\s+(?=[\p{L}$€£])|\s+en\s+(?=\d)(?!\d{4}(?!\d))|\s\(|\)/giu;

/** A line cut into sentences, each into comma-parts; strong separators (; : while, but) end a sentence's reach. */
function sentenceClauses(text: string, line: Span, parents: Span[], out: Clause[], mentions: readonly Mention[] = []): void {
  const content = text.slice(line.start, line.end);
  const boundaries: number[] = [0];
  for (const match of content.matchAll(/[.!?](?=\s+[\p{Lu}(*"'“\d$€£])|[.!?]$/gu)) {
    const at = match.index + 1;
    if (!endsSentence(content, at)) continue;
    boundaries.push(at);
  }
  boundaries.push(content.length);
  for (let s = 0; s + 1 < boundaries.length; s++) {
    const [from, to] = [boundaries[s], boundaries[s + 1]];
    if (from >= to) continue;
    const sentence = content.slice(from, to);
    const previous: Span[] = [];
    let partStart = 0;
    const parts: Array<Span & { strong: boolean; labelled: boolean }> = [];
    let labelled = false;
    for (const match of sentence.matchAll(CUT)) {
      // Not inside a name of the results ("Northwind Dynamics B.V. – Expansion 2023").
      const at = line.start + from + match.index;
      if (mentions.some((m) => m.index < at && at + match[0].length < m.end)) continue;
      parts.push({ start: partStart, end: match.index, strong: match[1] !== undefined, labelled });
      labelled = /^(?::\s|\s[–—-]\s)$/.test(match[0]);
      partStart = match.index + match[0].length;
    }
    parts.push({ start: partStart, end: sentence.length, strong: false, labelled });
    for (const part of parts) {
      const start = line.start + from + part.start;
      const end = line.start + from + part.end;
      const label = part.labelled ? previous.at(-1) : undefined;
      if (end > start) out.push({ start, end, previous: [...previous].reverse(), parents, ...(label ? { label } : {}) });
      if (part.strong) previous.length = 0;
      else if (end > start) previous.push({ start, end });
      // The nearest parts say what a clause is about; a sentence of thousands of commas keeps the work linear.
      if (previous.length > MAX_PREVIOUS) previous.shift();
    }
  }
}

/** Lays out the clauses once, then answers what each figure's clause names. */
export class AnswerScopes {
  private readonly clauses: Clause[];

  constructor(
    private readonly text: string,
    private readonly mentions: readonly Mention[],
    private readonly periods: readonly PeriodMention[],
    /** The answer is in another language than the results' values: a clause may name its row in words of its own. */
    private readonly translated = false,
  ) {
    this.clauses = clausesOf(text, mentions);
    this.sentences = sentencesOf(text);
  }

  private readonly sentences: Span[];

  /** The clause holding [index, end): found by halving (clauses come in the order of the text). */
  private clauseOf(index: number, end: number): Clause | undefined {
    let [low, high] = [0, this.clauses.length];
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.clauses[middle].start <= index) low = middle + 1;
      else high = middle;
    }
    for (let i = low - 1; i >= 0 && i >= low - 8; i--) {
      const c = this.clauses[i];
      if (c.start <= index && end <= c.end + 1) return c;
    }
    return undefined;
  }

  /** The sentence holding an index. */
  sentenceAt(index: number): Span | undefined {
    let [low, high] = [0, this.sentences.length];
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.sentences[middle].start <= index) low = middle + 1;
      else high = middle;
    }
    const sentence = this.sentences[low - 1];
    return sentence && index <= sentence.end ? sentence : undefined;
  }

  /** The values of the results the answer names within [start, end). */
  mentionsIn(start: number, end: number): Mention[] {
    return between(this.mentions, start, end);
  }

  /** The clause of [index, end) and the earlier comma-parts of its sentence (nearest first), as spans of the text. */
  clauseAt(index: number, end: number): { clause: Span; nearby: Span[]; parents: Span[]; table: boolean } {
    const clause = this.clauseOf(index, end);
    if (!clause) return { clause: { start: index, end }, nearby: [], parents: [], table: false };
    return {
      clause: { start: clause.start, end: clause.end },
      nearby: clause.table ? [] : clause.previous,
      parents: clause.parents,
      table: clause.table === true,
    };
  }

  /** What the clause of the figure at [index, end) names. */
  scopeOf(index: number, end: number): FigureScope {
    const clause = this.clauseOf(index, end) ?? {
      start: index,
      end,
      previous: [],
      parents: [],
    };
    const within = (span: Span) => between(this.mentions, span.start, span.end);
    const own = byDimension(within(clause));
    const clauseText = this.text.slice(clause.start, clause.end);
    // Words of a very long clause count near the figure only: the check stays linear on any text.
    const nearText = this.text.slice(Math.max(clause.start, index - NEAR), Math.min(clause.end, end + NEAR));
    const whole = WHOLE.test(clauseText.length > 4 * NEAR ? nearText : clauseText);
    const inherited = new Map<string, Set<string>>();
    // A table cell's row is its own clause: the cells beside it name the row.
    const table = clause.table === true;
    const nearby = table ? [] : clause.previous;
    if (table)
      for (const [dimension, values] of byDimension(clause.previous.flatMap(within)))
        if (!own.has(dimension)) own.set(dimension, values);
    // "ein Meeting 63 Minuten, ein Anruf 30 Minuten": a clause with a subject of its own (in words the results do
    // not have) is not about what the sentence named before it.
    const ownSubject = this.translated && !own.size && namesItsOwnSubject(nearText);
    if (!ownSubject) {
      // What the sentence said before this clause (all of it: "Hannah and Maya have rates: 57% and 60%"), then the
      // parent line (not for a whole: "in total" may sum what its parent line lists).
      for (const spans of whole ? [nearby] : [nearby, clause.parents]) {
        const found = byDimension(spans.flatMap(within));
        for (const [dimension, values] of found)
          if (!own.has(dimension) && !inherited.has(dimension)) inherited.set(dimension, values);
      }
    }
    const periodSpans = [clause, ...(table ? clause.previous : []), ...nearby, ...clause.parents];
    let periods: PeriodMention[] = [];
    for (const span of periodSpans) {
      periods = between(this.periods, span.start, span.end);
      if (periods.length) break;
    }
    // "2,6 % gegenüber 2023 auf 139,4 Mio. $": a period compared with is no scope of its own; any period of the
    // sentence may be the figure's.
    const sentence = this.sentenceAt(index);
    const inSentence = sentence ? between(this.periods, sentence.start, sentence.end) : [];
    if (inSentence.some((p) => REFERENCE_BEFORE.test(this.text.slice(Math.max(0, p.index - 30), p.index)))) periods = inSentence;
    // "Let's look at Q3 2024. Won revenue reached $54.2M.": a sentence naming no period speaks of the one the sentence
    // before it on the same line named.
    if (!periods.length && !table && sentence) periods = this.periodsBefore(sentence);
    // "In Q4 of 2024": the quarter says which rows, the year only where it is.
    periods = periods.filter(
      (p) =>
        !periods.some((q) => q !== p && !q.yearless && p.from <= q.from && q.to <= p.to && (p.from !== q.from || p.to !== q.to)),
    );
    // The words right around the figure, and its label: "Retail has 23 accounts with 3,220 employees on average" averages employees only.
    // Back to the clause's start or the figure before, and a short opening part ("On average, ...", "En moyenne, ...").
    const head = this.text.slice(Math.max(clause.start, index - 80), index);
    const opening = nearby.at(-1);
    const measureText =
      head.slice(head.search(/\d[^\d]*$/) + 1) +
      this.text.slice(end, Math.min(clause.end, end + 25)) +
      (clause.label ? ` ${this.text.slice(clause.label.start, clause.label.end)}` : '') +
      (opening && nearby.length === 1 && opening.end - opening.start <= 24
        ? ` ${this.text.slice(opening.start, opening.end)}`
        : '');
    const average = AVERAGE.test(measureText);
    const total = TOTAL.test(measureText);
    const measure = average && !total ? ('average' as const) : total && !average ? ('total' as const) : undefined;
    const unassigned = [clause, ...nearby, ...clause.parents].some((span) =>
      UNASSIGNED.test(this.text.slice(Math.max(span.start, index - NEAR), Math.min(span.end, end + NEAR))),
    );
    const concept = this.conceptOf(clause, index, end);
    return {
      own,
      inherited,
      periods,
      whole,
      after: this.text.slice(end, end + 40).toLowerCase(),
      ...(measure ? { measure } : {}),
      ...(unassigned ? { unassigned } : {}),
      ...(concept ? { concept } : {}),
    };
  }

  /**
   * The values and periods named in a parenthesis right after a figure ("58,2% (Q3)"), or after the figure in the
   * parenthesis it opens ("(7,91 milioni, Marcus Silva)"); undefined when it names none.
   */
  private parenthesisOf(figure: { index: number; end: number }): { mentions: Mention[]; periods: PeriodMention[] } | undefined {
    let span: Span | undefined;
    const after = /^[ \t]*\(([^()\n]{1,120})\)/.exec(this.text.slice(figure.end, figure.end + 130));
    if (after) span = { start: figure.end + after[0].indexOf('(') + 1, end: figure.end + after[0].length - 1 };
    else if (/\([ \t]*(?:[^\p{L}\p{N}()\n]{0,4})$/u.test(this.text.slice(Math.max(0, figure.index - 6), figure.index))) {
      const rest = /^[^()\n]{0,120}\)/.exec(this.text.slice(figure.end, figure.end + 130));
      if (rest) span = { start: figure.end, end: figure.end + rest[0].length - 1 };
    }
    if (!span) return undefined;
    const mentions = between(this.mentions, span.start, span.end);
    const periods = between(this.periods, span.start, span.end);
    return mentions.length || periods.length ? { mentions, periods } : undefined;
  }

  /** The periods of the sentence before `sentence` on its line, when it names one period (and maybe its year). */
  private periodsBefore(sentence: Span): PeriodMention[] {
    const previous = this.sentenceAt(sentence.start - 1);
    if (!previous || previous === sentence || /\n/.test(this.text.slice(previous.start, sentence.start).trimEnd())) return [];
    const periods = between(this.periods, previous.start, previous.end).filter(
      (p) => !REFERENCE_BEFORE.test(this.text.slice(Math.max(0, p.index - 30), p.index)),
    );
    const finest = periods.filter(
      (p) => !periods.some((q) => q !== p && q.from >= p.from && q.to <= p.to && (q.from !== p.from || q.to !== p.to)),
    );
    return new Set(finest.map((p) => `${p.from}/${p.to}`)).size === 1 ? periods : [];
  }

  /** The concept word nearest the figure in its clause: the first after it (before another number), else the last before it. */
  private conceptOf(clause: Span, index: number, end: number): Concept | undefined {
    const tail = this.text.slice(end, Math.min(clause.end, end + 40));
    const afterText = tail.slice(0, /\d/.exec(tail)?.index ?? tail.length);
    // Before the figure, back to the previous figure, or across figures joined to it ("zwischen 254 und 419").
    let head = this.text.slice(Math.max(clause.start, index - NEAR), index);
    for (;;) {
      const at = head.search(/\d[^\d]*$/);
      if (at < 0 || !/^[^\d]*?\s+(?:and|und|et|y|e|en|bis|to|à|a|tot|or|oder|ou|o|-|–)\s+$/i.test(head.slice(at + 1))) {
        head = head.slice(at + 1);
        break;
      }
      head = head.slice(0, head.search(/[\d.,\s]*\d[^\d]*$/));
    }
    const beforeText = head;
    let found: { concept: Concept; at: number } | undefined;
    for (const [concept, pattern] of CONCEPT_WORDS) {
      for (const match of afterText.matchAll(pattern))
        if (!found || found.at < 0 || match.index < found.at) found = { concept, at: match.index };
    }
    if (found) return found.concept;
    for (const [concept, pattern] of CONCEPT_WORDS) {
      for (const match of beforeText.matchAll(pattern))
        if (!found || -match.index < found.at) found = { concept, at: -match.index };
    }
    return found?.concept;
  }

  /**
   * A parallel enumeration: names of one dimension (or periods) joined by "and", then as many figures joined by
   * "and" ("Lucas and Priya closed 49 and 48 deals", "Q2 and Q3 brought $44.2M and $54.2M", "20 bzw. 49"): the
   * i-th figure is about the i-th name. Figures in another order than their names are then of another row.
   */
  pairs(figures: ReadonlyArray<{ index: number; end: number }>): Map<number, FigurePair> {
    const paired = new Map<number, FigurePair>();
    // "87 contas bronze, 45 silver, 31 platinum e 37 gold", "bronze 87, silver 45": a figure right beside one of
    // several names of its clause is about that name.
    for (const figure of figures) {
      const { clause } = this.clauseAt(figure.index, figure.end);
      const named = between(this.mentions, Math.max(clause.start, figure.index - NEAR), Math.min(clause.end, figure.end + NEAR));
      if (new Set(named.map((m) => m.value)).size < 2) continue;
      const beside = (m: Mention) =>
        m.index >= figure.end
          ? /^\s*(?:\p{L}+\s+)?$/u.test(this.text.slice(figure.end, m.index)) && !/\d/.test(this.text.slice(figure.end, m.index))
          : m.end <= figure.index && /^\s*:?\s*$/.test(this.text.slice(m.end, figure.index));
      const near = named.filter(beside);
      if (near.length === 1) paired.set(figure.index, { mention: near[0] });
    }
    // "de 9,75 Mio. $ (Kaiser & Vogel) à 2,94 Mrd. $ (Rheinwerk)", "(6,63 milioni, di nuovo Jack Thompson)": what a
    // parenthesis right after a figure, or around it, names is what the figure is about.
    for (const figure of figures) {
      const local = this.parenthesisOf(figure);
      if (local) paired.set(figure.index, { local });
    }
    // "22 comptes en Allemagne et 22 au Royaume-Uni": figures and names of one kind taking turns, each figure first.
    for (const sentence of this.sentences.flatMap((span) => splitAt(this.text, span, /[;:]/g))) {
      const within = <T extends { index: number; end: number }>(list: readonly T[]) =>
        list.filter((item) => item.index >= sentence.start && item.end <= sentence.end);
      const numbers = within(figures);
      if (numbers.length < 2) continue;
      const names = within(this.mentions);
      const kinds = names.length ? [...names[0].dimensions] : [];
      if (names.length !== numbers.length || !names.every((m) => kinds.some((d) => m.dimensions.has(d)))) continue;
      if (new Set(names.map((m) => m.value)).size !== names.length) continue;
      const alternating = numbers.every(
        (figure, i) => figure.end <= names[i].index && (i + 1 === numbers.length || names[i].end <= numbers[i + 1].index),
      );
      const agrees = numbers.every((f, i) => !paired.has(f.index) || paired.get(f.index)!.mention === names[i]);
      if (alternating && agrees) numbers.forEach((figure, i) => paired.set(figure.index, { mention: names[i] }));
    }
    for (const sentence of this.sentences) {
      const inside = <T extends { index: number; end: number }>(list: readonly T[]) =>
        list.filter((item) => item.index >= sentence.start && item.end <= sentence.end);
      const numbers = runs(this.text, inside(figures), FIGURE_JOIN);
      const names: Array<Array<{ index: number; end: number; mention?: Mention; period?: PeriodMention }>> = [
        ...runs(this.text, inside(this.mentions), NAME_JOIN, (a, b) => [...a.dimensions].some((d) => b.dimensions.has(d))).map(
          (run) => run.map((mention) => ({ index: mention.index, end: mention.end, mention })),
        ),
        ...runs(this.text, inside(this.periods), NAME_JOIN).map((run) =>
          run.map((period) => ({ index: period.index, end: period.end, period })),
        ),
      ];
      const respectively = RESPECTIVELY.test(this.text.slice(sentence.start, sentence.end));
      for (const run of numbers) {
        if (run.length < 2) continue;
        const match = names.find(
          (candidate) =>
            candidate.length === run.length &&
            new Set(candidate.map((c) => c.mention?.value ?? c.period?.text)).size === run.length &&
            (candidate.at(-1)!.end <= run[0].index || (respectively && run.at(-1)!.end <= candidate[0].index)),
        );
        if (!match) continue;
        run.forEach((figure, i) => paired.set(figure.index, { mention: match[i].mention, period: match[i].period }));
      }
    }
    return paired;
  }
}

/** What a figure is paired with: a name or period of an enumeration, or what a parenthesis beside it names. */
export interface FigurePair {
  mention?: Mention;
  period?: PeriodMention;
  /** Named in a parenthesis right after the figure or around it: the figure's scope, in place of its clause's. */
  local?: { mentions: Mention[]; periods: PeriodMention[] };
}

/** Words before a period that make it one compared with ("compared with 2023", "gegenüber 2023", "par rapport à 2023"). */
const REFERENCE_BEFORE =
  /(?:compared (?:with|to)|\bvs\.?|\bversus|\bagainst|gegenüber|im Vergleich zu|verglichen mit|par rapport à|comparé à|\bcontre|respecto a|frente a|en comparación con|rispetto a(?:l|llo|lla|i)?|respecto al|em relação ao?|\bface ao?|comparado com|ten opzichte van|vergeleken met|t\.o\.v\.)\s*(?:the|dem|l'|le|la|el|al|il|o|a|het|à)?\s*$/i;

/** Nouns a clause may have after an article without naming a row: measures, not subjects. */
const MEASURE_WORDS = new Set(
  (
    'umsatz volumen gesamtvolumen gesamtumsatz durchschnitt schnitt summe gesamtsumme anteil wert gesamtwert betrag zahl anzahl höhe vergleich ' +
    'chiffre montant total moyenne part valeur somme nombre comparaison hausse baisse ' +
    'ingresos importe media promedio valor suma cifra número comparación total ' +
    'fatturato valore totale somma numero quota media confronto ' +
    'receita média soma comparação ' +
    'omzet waarde gemiddelde totaal som aantal bedrag deel vergelijking ' +
    'pipeline deals deal abschlüsse geschäfte affaires affaire operaciones operación trattative trattativa negócios negócio ' +
    'oportunidades opportunités opportunità kansen comptes compte cuentas cuenta clienti cliente contas conta konten kunden klanten ' +
    'mio mrd tsd millionen milliarden million millions milliard milliards millones millón mil milioni milione miliardi miliardo ' +
    'milhões milhão bilhões bilhão miljoen miljard mln mld dollar dollars dólares dollari euro euros prozent pour por per procent ' +
    'prozentpunkte points puntos punti pontos procentpunt ' +
    // Months and units of time: "22 octobre", "30 Minuten".
    'januar februar märz april mai juni juli august september oktober november dezember janvier février mars avril juin ' +
    'juillet août septembre octobre novembre décembre enero febrero marzo abril mayo junio julio agosto septiembre octubre ' +
    'noviembre diciembre gennaio febbraio aprile maggio giugno luglio settembre ottobre dicembre janeiro fevereiro março ' +
    'maio junho julho setembro outubro dezembro januari februari maart mei augustus ' +
    'minuten minutes minutos minuti stunden heures horas ore uren tage tagen jours días giorni dias dagen wochen semaines ' +
    'semanas settimane weken monate monaten mois meses mesi maanden jahre jahren ans años anni anos jaar jaren'
  ).split(' '),
);
/** A word right after a whole number: what it counts, which may be the clause's own subject ("448 taken"). */
const COUNTED = /(?<![\d.,])\d+\s+(\p{L}{3,})/gu;
const DETERMINED =
  /(?<![\p{L}])(?:ein|eine|einen|einem|einer|der|die|das|den|dem|des|le|la|les|un|une|l'|el|los|las|una|uno|il|lo|gli|o|os|as|um|uma|het|een)\s+(\p{L}{3,})/giu;

/** Whether a clause has a subject of its own: an article and a noun that is no measure ("ein Anruf", "la telefonata"). */
function namesItsOwnSubject(clause: string): boolean {
  for (const pattern of [DETERMINED, COUNTED])
    for (const match of clause.matchAll(pattern)) if (!isMeasureWord(match[1].toLowerCase())) return true;
  return false;
}

/** A measure word, or a compound that ends with one ("Jahresumsatz", "Gesamtvolumen"). */
function isMeasureWord(word: string): boolean {
  if (MEASURE_WORDS.has(word)) return true;
  for (let i = 1; i <= word.length - 4; i++) if (MEASURE_WORDS.has(word.slice(i))) return true;
  return false;
}

/** How many earlier parts of its sentence a clause keeps. */
const MAX_PREVIOUS = 16;

/** How far from a figure the words of its clause are read, at most (characters). */
const NEAR = 240;

/** The items of a list sorted by `index` that lie within [start, end], found by halving. */
export function between<T extends { index: number; end: number }>(sorted: readonly T[], start: number, end: number): T[] {
  let [low, high] = [0, sorted.length];
  while (low < high) {
    const middle = (low + high) >> 1;
    if (sorted[middle].index < start) low = middle + 1;
    else high = middle;
  }
  const found: T[] = [];
  for (let i = low; i < sorted.length && sorted[i].index <= end; i++) if (sorted[i].end <= end) found.push(sorted[i]);
  return found;
}

/** What may stand between the names of an enumeration, and between its figures. */
const NAME_JOIN = /^(?:'s)?\s*(?:,|and|und|et|y|e|en|&|as well as|sowie|ainsi que|oder|or|ou|o)\s*$/i;
const FIGURE_JOIN =
  /^\s*(?:,\s*(?:and|und|et|y|e|en)?|and|und|et|y|e|en|&|bzw\.?|beziehungsweise|resp\.?|respectively|respectivement|respectivamente|rispettivamente|respectievelijk|\/)\s*$/i;
const RESPECTIVELY = /\b(?:respectively|beziehungsweise|bzw\.|respectivement|respectivamente|rispettivamente|respectievelijk)/i;

/** Consecutive items joined only by `join` (and of one kind, when `same` says so). */
function runs<T extends { index: number; end: number }>(
  text: string,
  items: readonly T[],
  join: RegExp,
  same: (a: T, b: T) => boolean = () => true,
): T[][] {
  const out: T[][] = [];
  const sorted = [...items].sort((a, b) => a.index - b.index);
  for (const item of sorted) {
    const last = out.at(-1)?.at(-1);
    if (last && item.index >= last.end && join.test(text.slice(last.end, item.index)) && same(last, item)) out.at(-1)!.push(item);
    else out.push([item]);
  }
  return out;
}

/** The sentences of a text (lines cut at a full stop, question or exclamation mark before a space). */
function sentencesOf(text: string): Span[] {
  const spans: Span[] = [];
  let start = 0;
  // Not after a German ordinal ("im 2. Quartal"): a number of one or two digits before the point.
  for (const match of text.matchAll(/(?<!(?:^|\s)\d{1,2})[.!?](?=\s+[\p{Lu}(*"'“\d$€£])|\n/gu)) {
    const end = match.index + 1;
    if (match[0] !== '\n' && !endsSentence(text, end)) continue;
    spans.push({ start, end });
    start = end;
  }
  spans.push({ start, end: text.length });
  return spans;
}

export function byDimension(mentions: readonly Mention[]): Map<string, Set<string>> {
  const map = new Map<string, Set<string>>();
  for (const mention of mentions) {
    for (const dimension of mention.dimensions) {
      if (!map.has(dimension)) map.set(dimension, new Set());
      map.get(dimension)!.add(mention.value);
    }
  }
  return map;
}
