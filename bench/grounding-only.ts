/**
 * `npm run bench:grounding`: the grounding check on its adversarial corpus (answers over results of the
 * sample data, half with one planted error each, half correct): how many planted errors it flags, how
 * many correct answers it flags, per kind of error. No server and no model: the same check a chat turn
 * runs. Replaces that section of BENCHMARKS.md.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { projectRoot } from '../src/common/project-root';
import { scoreCorpus, type CorpusResult } from '../test/fixtures/grounding/corpus-score';
import { groundingCorpus } from '../test/fixtures/grounding/grounding.corpus';
import { log, spliceSection } from './harness';

const START = '<!-- grounding:start -->';
const END = '<!-- grounding:end -->';
const DETECTION_GOAL = 0.95;
const FALSE_ALARM_GOAL = 0.03;

const pct = (part: number, whole: number) => `${part}/${whole} = ${((part / whole) * 100).toFixed(1)}%`;

function byKind(planted: readonly CorpusResult[]): string[] {
  const kinds = new Map<string, { caught: number; total: number }>();
  for (const r of planted) {
    const kind = r.c.planted!.kind;
    const entry = kinds.get(kind) ?? { caught: 0, total: 0 };
    entry.total++;
    if (r.caught) entry.caught++;
    kinds.set(kind, entry);
  }
  return [...kinds].sort(([a], [b]) => a.localeCompare(b)).map(([kind, e]) => `| ${kind} | ${pct(e.caught, e.total)} |`);
}

async function main(): Promise<void> {
  const started = performance.now();
  const score = scoreCorpus(groundingCorpus());
  const ms = performance.now() - started;
  const { planted, correct, missed, falseAlarms, detection, falseAlarmRate } = score;
  const date = new Date().toISOString();
  const section = [
    START,
    '',
    '## Grounding on its adversarial corpus',
    '',
    `- Run: \`npm run bench:grounding\`, ${date}; ${cpus().length} cores; ${score.results.length} answers grounded in ${ms.toFixed(0)} ms`,
    '- The corpus (`src/seed/grounding.corpus.ts`, also asserted by `grounding-corpus.spec.ts` in `npm test`): answers as ' +
      'a model writes them over tool results computed from the sample data, half with exactly one planted error, half ' +
      'correct in every format the check reads (signs, units, currencies, scales, words, locales, hedges, ranges, tables).',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    `| planted errors flagged | >= ${DETECTION_GOAL * 100}% | ${pct(planted.length - missed.length, planted.length)} | ${detection >= DETECTION_GOAL ? 'met' : '**NOT met**'} |`,
    `| correct answers flagged | <= ${FALSE_ALARM_GOAL * 100}% | ${pct(falseAlarms.length, correct.length)} | ${falseAlarmRate <= FALSE_ALARM_GOAL ? 'met' : '**NOT met**'} |`,
    '',
    '| planted error | flagged |',
    '|---|---|',
    ...byKind(planted),
    '',
    ...(missed.length
      ? ['Missed:', '', ...missed.map((r) => `- \`${r.c.id}\` (${r.c.planted!.kind}): "${r.c.planted!.figure}"`), '']
      : []),
    END,
  ].join('\n');
  const file = join(projectRoot(), 'BENCHMARKS.md');
  await writeFile(file, spliceSection(await readFile(file, 'utf8'), section, { start: START, end: END }));
  log(
    `wrote the grounding section: planted ${pct(planted.length - missed.length, planted.length)}, correct ${pct(falseAlarms.length, correct.length)}`,
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
