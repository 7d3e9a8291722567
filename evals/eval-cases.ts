import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { projectRoot } from '../src/common/project-root';
import { extractNumbers, type Grounding } from '../src/runtime/grounding';

export const CASE_EXPECTATIONS = ['figure', 'refusal', 'clarification'] as const;
export type CaseExpectation = (typeof CASE_EXPECTATIONS)[number];

/** One question over the sample data and what a good answer to it holds. */
export interface EvalCase {
  id: string;
  /** lookup, filter, count, sum, group_by, top_n, time_grain, cross_object, metric_synonym, clarification, refusal. */
  kind: string;
  question: string;
  expects: CaseExpectation;
  /** figure cases: run against the server's database at eval time; its result holds the expected figures. */
  sql?: string;
  /** Columns of the SQL result that are figures (default: every numeric column). */
  figures?: string[];
  /** Columns of the SQL result whose values the answer must name (an account, an owner, ...). */
  terms?: string[];
  /** Relative difference allowed between an answer's figure and the expected one (default 0.01). */
  tolerance?: number;
  /** Most tool calls a passing answer may make (default 6). */
  maxToolCalls?: number;
}

export const DEFAULT_TOLERANCE = 0.01;
export const DEFAULT_TOOL_BUDGET = 6;

/** What the SQL of a case says a good answer holds. */
export interface Expected {
  figures: number[];
  terms: string[];
}

/** What the runner saw of one answer. */
export interface Observed {
  answer: string;
  grounding: Grounding | null;
  toolCalls: number;
  /** The chat ended in error, or did not end in time. */
  failure?: string;
}

export interface Grade {
  passed: boolean;
  /** Why it failed, one reason per unmet check. */
  reasons: string[];
  missingFigures: number[];
  missingTerms: string[];
}

export async function loadCases(path = join(projectRoot(), 'evals', 'cases.json')): Promise<EvalCase[]> {
  const file = JSON.parse(await readFile(path, 'utf8')) as { cases: EvalCase[] };
  const ids = new Set<string>();
  for (const c of file.cases) {
    if (!c.id || ids.has(c.id)) throw new Error(`${path}: case ids must be present and unique ("${c.id}")`);
    ids.add(c.id);
    if (!CASE_EXPECTATIONS.includes(c.expects)) throw new Error(`${path}: case ${c.id} expects "${String(c.expects)}"`);
    if (c.expects === 'figure' && !c.sql) throw new Error(`${path}: figure case ${c.id} has no sql`);
  }
  return file.cases;
}

/** The expected figures and terms of a case from its SQL result rows (numbers come back from pg as numbers or decimal strings). */
export function expectedFrom(evalCase: EvalCase, rows: ReadonlyArray<Record<string, unknown>>): Expected {
  const figures: number[] = [];
  const terms: string[] = [];
  for (const row of rows) {
    for (const [column, value] of Object.entries(row)) {
      if (evalCase.terms?.includes(column)) {
        if (typeof value === 'string' || typeof value === 'number') terms.push(String(value));
        continue;
      }
      if (evalCase.figures && !evalCase.figures.includes(column)) continue;
      const number =
        typeof value === 'number' ? value : typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
      if (Number.isFinite(number)) figures.push(number);
    }
  }
  return { figures, terms };
}

const REFUSAL =
  /\b(can(?:'|no)t|cannot|unable|not able|no (?:data|information|field|record)|(?:does|do|did)(?: not|n't) (?:have|contain|include|track|record|store)|(?:is|are)(?: not|n't) (?:available|tracked|recorded|stored|part of)|not (?:available|tracked|recorded|stored) in|isn't in|aren't in|outside (?:of )?the data)\b/i;
const CLARIFYING = /\?/;

/**
 * A figure case passes when every expected figure is in the answer (within tolerance, or at the
 * precision shown), every term is named, no number is unsupported and the tool calls stay within
 * budget; a refusal case when the answer says the data cannot answer; a clarification case when it
 * asks back. Neither of the last two may state an unsupported number.
 */
export function grade(evalCase: EvalCase, expected: Expected | null, observed: Observed): Grade {
  const reasons: string[] = [];
  const missingFigures: number[] = [];
  const missingTerms: string[] = [];
  if (observed.failure) reasons.push(observed.failure);
  const budget = evalCase.maxToolCalls ?? DEFAULT_TOOL_BUDGET;
  if (observed.toolCalls > budget) reasons.push(`${observed.toolCalls} tool calls, budget ${budget}`);
  const unsupported = observed.grounding?.unsupported ?? [];
  if (unsupported.length) reasons.push(`unsupported numbers: ${unsupported.map((n) => n.text).join(', ')}`);
  if (evalCase.expects === 'figure') {
    const claims = extractNumbers(observed.answer);
    const tolerance = evalCase.tolerance ?? DEFAULT_TOLERANCE;
    for (const figure of expected?.figures ?? []) {
      const found = claims.some((claim) => {
        const value = claim.mantissa * claim.scale;
        const candidates = claim.percent ? [figure, figure * 100] : [figure];
        return candidates.some((c) => Math.abs(value - c) <= tolerance * Math.abs(c) + 1e-9);
      });
      if (!found) missingFigures.push(figure);
    }
    const text = normalised(observed.answer);
    for (const term of expected?.terms ?? []) if (!text.includes(normalised(term))) missingTerms.push(term);
    if (!expected || (!expected.figures.length && !expected.terms.length)) reasons.push('the case SQL gave nothing to check');
    if (missingFigures.length) reasons.push(`missing figures: ${missingFigures.join(', ')}`);
    if (missingTerms.length) reasons.push(`missing terms: ${missingTerms.join(', ')}`);
  } else if (evalCase.expects === 'refusal') {
    if (!REFUSAL.test(observed.answer)) reasons.push('does not say the data cannot answer');
  } else if (!CLARIFYING.test(observed.answer)) {
    reasons.push('asks no clarifying question');
  }
  return { passed: reasons.length === 0, reasons, missingFigures, missingTerms };
}

/** Lower case, select values' underscores as spaces, one space between words. */
function normalised(text: string): string {
  return text.toLowerCase().replaceAll('_', ' ').replace(/\s+/g, ' ');
}
