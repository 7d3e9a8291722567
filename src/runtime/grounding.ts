/**
 * Grounding: every number an answer states is looked up among the values this turn's tool calls
 * returned. A number found there (at the precision shown, or as a percentage of a ratio) is
 * supported by that call; any other number was not read from the data, so the model made it up or
 * computed it itself (sums and differences belong in the tools) and is reported as unsupported.
 */

/** What an agent does with the check: report it (default), ask the model once to fix unsupported numbers, or skip it. */
export const GROUNDING_MODES = ['annotate', 'retry', 'off'] as const;
export type GroundingMode = (typeof GROUNDING_MODES)[number];

export function isGroundingMode(value: unknown): value is GroundingMode {
  return GROUNDING_MODES.includes(value as GroundingMode);
}

export interface Grounding {
  /** How many numbers of the answer are claims (dates, ordinals and the question's own numbers are not). */
  numbers: number;
  supported: Array<{ text: string; toolCallId: string }>;
  unsupported: Array<{ text: string }>;
}

/** A tool call's result: the parsed JSON (or raw text) the model read. */
export interface GroundingSource {
  toolCallId: string;
  content: unknown;
}

/** A number as the text states it. */
export interface NumberClaim {
  /** As written, e.g. `$1.2M`, `-4.5%`, `1,234.57`. */
  text: string;
  /** The number before its scale, e.g. 1.2 for `$1.2M`. */
  mantissa: number;
  /** 1, 1e3, 1e6 or 1e9 (k, M, bn). */
  scale: number;
  /** Digits after the decimal point, as shown. */
  decimals: number;
  percent: boolean;
  /** Where it starts in the text. */
  index: number;
}

const MONTHS =
  'jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?';

/**
 * Stretches of text that hold digits but state no figure: dates, times, ids. They are blanked
 * (same length, so indexes stay) before numbers are read.
 */
const NOT_FIGURES: RegExp[] = [
  // UUIDs and long hex ids.
  /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi,
  // ISO dates and timestamps, year-months, year-quarters and year-weeks: 2024-03-01, 2024-03-01T10:00:00Z, 2024-03, 2024-Q1.
  /\b\d{4}-\d{2}(?:-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?)?\b/g,
  /\b\d{4}-(?:Q[1-4]|W\d{1,2})\b/gi,
  // Slashed or dotted dates: 03/01/2024, 1.3.2024.
  /\b\d{1,4}[/.]\d{1,2}[/.]\d{2,4}\b/g,
  // Times of day: 10:30, 10:30:15.
  /\b\d{1,2}:\d{2}(?::\d{2})?\b/g,
  // Month with day and/or year: March 5, March 5th, 2024, March 2024, Mar. 2024.
  new RegExp(`\\b(?:${MONTHS})\\.?\\s+\\d{1,2}(?:st|nd|rd|th)?(?:,?\\s+\\d{4})?\\b(?!\\s*[%$€£])`, 'gi'),
  // Day before month: 5 March, 5th of March 2024.
  new RegExp(`\\b\\d{1,2}(?:st|nd|rd|th)?\\s+(?:of\\s+)?(?:${MONTHS})\\b\\.?(?:,?\\s+\\d{4})?`, 'gi'),
  new RegExp(`\\b(?:${MONTHS})\\.?,?\\s+\\d{4}\\b`, 'gi'),
  // Quarters and halves with a year: Q1 2024, H2 2023, FY2024, FY 2024.
  /\b(?:Q[1-4]|H[12]|FY)\s*'?\d{2,4}\b/gi,
];

/** A year in date context: 1900-2100, bare, after one of these words. */
const YEAR_CONTEXT = /\b(?:in|of|since|during|from|to|until|till|through|before|after|year|early|late|mid|end|start|fy)\s*$/i;
/** A list position or a rank, not a figure: "top 5", "first 3", "#1", "rank 2", "No. 1". */
const ORDINAL_CONTEXT = /(?:\b(?:top|bottom|first|last|rank(?:ed)?|no\.)\s*-?\s*|#\s*)$/i;

/**
 * A number: optional sign, optional currency symbol (either side of the sign), digits with optional
 * thousands separators, optional decimals, then optional `%` or a k / M / bn scale (word forms too).
 */
const NUMBER =
  /(?<![\w.,])([-−]\s?)?(?:([$€£])\s?)?([-−]\s?)?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:\s?(%|percent\b|k\b|K\b|M\b|m\b|mn\b|MM\b|bn\b|B\b|thousand\b|million\b|billion\b))?(?![\w]|\.\d|,\d{3})/g;

const SCALES: Record<string, number> = {
  k: 1e3,
  K: 1e3,
  thousand: 1e3,
  M: 1e6,
  m: 1e6,
  mn: 1e6,
  MM: 1e6,
  million: 1e6,
  bn: 1e9,
  B: 1e9,
  billion: 1e9,
};

/** Every number the text states as a figure, in order (dates, times, ids, ordinals and list markers left out). */
export function extractNumbers(text: string): NumberClaim[] {
  let masked = text;
  for (const pattern of NOT_FIGURES) masked = masked.replace(pattern, (match) => ' '.repeat(match.length));
  const claims: NumberClaim[] = [];
  for (const match of masked.matchAll(NUMBER)) {
    const [whole, signBefore, currency, signAfter, integer, fraction, suffix] = match;
    const index = match.index;
    const before = masked.slice(Math.max(0, index - 24), index);
    // A leading dash right after a word or digit is a hyphen or a range ("10-20"), not a minus sign.
    const dash = signBefore ?? signAfter;
    const separator = signBefore !== undefined && (/[\w)]$/.test(before) || (/\s$/.test(signBefore) && /[\w)]\s*$/.test(before)));
    const negative = dash !== undefined && !separator;
    const bare = !currency && !fraction && !suffix && !integer.includes(',');
    if (bare && isListMarker(masked, index)) continue;
    if (bare && ORDINAL_CONTEXT.test(before)) continue;
    const value = Number(integer.replaceAll(',', ''));
    if (bare && value >= 1900 && value <= 2100 && integer.length === 4 && YEAR_CONTEXT.test(before)) continue;
    const mantissa = Number(`${integer.replaceAll(',', '')}${fraction ? `.${fraction}` : ''}`);
    const percent = suffix === '%' || suffix === 'percent';
    const start = signBefore && separator ? index + signBefore.length : index;
    claims.push({
      text: text.slice(start, index + whole.length).trim(),
      mantissa: negative ? -mantissa : mantissa,
      scale: suffix && !percent ? SCALES[suffix] : 1,
      decimals: fraction?.length ?? 0,
      percent,
      index: start,
    });
  }
  return claims;
}

/** `1.` or `2)` opening a line: a numbered list's marker. */
function isListMarker(text: string, index: number): boolean {
  const lineStart = text.lastIndexOf('\n', index - 1) + 1;
  if (text.slice(lineStart, index).trim() !== '') return false;
  return /^\d+[.)](?:\s|$)/.test(text.slice(index));
}

/**
 * Which numbers of `answer` the tool results support. Numbers that also appear in `question` (the
 * user's own) are not claims.
 */
export function groundAnswer(answer: string, sources: readonly GroundingSource[], question = ''): Grounding {
  const asked = extractNumbers(question);
  const claims = extractNumbers(answer).filter((claim) => !asked.some((q) => sameNumber(q, claim)));
  const values = sources.map((source) => ({ toolCallId: source.toolCallId, values: numericValues(source.content) }));
  const grounding: Grounding = { numbers: claims.length, supported: [], unsupported: [] };
  for (const claim of claims) {
    const source = values.find((s) => s.values.some((value) => supports(value, claim)));
    if (source) grounding.supported.push({ text: claim.text, toolCallId: source.toolCallId });
    else grounding.unsupported.push({ text: claim.text });
  }
  return grounding;
}

function sameNumber(a: NumberClaim, b: NumberClaim): boolean {
  const x = a.mantissa * a.scale;
  const y = b.mantissa * b.scale;
  return a.percent === b.percent && Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(x));
}

/**
 * Whether a result value, rounded to what the claim shows, is the claim: `1234.5678` supports
 * `1,234.57`, `1,235` and `1.2k`; a percentage also matches the value ×100
 * (a ratio of 0.25 is `25%`). A positive claim may state a negative value's size ("a loss of 500").
 */
export function supports(value: number, claim: NumberClaim): boolean {
  const candidates = claim.percent ? [value, value * 100] : [value];
  const tolerance = 0.5 * 10 ** -claim.decimals;
  return candidates.some((candidate) => {
    const shown = candidate / claim.scale;
    const fits = (x: number) => Math.abs(x - claim.mantissa) <= tolerance + 1e-9 * Math.max(1, Math.abs(x));
    return fits(shown) || (claim.mantissa > 0 && fits(-shown));
  });
}

/** Most values read from one result: results are capped by the tools, this only bounds the work. */
const MAX_VALUES = 100_000;

/**
 * Every number in a result: JSON numbers, numeric strings (sums beyond 2^53 come back as decimal
 * strings) and the figures inside other strings (a phone number, an address), read like the answer.
 */
export function numericValues(content: unknown): number[] {
  const values: number[] = [];
  const visit = (node: unknown): void => {
    if (values.length >= MAX_VALUES) return;
    if (typeof node === 'number') {
      if (Number.isFinite(node)) values.push(node);
    } else if (typeof node === 'string') {
      const trimmed = node.trim();
      if (/^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$/i.test(trimmed)) values.push(Number(trimmed));
      else if (/\d/.test(trimmed)) for (const claim of extractNumbers(trimmed)) values.push(claim.mantissa * claim.scale);
    } else if (Array.isArray(node)) {
      for (const item of node) visit(item);
    } else if (node && typeof node === 'object') {
      for (const item of Object.values(node)) visit(item);
    }
  };
  visit(content);
  return values;
}

/** The message that asks the model, once, to fix what it could not support. */
export function correctionRequest(grounding: Grounding): string {
  const numbers = grounding.unsupported.map((n) => `"${n.text}"`).join(', ');
  return (
    `These numbers in your answer appear in none of the tool results of this turn: ${numbers}. ` +
    'Rewrite your answer: state only figures exactly as the tools returned them (you may round them), ' +
    'and correct or remove each of these numbers. Do not compute new figures yourself; if the data does not give one, say so.'
  );
}
