/**
 * Reading the figures of a text with their meaning: sign, unit, currency, magnitude, precision and
 * hedging, in the number style of a locale, written in digits or in words; and the dates, times and
 * periods the text names. Pure functions, no I/O.
 */
import { detectLanguage, textLocale, type GroundingLanguage } from './grounding-language';

/** How a figure is hedged: `about` (rounded), `over` (a lower bound), `under` (an upper bound). */
export type Approximation = 'about' | 'over' | 'under';

/** A number the text states. */
export interface Figure {
  /** As written, e.g. `$1.2M`, `-4.5%`, `three hundred and four`. */
  text: string;
  /** Where it starts and ends in the text. */
  index: number;
  end: number;
  /** The number before its scale, signed: 1.2 for `$1.2M`, -4.5 for `down 4.5%`. */
  mantissa: number;
  /** 1, 1e3, 1e6, 1e9 or 1e12. */
  scale: number;
  /** Digits after the decimal separator, as shown. */
  decimals: number;
  /** A percentage (`%`, `percent`, `per cent`), or basis points (`bp`, `bps`, `basis points`: 1/100 of a percent). */
  percent: boolean;
  basisPoints: boolean;
  /** Percentage points (`pp`, `percentage points`, `Prozentpunkte`): a difference of two percentages, no relative change. */
  points?: boolean;
  /** "4 in 10", "1 sur 2": a share written as a fraction (read as a percentage, `mantissa` = 40). */
  fraction?: { numerator: number; denominator: number };
  /** How far from `mantissa` the figure still holds when its digits do not say (a fraction's): in its own unit. */
  tolerance?: number;
  /**
   * The other reading of digits the text's language leaves open ("25.077": a count in German, a decimal in English)
   * when that language could not be told.
   */
  alternative?: { mantissa: number; decimals: number };
  /** ISO 4217 code of the currency written with it (`$` is USD). */
  currency?: string;
  /**
   * `negative`: a minus sign, or a word of a falling change ("down 5%", "decreased by 3"); `positive`: a plus
   * sign or a word of a rising change; `none`: neither. `comparative`: "3 more than", "5 fewer": a
   * difference whose direction depends on what was subtracted from what.
   */
  sign: 'negative' | 'positive' | 'none';
  comparative: boolean;
  approximation?: Approximation;
  /** One end of a range ("between 10 and 12", "10–12"): `low` or `high`, with the other end's value. */
  range?: { end: 'low' | 'high'; other: number };
  /** One end of a change written "from X to Y" ("von 20,7 auf 44,2", "de 46 à 42"): `from` or `to`. */
  change?: 'from' | 'to';
  /** Written in words ("twelve"). */
  words: boolean;
  /** No currency, no unit, no scale, no decimals, no grouping: a bare integer such as `12`. */
  bare: boolean;
}

/** A calendar date (and maybe a time of day) the text states. */
export interface DateMention {
  text: string;
  index: number;
  end: number;
  /** `YYYY-MM-DD`, or `--MM-DD` when the text gives no year. */
  date?: string;
  /** `HH:MM` (24 h), when a time of day is given. */
  time?: string;
}

/** A period the text names (`March 2024`, `Q2 2024`, `2024`, `H1`), as an interval of days. */
export interface PeriodMention {
  text: string;
  index: number;
  end: number;
  /** Inclusive ISO dates; the year is 0 when the text gives none (matched on month/quarter only). */
  from: string;
  to: string;
  grain: 'day' | 'week' | 'month' | 'quarter' | 'half' | 'year';
  /** No year given ("in March"): compared without the year. */
  yearless: boolean;
}

/** The separators of a locale's numbers. */
export interface NumberStyle {
  locale: string;
  /** The grouping separator as written (`,` `.` `'` or a space); spaces of any width are accepted for a space. */
  group: string;
  decimal: string;
  /** Month before day in numeric dates (en-US: 03/15/2024). */
  monthFirst: boolean;
}

const styles = new Map<string, NumberStyle>();

/** The number style of a BCP 47 locale (`en` when unknown). */
export function numberStyle(locale = 'en'): NumberStyle {
  const cached = styles.get(locale);
  if (cached) return cached;
  let resolved: string;
  try {
    resolved = Intl.getCanonicalLocales(locale)[0] ?? 'en';
  } catch {
    resolved = 'en';
  }
  const parts = new Intl.NumberFormat(resolved).formatToParts(1234567.5);
  const group = parts.find((p) => p.type === 'group')?.value ?? ',';
  const decimal = parts.find((p) => p.type === 'decimal')?.value ?? '.';
  const dateParts = new Intl.DateTimeFormat(resolved, { year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(
    new Date(Date.UTC(2024, 2, 15)),
  );
  const order = dateParts.filter((p) => p.type === 'month' || p.type === 'day').map((p) => p.type);
  const style: NumberStyle = {
    locale: resolved,
    group: /\s/.test(group) ? ' ' : group,
    decimal,
    monthFirst: order[0] === 'month',
  };
  styles.set(locale, style);
  return style;
}

/** Currency symbols and words, and the ISO code each stands for. */
const CURRENCY_SYMBOLS: Record<string, string> = {
  $: 'USD',
  US$: 'USD',
  '€': 'EUR',
  '£': 'GBP',
  '¥': 'JPY',
  '₹': 'INR',
  '₩': 'KRW',
  '₽': 'RUB',
  '₺': 'TRY',
  '₪': 'ILS',
  C$: 'CAD',
  A$: 'AUD',
  R$: 'BRL',
  CA$: 'CAD',
  AU$: 'AUD',
};
const CURRENCY_WORDS: Record<string, string> = {
  dollar: 'USD',
  dollars: 'USD',
  dólar: 'USD',
  dólares: 'USD',
  dollari: 'USD',
  dollaro: 'USD',
  euro: 'EUR',
  euros: 'EUR',
  pound: 'GBP',
  pounds: 'GBP',
  yen: 'JPY',
  rupees: 'INR',
  francs: 'CHF',
};
const ISO_CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

/** An ISO 4217 code named in a text such as a field description ("Total value in USD"), if exactly one is. */
export function currencyCodeIn(text: string | null | undefined): string | undefined {
  if (!text) return undefined;
  const codes = new Set([...text.matchAll(/\b[A-Z]{3}\b/g)].map((m) => m[0]).filter((code) => ISO_CURRENCIES.has(code)));
  return codes.size === 1 ? [...codes][0] : undefined;
}

const SCALE_WORDS: Record<string, number> = {
  k: 1e3,
  K: 1e3,
  thousand: 1e3,
  thousands: 1e3,
  M: 1e6,
  m: 1e6,
  mn: 1e6,
  mln: 1e6,
  MM: 1e6,
  million: 1e6,
  millions: 1e6,
  bn: 1e9,
  B: 1e9,
  billion: 1e9,
  billions: 1e9,
  tn: 1e12,
  T: 1e12,
  trillion: 1e12,
  // German and French abbreviations: Tsd., Mio., Mrd., Md.
  Tsd: 1e3,
  Mio: 1e6,
  Mrd: 1e9,
  Md: 1e9,
  // Other languages' words and abbreviations.
  Tausend: 1e3,
  Million: 1e6,
  Millionen: 1e6,
  Milliarde: 1e9,
  Milliarden: 1e9,
  Mln: 1e6,
  Mds: 1e9,
  mds: 1e9,
  mrd: 1e9,
  mld: 1e9,
  Mld: 1e9,
  milliard: 1e9,
  milliards: 1e9,
  millón: 1e6,
  millones: 1e6,
  'mil millones': 1e9,
  mil: 1e3,
  mila: 1e3,
  milione: 1e6,
  milioni: 1e6,
  miliardo: 1e9,
  miliardi: 1e9,
  milhão: 1e6,
  milhões: 1e6,
  'mil milhões': 1e9,
  bilhão: 1e9,
  bilhões: 1e9,
  miljoen: 1e6,
  miljoenen: 1e6,
  miljard: 1e9,
  miljarden: 1e9,
  // Brazilian business shorthand: "US$ 55,3 mi", "US$ 3,2 bi".
  mi: 1e6,
  bi: 1e9,
};

/** Month names in English (and its abbreviations), German, French, Spanish, Italian, Portuguese and Dutch. */
const MONTH_NAMES = [
  'jan(?:uary)?|januar|jänner|janvier|janv|enero|gennaio|janeiro|januari',
  'feb(?:ruary)?|februar|février|fevrier|févr|febrero|febbraio|fevereiro|februari',
  'mar(?:ch)?|märz|maerz|mars|marzo|março|maart',
  'apr(?:il)?|avril|abril|aprile',
  'may|mai|mayo|maggio|maio|mei',
  'june?|juni|juin|junio|giugno|junho',
  'july?|juli|juillet|julio|luglio|julho',
  'aug(?:ust)?|august|août|aout|agosto|augustus',
  'sep(?:t(?:ember)?)?|septembre|septiembre|setiembre|settembre|setembro',
  'oct(?:ober)?|oktober|octobre|octubre|ottobre|outubro',
  'nov(?:ember)?|novembre|noviembre|novembro',
  'dec(?:ember)?|dezember|dez|décembre|decembre|diciembre|dicembre|dezembro',
];
const MONTHS = MONTH_NAMES.join('|');
const MONTH_PATTERNS = MONTH_NAMES.map((name) => new RegExp(`^(?:${name})\\.?$`, 'i'));

function monthNumber(name: string): number {
  return MONTH_PATTERNS.findIndex((pattern) => pattern.test(name)) + 1;
}

/**
 * Whether a month name without a year names a month: English ones capitalised and in full, other languages'
 * in full (lower case in most); those that are words too ("may", "mai", "mars") only after a word of dates.
 */
function monthAlone(name: string, before: string): boolean {
  const lower = name.toLowerCase();
  if (/^(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|dez|janv|févr)$/.test(lower)) return false;
  if (/^(?:may|mai|mars)$/.test(lower)) {
    // Capitalised inside a sentence it is the month ("der Mai", "since May"); lower case a verb or "never" (Italian).
    if (name[0] !== lower[0] && !/(?:^|[.!?:\n]\s*|[-*#>|]\s*|\d\.\s*)$/.test(before)) return true;
    return /\b(?:in|since|until|by|during|im|seit|bis|ab|en|depuis|jusqu'en|au mois de|début|fin|op|sinds|tot)\s+$/i.test(before);
  }
  if (/^(?:january|february|march|april|june|july|august|september|october|november|december)$/.test(lower))
    return name[0] === name[0].toUpperCase();
  return true;
}

/** The ordinal words of the first four in the languages read, each with its number. */
const ORDINAL_WORDS: Record<string, number> = Object.fromEntries(
  [
    'first erste erster erstes ersten premier première primer primero primera primo prima primeiro primeira eerste',
    'second zweite zweiter zweites zweiten deuxième deuxieme seconde segundo segunda secondo seconda tweede',
    'third dritte dritter drittes dritten troisième troisieme tercer tercero tercera terzo terza terceiro terceira derde',
    'fourth vierte vierter viertes vierten quatrième quatrieme cuarto cuarta quarto quarta vierde',
  ].flatMap((words, i) => words.split(' ').map((word) => [word, i + 1])),
);

function ordinalWord(word: string | undefined): number {
  return word ? (ORDINAL_WORDS[word.toLowerCase()] ?? 0) : 0;
}

/** "3. Quartal 2024", "third quarter of 2024", "2º trimestre de 2024": number or ordinal word, the word, a year. */
const QUARTER_WORDS = new RegExp(
  String.raw`\b(?:([1-4])(?:\.|st|nd|rd|th|er|re|e|è|ème|eme|º|°|ª|o)?|(${Object.keys(ORDINAL_WORDS).join('|')}))` +
    String.raw`[\s-]+(quarter|quartal|trimestre|kwartaal|half|halbjahr|hälfte|semestre|halfjaar|helft)\b` +
    String.raw`(?:(?:\s+(?:of|de|del|dell'|di|do|da|van|von|des|im|the|het)){0,2}\s+((?:19|20)\d{2})\b)?`,
  'gi',
);

/** An ordinal, a few words ("zum", "au", "to the"), and another ordinal before a word of quarters or halves. */
const ELIDED_QUARTER = new RegExp(
  String.raw`\b(?:([1-4])(?:\.|st|nd|rd|th|er|re|e|è|ème|eme|º|°|ª|o)?|(${Object.keys(ORDINAL_WORDS).join('|')}))` +
    String.raw`(\s+(?:zum|bis zum|bis|und|oder|au|et|à|al|y|a|e|para o|ao|naar het|tot het|en|to the|and the|to|and)\s+)` +
    String.raw`((?:[1-4](?:\.|st|nd|rd|th|er|re|e|è|ème|eme|º|°|ª|o)?|${Object.keys(ORDINAL_WORDS).join('|')})[\s-]+(?:quarter|quartal|trimestre|kwartaal|half|halbjahr|hälfte|semestre|halfjaar|helft)\b)`,
  'gi',
);

/** An article and an ordinal word that stands alone ("el segundo", "the third", "au deuxième"). */
const LONE_ORDINAL = new RegExp(
  String.raw`(?<![\p{L}])(?:el|la|le|il|lo|o|a|der|die|das|den|dem|het|de|the|al|au|ao|do|no|nel|im|del|dal)\s+(${Object.keys(ORDINAL_WORDS).join('|')})(?![\p{L}])`,
  'giu',
);

/** The Monday to Sunday of an ISO week. */
function isoWeek(year: number, week: number): { from: string; to: string } {
  const jan4 = new Date(Date.UTC(year, 0, 4));
  const monday = new Date(jan4.getTime() - ((jan4.getUTCDay() + 6) % 7) * 86400000 + (week - 1) * 7 * 86400000);
  const sunday = new Date(monday.getTime() + 6 * 86400000);
  return { from: monday.toISOString().slice(0, 10), to: sunday.toISOString().slice(0, 10) };
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function isoDay(year: number, month: number, day: number): string | undefined {
  if (month < 1 || month > 12 || day < 1) return undefined;
  const last = new Date(Date.UTC(year || 2000, month, 0)).getUTCDate();
  if (day > last) return undefined;
  return `${year ? pad(year, 4) : '--'}-${pad(month)}-${pad(day)}`.replace(/^---/, '--');
}

function lastDayOf(year: number, month: number): number {
  return new Date(Date.UTC(year || 2000, month, 0)).getUTCDate();
}

function period(year: number, fromMonth: number, toMonth: number): { from: string; to: string } {
  const y = pad(year, 4);
  return { from: `${y}-${pad(fromMonth)}-01`, to: `${y}-${pad(toMonth)}-${pad(lastDayOf(year, toMonth))}` };
}

/** What a text holds: figures, dates and times, periods; plus the stretches that state none (ids, code). */
export interface ReadText {
  figures: Figure[];
  dates: DateMention[];
  periods: PeriodMention[];
}

/** Options of `readText`. */
export interface ReadOptions {
  locale?: string;
  /** The language the text is written in; told from the text when absent. Its number style wins over the locale's. */
  language?: GroundingLanguage;
  /** Stretches of the text that state no figure (identifiers found verbatim in the results): start, end. */
  masked?: ReadonlyArray<readonly [number, number]>;
}

/** Replaces [start, end) with spaces: same length, so indexes stay. */
function blank(text: string, start: number, end: number): string {
  return text.slice(0, start) + ' '.repeat(end - start) + text.slice(end);
}

/** A text whose stretches are blanked one by one, built again only when read (answers can hold thousands of them). */
class Blanked {
  private readonly units: string[];
  private cached: string | undefined;

  constructor(text: string) {
    this.units = text.split('');
  }

  blank(start: number, end: number): void {
    for (let i = Math.max(0, start); i < Math.min(end, this.units.length); i++) this.units[i] = ' ';
    this.cached = undefined;
  }

  get text(): string {
    return (this.cached ??= this.units.join(''));
  }
}

function blankAll(text: string, pattern: RegExp): string {
  return text.replace(pattern, (match) => ' '.repeat(match.length));
}

/**
 * Every figure, date and period of `text`. Not figures: list markers, ranks and ordinals, numbers
 * inside words and codes, years used as labels, spans of time ("the last 30 days"), quarters and
 * halves, inline code, and the `masked` stretches.
 */
export function readText(text: string, options: ReadOptions = {}): ReadText {
  const language = options.language ?? detectLanguage(text);
  const style = numberStyle(textLocale(options.locale, language));
  // Neither the words nor a locale say how the digits are written: "1.234" may be either.
  const uncertain = language === undefined && !options.locale;
  const spans = new Blanked(text);
  for (const [start, end] of options.masked ?? []) spans.blank(start, end);
  let masked = spans.text;
  // Code spans and fenced blocks show queries and arguments, not claims.
  masked = blankAll(masked, /```[\s\S]*?```|`[^`\n]*`/g);
  // UUIDs and long hex ids (not the long fraction of a decimal number, 0.46808510638297873).
  masked = blankAll(masked, /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi);
  masked = blankAll(masked, /(?<!\d[.,])\b[0-9a-f]{16,}\b/gi);
  // Links: a URL's digits are not figures.
  masked = blankAll(masked, /\bhttps?:\/\/\S+/gi);
  masked = blankRankColumns(masked);
  masked = blankMarkers(masked);

  const dates: DateMention[] = [];
  const periods: PeriodMention[] = [];
  masked = readDates(masked, text, style, dates);
  masked = readPeriods(masked, text, periods);
  periods.sort((a, b) => a.index - b.index);
  dates.sort((a, b) => a.index - b.index);
  // Number words are read in English only: "ten" is Dutch for "at", "one" and "me" mean other things elsewhere.
  const figures = readFigures(masked, text, style, uncertain, language === undefined || language === 'en');
  return { figures, dates, periods };
}

/**
 * Footnote markers and their notes ("[1]", "[^2]"), and inline list markers "(1) ... (2) ...": references,
 * not figures.
 */
function blankMarkers(text: string): string {
  let out = blankAll(text, /\[\^?\d{1,2}\](?!\()/g);
  if (/\(1\)/.test(out) && /\(2\)/.test(out)) out = blankAll(out, /(?<![\p{L}\p{N}])\(\d{1,2}\)(?=\s+[\p{L}*_])/gu);
  return out;
}

/** A Markdown table's rank column ("#", "Rank", "No."): positions, not figures. */
function blankRankColumns(text: string): string {
  const lines = text.split('\n');
  let offset = 0;
  let rankColumns: number[] = [];
  let out = text;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const trimmed = line.trim();
    if (!trimmed.startsWith('|')) rankColumns = [];
    else if (/^\|?\s*:?-{2,}/.test(trimmed) && i > 0) {
      const header = lines[i - 1].split('|').map((cell) => cell.trim().toLowerCase());
      rankColumns = header.flatMap((cell, index) => (/^(?:#|no\.?|nr\.?|rank|pos\.?|position|place)$/.test(cell) ? [index] : []));
    } else if (rankColumns.length) {
      let at = 0;
      line.split('|').forEach((cell, index) => {
        if (rankColumns.includes(index)) out = blank(out, offset + at, offset + at + cell.length);
        at += cell.length + 1;
      });
    }
    offset += line.length + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Dates, times and periods

const TIME = String.raw`(\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?\s*(am|pm|a\.m\.|p\.m\.)?`;

function readDates(input: string, text: string, style: NumberStyle, out: DateMention[]): string {
  const blanked = new Blanked(input);
  const take = (match: RegExpMatchArray, date: string | undefined, time?: string) => {
    const index = match.index!;
    const shown = text.slice(index, index + match[0].length).trim();
    if (date !== undefined || time !== undefined) out.push({ text: shown, index, end: index + shown.length, date, time });
    blanked.blank(index, index + match[0].length);
  };
  const timeOf = (h?: string, m?: string, meridiem?: string): string | undefined => {
    if (h === undefined || m === undefined) return undefined;
    let hour = Number(h);
    const mer = meridiem?.toLowerCase().replaceAll('.', '');
    if (mer === 'pm' && hour < 12) hour += 12;
    if (mer === 'am' && hour === 12) hour = 0;
    if (hour > 23 || Number(m) > 59) return undefined;
    return `${pad(hour)}:${m}`;
  };
  // ISO dates and timestamps: 2024-03-01, 2024-03-01T10:00:00Z, 2024-03-01 10:00.
  for (const match of blanked.text.matchAll(
    /\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?\b/g,
  )) {
    take(match, isoDay(Number(match[1]), Number(match[2]), Number(match[3])), timeOf(match[4], match[5]));
  }
  // Month name and day, maybe a year: March 5, March 5th, 2024, Mar. 5 2024.
  for (const match of blanked.text.matchAll(
    new RegExp(`\\b(${MONTHS})\\.?\\s+(\\d{1,2})(?:st|nd|rd|th)?\\b(?:,?\\s+(\\d{4})\\b)?(?!\\s*[%$€£]|[.,/]\\d)`, 'gi'),
  )) {
    take(match, isoDay(Number(match[3] ?? 0), monthNumber(match[1]), Number(match[2])));
  }
  // Day before month: 5 March 2024, 5th of March, 5. März 2024, 5 de marzo de 2024, 1er mars. A day with a dot is
  // written so only where a comma is the decimal separator: in English "24. February" ends a sentence at 24.
  const dayDot = style.decimal === ',' ? '|\\.' : '';
  for (const match of blanked.text.matchAll(
    new RegExp(
      `\\b(\\d{1,2})(?:st|nd|rd|th|er${dayDot}|º|°)?\\s+(?:of\\s+|de\\s+)?(${MONTHS})\\b\\.?(?:,?\\s+(?:de\\s+)?(\\d{4})\\b)?`,
      'gi',
    ),
  )) {
    // "2. Juni: 18,1 Mio. $" opening a line of a numbered list: a place and a month, not a day.
    if (isListMarker(blanked.text, match.index)) continue;
    take(match, isoDay(Number(match[3] ?? 0), monthNumber(match[2]), Number(match[1])));
  }
  // Numeric dates: 03/15/2024 (month first where the locale writes it so), 15.03.2024, 15/03/24, 30-06-2025.
  for (const match of blanked.text.matchAll(/\b(\d{1,4})([/.]|-(?=\d{1,2}-(?:\d{4}|\d{2})\b))(\d{1,2})\2(\d{2,4})\b/g)) {
    const [a, , b, c] = [Number(match[1]), match[2], Number(match[3]), match[4]];
    let date: string | undefined;
    if (match[1].length === 4) date = isoDay(a, b, Number(c));
    else {
      const year = c.length === 2 ? 2000 + Number(c) : Number(c);
      date = style.monthFirst && match[2] === '/' ? isoDay(year, a, b) : isoDay(year, b, a);
    }
    take(match, date);
  }
  // A day and month without a year where a comma is the decimal separator: 04.01. (German), 4.1.
  if (style.decimal === ',')
    for (const match of blanked.text.matchAll(/(?<![\d.,])(\d{1,2})\.(\d{1,2})\.(?![\d,])/g))
      take(match, isoDay(0, Number(match[2]), Number(match[1])));
  // A day and month after a word of dates: on 4/1, am 4/1, le 4/1, el 4/1, dal 4/1.
  for (const match of blanked.text.matchAll(
    /(?<=\b(?:on|am|vom|seit|le|du|depuis|el|del|desde|il|dal|em|op|since|from|until|bis|au|hasta|até|tot)\s+)(\d{1,2})\/(\d{1,2})(?![/\d])/gi,
  )) {
    const [a, b] = [Number(match[1]), Number(match[2])];
    take(match, style.monthFirst ? isoDay(0, a, b) : isoDay(0, b, a));
  }
  // A day and month alone: "ma 31/3", "a partir de 10/3" (or month first where the locale writes it so), and a day
  // before a month of two digits: "sluitdatum 30-09". A day that does not exist is left to the figures.
  for (const match of blanked.text.matchAll(/(?<![\p{L}\p{N}/.,-])(\d{1,2})\/(\d{1,2})(?![/\d]|[.,]\d)/gu)) {
    const [a, b] = [Number(match[1]), Number(match[2])];
    const date = style.monthFirst ? (isoDay(0, a, b) ?? isoDay(0, b, a)) : (isoDay(0, b, a) ?? isoDay(0, a, b));
    if (date) take(match, date);
  }
  for (const match of blanked.text.matchAll(/(?<![\p{L}\p{N}/.,\-–])(\d{2})-(0[1-9])(?![\d\-–]|[.,]\d)/gu)) {
    const date = isoDay(0, Number(match[2]), Number(match[1]));
    if (date) take(match, date);
  }
  // Times of day: 10:30, 10:30:15, 2:30 pm.
  for (const match of blanked.text.matchAll(new RegExp(`\\b${TIME}`, 'gi'))) {
    take(match, undefined, timeOf(match[1], match[2], match[4]));
  }
  // French and Portuguese hours: 9 h 00, 9h30, 9h.
  for (const match of blanked.text.matchAll(/\b(\d{1,2})\s?h\s?(\d{2})?(?![\p{L}\d])/gu)) {
    take(match, undefined, timeOf(match[1], match[2] ?? '00'));
  }
  return blanked.text;
}

function readPeriods(input: string, text: string, out: PeriodMention[]): string {
  const blanked = new Blanked(input);
  const take = (match: RegExpMatchArray, found: Omit<PeriodMention, 'text' | 'index' | 'end'> | undefined) => {
    const index = match.index!;
    const shown = text.slice(index, index + match[0].length).trim();
    if (found) out.push({ text: shown, index, end: index + shown.length, ...found });
    blanked.blank(index, index + match[0].length);
  };
  const quarter = (year: number, q: number) => ({
    ...period(year, q * 3 - 2, q * 3),
    grain: 'quarter' as const,
    yearless: !year,
  });
  const half = (year: number, h: number) => ({ ...period(year, h * 6 - 5, h * 6), grain: 'half' as const, yearless: !year });
  // Year-months, year-quarters, year-weeks: 2024-03, 2024-Q1, 2024-W09.
  for (const match of blanked.text.matchAll(/\b(\d{4})-(?:(0[1-9]|1[0-2])|Q([1-4])|W(\d{1,2}))\b/gi)) {
    const year = Number(match[1]);
    if (match[2]) take(match, { ...period(year, Number(match[2]), Number(match[2])), grain: 'month', yearless: false });
    else if (match[3]) take(match, quarter(year, Number(match[3])));
    else take(match, undefined);
  }
  // Quarters and halves: Q1 2024, Q1 '24, Q1, H2 2023, FY2024, FY 2024.
  for (const match of blanked.text.matchAll(/\b(Q[1-4]|H[12]|FY)(?:\s*'(\d{2})\b|\s*((?:19|20)\d{2})\b|(\d{2})\b)?/gi)) {
    const short = match[2] ?? match[4];
    const year = short ? 2000 + Number(short) : match[3] ? Number(match[3]) : 0;
    const kind = match[1].toUpperCase();
    if (kind === 'FY') take(match, year ? { ...period(year, 1, 12), grain: 'year', yearless: false } : undefined);
    else if (kind.startsWith('Q')) take(match, quarter(year, Number(kind[1])));
    else take(match, half(year, Number(kind[1])));
  }
  // Month and year, or a month alone: March 2024, Mar. 2024, March, März '24, marzo de 2024.
  for (const match of blanked.text.matchAll(
    new RegExp(`\\b(${MONTHS})\\b\\.?(?:,?\\s+(?:de\\s+|del\\s+|van\\s+)?(\\d{4})\\b|\\s+'(\\d{2})\\b)?`, 'gi'),
  )) {
    const name = match[1];
    const year = match[2] ? Number(match[2]) : match[3] ? 2000 + Number(match[3]) : 0;
    if (!year && !monthAlone(name, blanked.text.slice(Math.max(0, match.index - 16), match.index))) continue;
    const month = monthNumber(name);
    take(match, { ...period(year, month, month), grain: 'month', yearless: !year });
  }
  // Quarters and halves in words, in the languages read: "the first quarter of 2024", "3. Quartal 2024",
  // "1er trimestre 2024", "segundo trimestre de 2024", "terzo trimestre", "2º semestre", "derde kwartaal van 2024"
  // (before the years, which would take their year).
  // The first of two ordinals that share their word: "vom 3. zum 4. Quartal 2024", "du 3e au 4e trimestre",
  // "dal terzo al quarto trimestre", "from the third to the fourth quarter of 2024".
  for (const match of blanked.text.matchAll(ELIDED_QUARTER)) {
    const n = match[1] ? Number(match[1]) : ordinalWord(match[2]);
    const rest = QUARTER_WORDS.exec(blanked.text.slice(match.index + match[0].length - match[4].length));
    QUARTER_WORDS.lastIndex = 0;
    const year = rest?.[4] ? Number(rest[4]) : 0;
    const isHalf = /^(?:half|halbjahr|semestre|halfjaar|helft|hälfte)$/i.test(rest?.[3] ?? '');
    if (!rest || (isHalf ? n < 1 || n > 2 : n < 1 || n > 4)) continue;
    const first = Object.assign([match[0].slice(0, match[0].length - match[3].length - match[4].length).trimEnd()], {
      index: match.index,
    }) as unknown as RegExpMatchArray;
    take(first, isHalf ? half(year, n) : quarter(year, n));
  }
  for (const match of blanked.text.matchAll(QUARTER_WORDS)) {
    const n = match[1] ? Number(match[1]) : ordinalWord(match[2]);
    const year = match[4] ? Number(match[4]) : 0;
    const isHalf = /^(?:half|halbjahr|semestre|halfjaar|helft|hälfte)$/i.test(match[3]);
    if (isHalf ? n < 1 || n > 2 : n < 1 || n > 4) continue;
    take(match, isHalf ? half(year, n) : quarter(year, n));
  }
  // An ordinal alone after a quarter or a half of the same sentence: "en el primer trimestre y 44,2 en el segundo".
  for (const match of blanked.text.matchAll(LONE_ORDINAL)) {
    const before = out.filter((p) => (p.grain === 'quarter' || p.grain === 'half') && p.end <= match.index).at(-1);
    if (!before || match.index - before.end > 120 || /[.!?\n]/.test(text.slice(before.end, match.index))) continue;
    const n = ordinalWord(match[1]);
    const year = before.yearless ? 0 : Number(before.from.slice(0, 4));
    const index = match.index + match[0].length - match[1].length;
    const word = Object.assign([match[1]], { index }) as unknown as RegExpMatchArray;
    if (before.grain === 'half' ? n >= 1 && n <= 2 : n >= 1 && n <= 4)
      take(word, before.grain === 'half' ? half(year, n) : quarter(year, n));
  }
  // Quarters as French and Spanish write them: T3 2024, 3T 2024, 3T24.
  for (const match of blanked.text.matchAll(/\b(?:T([1-4])|([1-4])T)(?:\s*((?:19|20)\d{2})|\s*'?(\d{2}))?\b/g)) {
    const q = Number(match[1] ?? match[2]);
    const year = match[3] ? Number(match[3]) : match[4] ? 2000 + Number(match[4]) : 0;
    take(match, quarter(year, q));
  }
  // Week numbers: KW 14, week 14, W14, semaine 14, semana 14, settimana 14 (with a year: a week of days).
  for (const match of blanked.text.matchAll(
    /(?:\b(?:KW|Kw|CW|[Ww]eek|[Ww]k|[Ww]oche|[Ss]emaine|[Ss]em\.|[Ss]emana|[Ss]ettimana|[Ss]ett\.)\s?-?\s?|\bW)(\d{1,2})\b(?:\s*(?:\/|of|de|del|van|von|,)?\s*((?:19|20)\d{2})\b)?/g,
  )) {
    const week = Number(match[1]);
    const year = match[2] ? Number(match[2]) : 0;
    take(match, year && week >= 1 && week <= 53 ? { ...isoWeek(year, week), grain: 'week', yearless: false } : undefined);
  }
  // A year after a word of time: in 2024, since 2019, during 2023, 2024's; im Jahr 2024, en 2024, nel 2024.
  for (const match of blanked.text.matchAll(
    /\b(?:in|of|for|since|during|from|to|until|till|through|thru|before|after|year|early|late|mid|end|start|by|between|and|vs\.?|versus|than|over|im|seit|bis|von|vom|für|jahr|zwischen|und|gegenüber|en|depuis|pour|année|entre|et|au|jusqu'en|del|desde|hasta|año|para|y|nel|dal|anno|fino al|tra|e|rispetto al|em|no|ano|até|do|da|van|tot|jaar|tussen|dan|als)\s+((?:19|20)\d{2})\b(?![.,]\d|\s*%)/gi,
  )) {
    const year = Number(match[1]);
    const index = match.index + match[0].length - match[1].length;
    take(Object.assign([match[1]], { index }) as unknown as RegExpMatchArray, {
      ...period(year, 1, 12),
      grain: 'year',
      yearless: false,
    });
  }
  return blanked.text;
}

// ---------------------------------------------------------------------------------------------
// Figures in digits

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Separators of three-digit groups, in any style: the decimal separator is told apart by what follows it. */
const GROUP_SEPARATORS = String.raw`,.'’\u00a0\u202f\u2009`;

/**
 * The digits of a number in any style, its meaning decided by the style where the digits leave it open:
 * groups of three after one separator (1,234,567.89, 1.234.567,89, 1 234 567,89, 1'234'567.89), Indian lakh
 * grouping (12,34,567), or digits with a fraction (12,5 12.5). "1.234" and "1,234" are a thousand and some
 * where that separator groups in the style, and a decimal where it is the style's decimal separator.
 */
function numberPattern(style: NumberStyle): string {
  // A plain space groups digits only where the style groups with a space or writes a decimal comma.
  const separators = GROUP_SEPARATORS + (style.group === ' ' || style.decimal === ',' ? ' ' : '');
  return (
    String.raw`(\d{1,3}(?<group>[${separators}])\d{3}(?:\k<group>\d{3})*(?:[.,]\d+)?` +
    String.raw`|\d{1,2}(?:,\d{2})+,\d{3}(?:\.\d+)?|\d+(?:[.,]\d+)?)`
  );
}

/** The value of a number's digits as `numberPattern` matched them, or undefined when they are no number. */
function readDigits(
  token: string,
  separator: string | undefined,
  style: NumberStyle,
): { value: number; decimals: number; grouped: boolean; other?: { value: number; decimals: number } } | undefined {
  let integer = token;
  let fraction: string | undefined;
  const decimalAt = Math.max(token.lastIndexOf('.'), token.lastIndexOf(','));
  if (decimalAt >= 0 && token[decimalAt] !== separator) {
    [integer, fraction] = [token.slice(0, decimalAt), token.slice(decimalAt + 1)];
  } else if (separator && /^[.,]$/.test(separator) && token.split(separator).length === 2) {
    // One separator before three digits: a decimal where it is the style's decimal separator, or after a zero.
    const [head, tail] = token.split(separator);
    if (separator === style.decimal || /^0+$/.test(head)) [integer, fraction] = [head, tail];
    if (!/^0+$/.test(head)) {
      const other =
        fraction === undefined ? { value: Number(`${head}.${tail}`), decimals: 3 } : { value: Number(head + tail), decimals: 0 };
      const grouped = /\D/.test(integer);
      return {
        value: Number(`${integer.replace(/\D/g, '')}${fraction ? `.${fraction}` : ''}`),
        decimals: fraction?.length ?? 0,
        grouped,
        other,
      };
    }
  }
  if (separator && integer.includes(separator) && fraction !== undefined && token[decimalAt] === separator) return undefined;
  const grouped = /\D/.test(integer);
  return {
    value: Number(`${integer.replace(/\D/g, '')}${fraction ? `.${fraction}` : ''}`),
    decimals: fraction?.length ?? 0,
    grouped,
  };
}

const SYMBOLS = Object.keys(CURRENCY_SYMBOLS)
  .sort((a, b) => b.length - a.length)
  .map(escape)
  .join('|');
const SCALE = Object.keys(SCALE_WORDS)
  .sort((a, b) => b.length - a.length)
  .join('|');

/** Units after a number: percentages, percentage points (before the percentages they start with) and basis points. */
const UNIT = [
  String.raw`%-punt(?:en)?\b`,
  '%',
  String.raw`percentage points?\b`,
  String.raw`per\s?cent\b`,
  String.raw`pp\b`,
  String.raw`p\.\s?p\.`,
  String.raw`Pp\.`,
  String.raw`[Pp]rozentpunkte?n?\b`,
  String.raw`[Pp]rozent\b`,
  String.raw`points? de pourcentage\b`,
  String.raw`pour\s?cent\b`,
  String.raw`puntos? porcentual(?:es)?\b`,
  String.raw`por\s?ciento\b`,
  String.raw`punt[io] percentual[ei]\b`,
  String.raw`per\s?cento\b`,
  String.raw`pontos? percentua(?:is|l)\b`,
  String.raw`por\s?cento\b`,
  String.raw`procentpunt(?:en)?\b`,
  String.raw`procent\b`,
  String.raw`points?\b`,
  String.raw`pts?\b`,
  String.raw`[Pp]unkte?n?\b`,
  String.raw`puntos?\b`,
  String.raw`punt[io]\b`,
  String.raw`pontos?\b`,
  String.raw`punten\b`,
  String.raw`punkt(?:y|ów)?\b`,
  String.raw`bps?\b`,
  String.raw`basis points?\b`,
].join('|');
const PERCENT_UNIT = /^(?:%|per\s?cent|[Pp]rozent|pour\s?cent|por\s?ciento|per\s?cento|por\s?cento|procent)$/i;
const POINTS_UNIT =
  /^(?:%-punt(?:en)?|percentage points?|pp|p\.\s?p\.|Pp\.|prozentpunkte?n?|points? de pourcentage|puntos? porcentual(?:es)?|punt[io] percentual[ei]|pontos? percentua(?:is|l)|procentpunt(?:en)?)$/i;
/** "points" alone is a percentage point only beside percentages. */
const POINTS_WORD = /^(?:points?|pts?|punkte?n?|puntos?|punt[io]|pontos?|punten|punkt(?:y|ów)?)$/i;
const PERCENT_NEARBY = /%|\bper\s?cent|\bprozent|\bpour\s?cent|\bpor\s?cien|\bper\s?cento|\bpor\s?cento|\bprocent/i;

const numberRegexes = new Map<string, RegExp>();

function numberRegex(style: NumberStyle): RegExp {
  const key = `${style.locale}|${style.group}|${style.decimal}`;
  const cached = numberRegexes.get(key);
  if (cached) return cached;
  const regex = new RegExp(
    String.raw`(?<![\w.,'’$€£¥₹])` +
      // sign, then currency (symbol or code), then sign again: -$45, $-45, USD 45
      String.raw`([-−–+]\s?)?(?:(${SYMBOLS}|\b[A-Z]{3})\s?)?([-−–+]\s?)?` +
      numberPattern(style) +
      // unit or scale: %, percent, per cent, bp, k, M, bn, million, Mio., milliards ...
      String.raw`(?:\s?(${UNIT})|\s?(${SCALE})\b)?` +
      // a currency code or word after: 45 USD, 3 million dollars, 3 millions de dollars, 3 milioni di dollari
      String.raw`(?:\.?\s?(?:(?:de|di)\s|d')?(\b[A-Z]{3}\b|[Dd]ollars?\b|dólares\b|dólar\b|dollari\b|dollaro\b|[Ee]uros?\b|pounds\b|yen\b|rupees\b|francs\b|[$€£¥₹](?![\w])))?` +
      String.raw`(?![\w]|[.,]\d|(?<!\d{4})[${GROUP_SEPARATORS}${style.decimal === ',' ? ' ' : ''}]\d{3}\b)`,
    'g',
  );
  numberRegexes.set(key, regex);
  return regex;
}

/** Words before a figure that hedge it. */
const ABOUT =
  /(?:\babout|\baround|\broughly|\bapproximately|\bapprox\.?|\bcirca|\bca\.|\bsome|\bclose to|\ban estimated|\bestimated|\bjust about|~|≈|\bin the region of|\bon the order of|\betwa|\brund|\bungefähr|\bannähernd|\benviron|à peu près|\bprès de|\bautour de|\bapproximativement|\baproximadamente|\balrededor de|\bunos|\bunas|\ben torno a|\bintorno a|\ball'incirca|\bcerca de|\bem torno de|\bpor volta de|\buns|\bumas|\bongeveer|\bzo'n|\brond|\bca)\s*$/i;
const OVER =
  /(?:\bover|\bmore than|\babove|\bexceeding|\bupwards of|\bnorth of|\bat least|\bjust over|\bwell over|\bin excess of|\bgreater than|>|≥|\büber|\bmehr als|\bmindestens|\bplus de|\bau moins|\bmás de|\bal menos|\bpiù di|\boltre|\balmeno|\bmais de|\bpelo menos|\bmeer dan|\bruim|\bminstens)\s*$/i;
const UNDER =
  /(?:\bunder|\bless than|\bbelow|\bnearly|\balmost|\bjust under|\bup to|\bfewer than|\bshy of|\bat most|\bnot quite|<|≤|\bunter|\bweniger als|\bknapp|\bfast|\bbeinahe|\bbis zu|\bmoins de|\bpresque|\bjusqu'à|\bmenos de|\bcasi|\bhasta|\bmeno di|\bquasi|\bfino a|\bquase|\baté|\bminder dan|\bbijna|\bnog geen)\s*$/i;

/** Words of a change that give its direction, just before the figure ("fell by", "up"), in the languages read. */
const FALLING_BEFORE =
  /\b(?:minus|negative|down(?:\s+by)?|decrease[sd]?(?:\s+by|\s+of)?|decline[sd]?(?:\s+by|\s+of)?|drop(?:ped|s)?(?:\s+by|\s+of)?|fell(?:\s+by)?|falls?(?:\s+by|\s+of)?|shr[aiu]nk(?:s)?(?:\s+by)?|lower(?:ed)?\s+by|reduced\s+by|a\s+reduction\s+of|contracted\s+by|slipped(?:\s+by)?|a\s+loss\s+of|plunged(?:\s+by)?|slid(?:\s+by)?|gesunken(?:\s+um)?|gefallen(?:\s+um)?|zurückgegangen(?:\s+um)?|Rückgang(?:\s+um|\s+von)?|verringert(?:\s+um)?|sank(?:\s+um)?|fiel(?:\s+um)?|Einbruch(?:\s+um|\s+von)?|baisse(?:\s+de)?|recul(?:é)?(?:\s+de)?|diminu(?:é|tion)(?:\s+de)?|chut(?:e|é)(?:\s+de)?|repli(?:\s+de)?|ca[ií]da(?:\s+del?)?|cayó|cayeron|bajaron|disminuyeron|descendieron|retrocedieron|disminu(?:yó|ción)(?:\s+del?)?|baj(?:ó|ada)(?:\s+del?)?|descen(?:dió|so)(?:\s+del?)?|retroce(?:dió|so)(?:\s+del?)?|calo(?:\s+del?)?|diminu(?:ito|ita|zione)(?:\s+del?)?|sces[oa](?:\s+del?)?|flessione(?:\s+del?)?|ribasso(?:\s+del?)?|queda(?:\s+de)?|caiu|recuou|diminuiu|redução(?:\s+de)?|daling(?:\s+van)?|gedaald(?:\s+met)?|daalde(?:\s+met)?|daalden(?:\s+met)?|kromp(?:\s+met)?|afname(?:\s+van)?|gezakt(?:\s+met)?|teruggelopen(?:\s+met)?)\s+(?:(?:an?|some|about|around|roughly|nearly|almost|over|approximately|just|un|una|ein|einen|etwa|rund|environ|circa|ongeveer)\s+)*$/i;
const RISING_BEFORE =
  /\b(?:plus|up(?:\s+by)?|increase[sd]?(?:\s+by|\s+of)?|gr[eo]w(?:s|n)?(?:\s+by)?|rose(?:\s+by)?|rises?(?:\s+by)?|climbed(?:\s+by)?|jumped(?:\s+by)?|gained|a\s+gain\s+of|growth\s+of|grew\s+to|rising\s+by|higher\s+by|improved\s+by|expanded\s+by|surged(?:\s+by)?|gestiegen(?:\s+um)?|gewachsen(?:\s+um)?|Anstieg(?:\s+um|\s+von)?|Zuwachs(?:\s+um|\s+von)?|Wachstum(?:\s+um|\s+von)?|erhöht(?:\s+um)?|stieg(?:\s+um)?|wuchs(?:\s+um)?|zugelegt(?:\s+um)?|hausse(?:\s+de)?|augment(?:é|ation)(?:\s+de)?|progress(?:é|ion)(?:\s+de)?|croissance(?:\s+de)?|aument(?:ó|o)(?:\s+del?)?|aumentaron|crecieron|subieron|crec(?:ió|imiento)(?:\s+del?)?|sub(?:ió|ida)(?:\s+del?)?|alza(?:\s+del?)?|aumentat[oa](?:\s+del?)?|cresciut[oa](?:\s+del?)?|crescita(?:\s+del?)?|salit[oa](?:\s+del?)?|rialzo(?:\s+del?)?|aumentou|cresceu|crescimento(?:\s+de)?|subiu|stijging(?:\s+van)?|gestegen(?:\s+met)?|steeg(?:\s+met)?|stegen(?:\s+met)?|groeide(?:\s+met)?|groei(?:\s+van)?|gegroeid(?:\s+met)?|toename(?:\s+van)?|toegenomen(?:\s+met)?)\s+(?:(?:an?|some|about|around|roughly|nearly|almost|over|approximately|just|un|una|ein|einen|etwa|rund|environ|circa|ongeveer)\s+)*$/i;
/** A verb of change a few words before its figure ("steeg de omzet met 62,5%", "stieg im Jahr 2024 um 2,6 %"). */
const FALLING_FAR =
  /(?<![\p{L}])(?:fell|dropped|declined|decreased|sank|fiel|daalde|daalden|baissé|reculé|diminué|chuté|cayó|cayeron|bajó|bajaron|disminuyó|calato|sceso|diminuito|caiu|recuou|diminuiu)(?:\s+[\p{L}'’]+){1,4}\s+(?:by|um|de|del|di|met|en|em)\s+$/iu;
const RISING_FAR =
  /(?<![\p{L}])(?:rose|grew|increased|climbed|stieg|wuchs|steeg|stegen|groeide|augmenté|progressé|subió|subieron|creció|crecieron|aumentó|salito|cresciuto|aumentato|subiu|cresceu|aumentou)(?:\s+[\p{L}'’]+){1,4}\s+(?:by|um|de|del|di|met|en|em)\s+$/iu;
/** Words after a figure that give a change's direction ("5% lower", "a 3% decline"). */
const FALLING_AFTER =
  /^\s*(?:(?:year|quarter|month|week)[- ]over[- ](?:year|quarter|month|week)\s+)?(?:decrease|decline|drop|fall|reduction|contraction|lower|down|loss|Rückgang|niedriger|gesunken|gefallen|zurückgegangen|geschrumpft|eingebrochen|de baisse|en baisse|en moins|de caída|de descenso|in calo|in meno|de queda|a menos|lager|daling|gedaald|gezakt|afgenomen|teruggelopen)\b/i;
const RISING_AFTER =
  /^\s*(?:(?:year|quarter|month|week)[- ]over[- ](?:year|quarter|month|week)\s+)?(?:increase|rise|gain|growth|jump|higher|up|Anstieg|Wachstum|höher|gestiegen|gewachsen|angestiegen|de hausse|en hausse|de croissance|de crecimiento|de aumento|in crescita|in aumento|in più|de crescimento|a mais|hoger|stijging|groei|gestegen|gegroeid|toegenomen)\b/i;
/** A comparison: its direction is relative ("3 more deals than", "5 fewer"). */
const COMPARATIVE_AFTER =
  /^\s*(?:[\p{L}]+\s+){0,2}(?:more|fewer|less|higher|lower|greater|smaller|larger|bigger|ahead|behind|mehr|weniger|plus|moins|más|menos|più|meno|mais|meer|minder)(?![\p{L}])/iu;

/** Words before a bare number that make it a position, not a figure: "top 5", "#1", "rank 2", "Platz 2". */
const ORDINAL_BEFORE =
  /(?:(?<![\p{L}])(?:top|bottom|flop|first|last|rank(?:ed|s)?|no\.|number|step|page|row|line|item|option|tier|level|phase|version|v\.?|part|chapter|section|table|figure|fig\.|column|col\.|platz|plätze|rang|ränge|nr\.|nummer|numéro|número|numero|puesto|puestos|posto|posti|posição|posições|posición|posiciones|posizione|posizioni|positions?|plaats|plaatsen|lugar|lugares|places?|week|weeks|wk|woche|wochen|kw|semaine|semaines|semana|semanas|settimana|settimane|weken|tydzień|tygodnie|tygodniu)\s*-?\s*(?:\d{1,2}\s*(?:to|bis|à|au|a|al|t\/m|tot|and|und|et|y|e|en|-|–)\s*)?|#\s*|\bn[°º]\s*|\bn\.º\s*|\bn\.\s*)$/iu;
/** After a bare number: an ordinal ("2º", "2ª", "2°"), or a German ordinal before the noun it counts ("2. Platz"). */
const ORDINAL_AFTER =
  /^(?:st|nd|rd|th)\b|^[º°ª](?![CF]\b)|^\.(?:er|º|ª|°|o|a)(?![\p{L}\p{N}])|^(?:er|re|e|ème|eme|ᵉ)(?![\p{L}\p{N}])|^\.\s+(?:(?:zum|bis zum|bis|und|oder|bzw\.)\s+\d{1,2}\.\s+)?(?:Platz|Rang|Stelle|Position|Quartal|Halbjahr|Mal|Woche|Runde|Stufe)\b/iu;
/** An article before a number standing for a noun named earlier: "en la 13", "in der 14", "dans la 12". */
const ELLIPTIC_ARTICLE = /(?<![\p{L}])(?:la|el|le|il|die|der|das|het|de|the|a|o)\s+$/iu;
/** A week or a place named by its number: what a number after an article may stand for. */
const LABELLED_NUMBER =
  /(?<![\p{L}])(?:week|woche|kw|semaine|semana|settimana|platz|place|puesto|posto|lugar|plaats)\s*\d{1,2}(?![\p{N}])/iu;
/** "das 4. das schwächste", "der 3. in Folge": a number and a point that the sentence goes on after in lower case. */
const ORDINAL_LOWER_AFTER = /^\.\s+[a-zäöüßàâçéèêëîïôûùáíóúñ]/u;
/** Before or after a number or percentage: the size of a group, not a figure ("top 10%", "die 5 größten", "los 5 mejores"). */
const COHORT_BEFORE = /\b(?:top|bottom|flop|die besten|les meilleurs|los mejores|i migliori|os melhores|de beste)\s*-?\s*$/i;
const COHORT_AFTER =
  /^\s*(?:largest|biggest|best|highest|lowest|smallest|worst|top|größten|grössten|besten|ersten|wichtigsten|stärksten|premiers|premières|meilleurs|meilleures|plus grand|primeros|primeras|mejores|mayores|primi|prime|migliori|maggiori|primeiros|primeiras|melhores|maiores|beste|eerste|grootste|superiore|superior|supérieurs)(?![\p{L}])/iu;
/** A span of time: "the last 30 days", "over the past 12 months", "les 30 derniers jours". */
const SPAN_AFTER =
  /^\s*(?:derniers\s+|dernières\s+|últimos\s+|últimas\s+|ultimi\s+|ultime\s+|letzten\s+)?(?:calendar\s+|business\s+|full\s+)?(?:days?|weeks?|months?|quarters?|years?|hours?|minutes?|seconds?|Tage[n]?|Wochen|Monate[n]?|Jahre[n]?|Quartale[n]?|jours|semaines|mois|ans|années|trimestres|días|semanas|meses|años|giorni|settimane|mesi|anni|trimestri|dias|anos|dagen|weken|maanden|jaar|jaren|kwartalen)(?![\p{L}])/iu;
const SPAN_BEFORE =
  /(?<![\p{L}])(?:last|past|next|previous|coming|trailing|within|every|per|each|rolling|letzten|vergangenen|nächsten|kommenden|innerhalb|derniers|dernières|prochains|prochaines|últimos|últimas|próximos|próximas|ultimi|ultime|prossimi|prossime|laatste|afgelopen|komende|binnen)\s*$/iu;

/** A share written as a fraction: "1 in 2", "4 von 10", "1 affaire sur 2", "2 de cada 5", "4 su 10", "1 em cada 2", "6 op de 10". */
const FRACTION =
  /(?<![\p{L}\p{N}.,'’])(\d{1,3})\s+(?:[\p{L}’']+\s+){0,2}?(?:in(?: every)?|of every|out of|von|sur|de cada|su|em cada|op de|op|su ogni|na każde)\s+(\d{1,3})(?![\p{N}]|[.,]\d|\s*%)/giu;

/** The shares written as fractions, read as percentages within what their denominator says ("1 in 2": 44% to 56%). */
function readFractions(masked: string, text: string): { figures: Figure[]; rest: string } {
  const figures: Figure[] = [];
  const rest = new Blanked(masked);
  for (const match of masked.matchAll(FRACTION)) {
    const [numerator, denominator] = [Number(match[1]), Number(match[2])];
    if (denominator < 2 || denominator > 100 || numerator > denominator) continue;
    const end = match.index + match[0].length;
    if (SPAN_AFTER.test(masked.slice(end, end + 30))) continue;
    figures.push(
      finishFigure(masked, {
        text: text.slice(match.index, end),
        index: match.index,
        end,
        mantissa: (100 * numerator) / denominator,
        scale: 1,
        decimals: 0,
        percent: true,
        basisPoints: false,
        fraction: { numerator, denominator },
        tolerance: Math.min(50 / denominator, 6),
        sign: 'none',
        comparative: false,
        words: false,
        bare: false,
      }),
    );
    rest.blank(match.index, end);
  }
  return { figures, rest: rest.text };
}

function readFigures(input: string, text: string, style: NumberStyle, uncertain = false, numberWords = true): Figure[] {
  const { figures, rest: masked } = readFractions(input, text);
  for (const match of masked.matchAll(numberRegex(style))) {
    const [whole, signBefore, currencyBefore, signAfter, token, groupSeparator, written, scaleWord, currencyAfter] = match;
    const digits = readDigits(token, groupSeparator, style);
    if (!digits) continue;
    let unit: string | undefined = written;
    let index = match.index;
    let shown = whole;
    const before = masked.slice(Math.max(0, index - 40), index);
    let currency: string | undefined;
    if (currencyBefore) {
      currency = CURRENCY_SYMBOLS[currencyBefore] ?? (ISO_CURRENCIES.has(currencyBefore) ? currencyBefore : undefined);
      // Three capitals that are no currency (a code, an acronym) are not part of the figure.
      if (!currency) {
        const cut = whole.indexOf(currencyBefore) + currencyBefore.length;
        index += cut;
        shown = whole.slice(cut);
        if (signBefore) continue;
      }
    }
    if (currencyAfter) {
      const code =
        CURRENCY_SYMBOLS[currencyAfter] ??
        CURRENCY_WORDS[currencyAfter.toLowerCase()] ??
        (ISO_CURRENCIES.has(currencyAfter) ? currencyAfter : undefined);
      if (code) currency ??= code;
      else shown = shown.slice(0, shown.length - currencyAfter.length).trimEnd();
    }
    // A dash right after a word or digit is a hyphen or a range ("10-20"), not a minus sign.
    const dash = signBefore ?? signAfter;
    // So is "- " opening a line: a Markdown bullet ("- 2023: 185"), not a negative figure.
    const separator =
      signBefore !== undefined &&
      (/[\w)%]$/.test(before) ||
        // "**Atlas Pharma GmbH** – 4,82 Mrd. $": a spaced dash after a name, bold or quoted, too.
        (/\s$/.test(signBefore) && /[\p{L}\p{N}_)%*"'»”’\]]\s*$/u.test(before)) ||
        (/\s$/.test(signBefore) && /(?:^|\n)[ \t]*$/.test(before)));
    if (separator && signBefore) {
      const cut = signBefore.length;
      index += cut;
      shown = shown.slice(cut);
    }
    const negative = dash !== undefined && !separator && /[-−–]/.test(dash);
    const positive = dash !== undefined && !separator && dash.trim() === '+';
    // "points" alone is a unit only in an answer about percentages ("25 points above 38%", "dropped 8.2 points" under a
    // table of rates); else the figure ends before it.
    if (unit && POINTS_WORD.test(unit) && !PERCENT_NEARBY.test(masked)) {
      unit = undefined;
      shown = shown.slice(0, shown.indexOf(token) + token.length);
    }
    const points = unit !== undefined && (POINTS_UNIT.test(unit) || POINTS_WORD.test(unit));
    const percent = unit !== undefined && (PERCENT_UNIT.test(unit) || points);
    const basisPoints = unit !== undefined && /^(?:bps?|basis points?)$/i.test(unit);
    const bare = !currency && !digits.decimals && !unit && !scaleWord && !digits.grouped;
    if (bare && isListMarker(masked, match.index)) continue;
    if (bare && ORDINAL_BEFORE.test(before)) continue;
    // "La semana 12 fue ...; en la 13 ...": a number after an article, where its line named a week or place by number.
    if (bare && token.length <= 2 && ELLIPTIC_ARTICLE.test(before) && LABELLED_NUMBER.test(lineAround(text, match.index)))
      continue;
    const end = index + shown.trimEnd().length;
    const after = masked.slice(end, end + 40);
    if (
      bare &&
      (SPAN_BEFORE.test(before) ||
        (SPAN_AFTER.test(after) &&
          /\b(?:the|last|past|next|in|within|over|for|of|die|den|der|les|des|los|las|gli|i|le|os|as|de|het|im|dans|en|nei|nos|in)\s*$/i.test(
            before,
          )))
    )
      continue;
    // Ordinal suffixes and numbers glued to words: 3rd, 2nd, 2º, 10x; German ordinals: "2. Platz".
    const next = text.slice(index + shown.length, index + shown.length + 40);
    // Only where a comma is the decimal separator is "4." an ordinal ("das 4. das schwächste"); in English "… to 37.
    // gold comes to 31" ends a sentence at a figure.
    if (ORDINAL_AFTER.test(next) || (bare && token.length <= 2 && style.decimal === ',' && ORDINAL_LOWER_AFTER.test(next)))
      continue;
    // The size of a group: "top 10%", "the 5 largest deals", "los 5 mejores".
    if ((bare || (percent && !points)) && (COHORT_BEFORE.test(before) || COHORT_AFTER.test(after))) continue;
    const value = digits.value;
    // A bare year after a word of time is a label (periods took most of them already).
    if (bare && token.length === 4 && value >= 1900 && value <= 2100 && /\b(?:fy|year|cy)\s*$/i.test(before)) continue;
    figures.push(
      finishFigure(masked, {
        text: text.slice(index, end),
        index,
        end,
        mantissa: negative ? -value : value,
        scale: scaleWord ? SCALE_WORDS[scaleWord] : 1,
        decimals: digits.decimals,
        percent,
        basisPoints,
        ...(points ? { points } : {}),
        ...(uncertain && digits.other && !scaleWord && !unit
          ? { alternative: { mantissa: negative ? -digits.other.value : digits.other.value, decimals: digits.other.decimals } }
          : {}),
        currency,
        sign: negative ? 'negative' : positive ? 'positive' : 'none',
        comparative: false,
        words: false,
        bare,
      }),
    );
  }
  const rest = new Blanked(masked);
  for (const figure of figures) rest.blank(figure.index, figure.end);
  if (numberWords) figures.push(...readWordFigures(rest.text, text));
  figures.sort((a, b) => a.index - b.index);
  markRanges(masked, figures);
  return figures;
}

/** The line of the text around an index. */
function lineAround(text: string, index: number): string {
  const start = text.lastIndexOf('\n', index) + 1;
  const end = text.indexOf('\n', index);
  return text.slice(start, end < 0 ? text.length : end);
}

/** Adds what the words around a figure say: hedging and the direction of a change. */
function finishFigure(masked: string, figure: Figure): Figure {
  const before = masked.slice(Math.max(0, figure.index - 60), figure.index);
  const after = masked.slice(figure.end, figure.end + 60);
  if (ABOUT.test(before)) figure.approximation = 'about';
  else if (OVER.test(before)) figure.approximation = 'over';
  else if (UNDER.test(before)) figure.approximation = 'under';
  if (figure.sign === 'none') {
    if (FALLING_BEFORE.test(before) || FALLING_AFTER.test(after) || FALLING_FAR.test(before)) {
      figure.sign = 'negative';
      figure.mantissa = -Math.abs(figure.mantissa);
    } else if (RISING_BEFORE.test(before) || RISING_AFTER.test(after) || RISING_FAR.test(before)) figure.sign = 'positive';
    else if (COMPARATIVE_AFTER.test(after)) figure.comparative = true;
  }
  return figure;
}

/** "between 10 and 12", "from 10 to 12", "10–12", "10 to 12": each end knows the other. */
function markRanges(masked: string, figures: Figure[]): void {
  for (let i = 0; i + 1 < figures.length; i++) {
    const [low, high] = [figures[i], figures[i + 1]];
    const gap = masked.slice(low.end, high.index);
    const before = masked.slice(Math.max(0, low.index - 12), low.index);
    const between =
      /^\s*(?:and|to|und|et|y|e|en|-|–|—)\s*$/i.test(gap) &&
      /(?:\bbetween|\brang(?:e|es|ed|ing)(?:\s+from)?|\bzwischen|\bentre|\btra|\bfra|\btussen)\s*$/i.test(before);
    // "from 451 to 480" is a change, not a range; what is written once after its second figure is said of both:
    // "da 135,9 a 139,4 milioni", "von 20,7 auf 44,2 Mio. $".
    const change =
      /^\s*(?:to|bis|auf|à|a|hasta|para|tot|naar)\s*$/i.test(gap) &&
      /(?:\bfrom|\bvon|\bde|\bdesde|\bda|\bdo|\bvan)\s*$/i.test(before);
    if (change && !low.words && !high.words) {
      low.change = 'from';
      high.change = 'to';
      // "n'a baissé que de 46 à 42": the ends of a change are levels; the falling verb is said of the change.
      for (const end of [low, high])
        if (end.sign === 'negative' && !/^[-−–]/.test(end.text.replace(/^[^\d\-−–]*/, ''))) {
          end.sign = 'none';
          end.mantissa = Math.abs(end.mantissa);
        }
      if (high.scale !== 1 && low.scale === 1 && !low.percent && !low.currency) low.scale = high.scale;
      if (high.percent && !low.percent && low.scale === 1) low.percent = true;
      low.currency ??= high.currency;
      if (low.currency || low.scale !== 1 || low.percent) low.bare = false;
    }
    const dashed = /^\s*(?:-|–|—|to)\s*$/.test(gap) && !low.words && !high.words && !/\bfrom\s*$/i.test(before);
    if (!between && !dashed) continue;
    // "grew 19.1% to $72.9M": a percentage and an amount are two figures, not the ends of one range.
    const unlike =
      (low.percent && !high.percent) ||
      (!!low.currency && high.percent) ||
      (!!low.currency && !!high.currency && low.currency !== high.currency);
    if (unlike) continue;
    // "10-12%": the unit, scale and currency written once apply to both ends.
    if (high.percent && !low.percent) low.percent = true;
    if (high.scale !== 1 && low.scale === 1) low.scale = high.scale;
    low.currency ??= high.currency;
    if (high.sign === 'negative' && low.sign === 'none' && /^\s*(?:-|–|—)\s*$/.test(gap)) high.sign = 'none';
    high.mantissa = Math.abs(high.mantissa) * (low.mantissa < 0 ? -1 : 1);
    low.range = { end: 'low', other: high.mantissa * high.scale };
    high.range = { end: 'high', other: low.mantissa * low.scale };
    low.approximation = undefined;
    high.approximation = undefined;
    i++;
  }
}

/** `1.` or `2)` opening a line (after any indentation or a heading's #): a numbered list's marker. */
function isListMarker(text: string, index: number): boolean {
  const lineStart = text.lastIndexOf('\n', index - 1) + 1;
  if (index - lineStart > 24) return false;
  if (!/^\s*(?:#+\s*|[-*+]\s+|>\s*)?(?:\*\*|__)?$/.test(text.slice(lineStart, index))) return false;
  return /^\d+[.)](?:\s|$|\*\*)/.test(text.slice(index));
}

// ---------------------------------------------------------------------------------------------
// Figures in words

const UNITS: Record<string, number> = {
  zero: 0,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  thirteen: 13,
  fourteen: 14,
  fifteen: 15,
  sixteen: 16,
  seventeen: 17,
  eighteen: 18,
  nineteen: 19,
  dozen: 12,
};
const TENS: Record<string, number> = {
  twenty: 20,
  thirty: 30,
  forty: 40,
  fifty: 50,
  sixty: 60,
  seventy: 70,
  eighty: 80,
  ninety: 90,
};
const MULTIPLIERS: Record<string, number> = { thousand: 1e3, million: 1e6, billion: 1e9, trillion: 1e12 };
const NUMBER_WORD = [...Object.keys(UNITS), ...Object.keys(TENS), 'hundred', ...Object.keys(MULTIPLIERS)].join('|');
const WORD_RUN = new RegExp(
  `(?<![\\p{L}\\p{N}])(?:a\\s+(?=(?:hundred|thousand|million|billion|dozen)\\b))?(?:${NUMBER_WORD})(?:(?:\\s*-\\s*|\\s+(?:and\\s+)?|\\s+)(?:${NUMBER_WORD}))*(?![\\p{L}\\p{N}])`,
  'giu',
);
/** Before a small number in words: it points at things named already ("the two stages", "both"), not a figure. */
const DETERMINER_BEFORE = /\b(?:the|these|those|all|other|another|any|each|every|which|whose|top|first|last|next|past)\s*$/i;

/** Figures written in words: "twelve", "three hundred and four", "a dozen", "two million". */
function readWordFigures(masked: string, text: string): Figure[] {
  const figures: Figure[] = [];
  for (const match of masked.matchAll(WORD_RUN)) {
    const words = match[0]
      .toLowerCase()
      .split(/[\s-]+/)
      .filter((w) => w && w !== 'and' && w !== 'a');
    const value = wordsValue(words);
    if (value === undefined) continue;
    // "million" alone ("millions of", "a million thanks") is no figure; "a million" is.
    if (words.every((w) => w === 'hundred' || w in MULTIPLIERS) && !/^a\s/i.test(match[0])) continue;
    const index = match.index;
    const before = masked.slice(Math.max(0, index - 20), index);
    const after = masked.slice(index + match[0].length, index + match[0].length + 30);
    // "one" alone is mostly a pronoun ("one of the deals"); small numbers after a determiner point back.
    if (words.length === 1 && (value === 1 || value === 0)) continue;
    if (words.length === 1 && value < 100 && DETERMINER_BEFORE.test(before)) continue;
    if (SPAN_AFTER.test(after) && words.length === 1) continue;
    // "two million" is read by the digit reader when written "2 million"; here the words alone.
    const scaleWord = words.at(-1)!;
    const scale = MULTIPLIERS[scaleWord] && words.length > 1 ? MULTIPLIERS[scaleWord] : 1;
    figures.push(
      finishFigure(masked, {
        text: text.slice(index, index + match[0].length),
        index,
        end: index + match[0].length,
        mantissa: value / scale,
        scale,
        decimals: 0,
        percent: /^\s*(?:%|per\s?cent|percentage points?)\b/i.test(after),
        basisPoints: /^\s*(?:basis points?|bps?)\b/i.test(after),
        sign: 'none',
        comparative: false,
        words: true,
        bare: true,
      }),
    );
  }
  return figures;
}

/** The value of number words in order, or undefined when they do not form one number. */
function wordsValue(words: string[]): number | undefined {
  let total = 0;
  let current = 0;
  let any = false;
  for (const word of words) {
    if (word in UNITS) {
      if (current % 100 !== 0 && current % 10 !== 0) return undefined;
      if (current % 100 >= 10 && UNITS[word] >= 10) return undefined;
      current += UNITS[word];
    } else if (word in TENS) {
      if (current % 100 !== 0) return undefined;
      current += TENS[word];
    } else if (word === 'hundred') {
      current = (current || 1) * 100;
    } else if (word in MULTIPLIERS) {
      total += (current || 1) * MULTIPLIERS[word];
      current = 0;
    } else return undefined;
    any = true;
  }
  return any ? total + current : undefined;
}
