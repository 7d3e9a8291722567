/**
 * `npm run bench:grounding`: the grounding check on its corpora of answers over results of the sample data
 * (half with one planted error each, half correct): the in-repo adversarial corpus, the JSON tuning half the
 * checker is tuned on, and the JSON held-out half written blind. For each, how many planted errors it catches
 * and how many correct answers it flags, per kind of error and per language. No server and no model: the
 * same check a chat turn runs. Replaces that section of BENCHMARKS.md.
 *
 * The held-out half is reported in aggregate only (rates per kind and language, no case ids or figures), so
 * that whoever tunes the checker from this report does not read it.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { projectRoot } from '../src/common/project-root';
import {
  breakdown,
  languageOf,
  scoreCorpus,
  type Breakdown,
  type CorpusCase,
  type CorpusScore,
} from '../test/fixtures/grounding/corpus-score';
import { groundingCorpus } from '../test/fixtures/grounding/grounding.corpus';
import { HELD_OUT_DIR, loadJsonCases, TUNING_DIR } from '../test/fixtures/grounding/json-cases';
import { loadReferenceCases, scoreReferenceCases } from '../test/fixtures/grounding/reference-cases';
import { log, spliceSection } from './harness';

const START = '<!-- grounding:start -->';
const END = '<!-- grounding:end -->';
const DETECTION_GOAL = 0.95;
const FALSE_ALARM_GOAL = 0.03;

const pct = (part: number, whole: number) => (whole ? `${part}/${whole} = ${((part / whole) * 100).toFixed(1)}%` : '–');
const met = (ok: boolean) => (ok ? 'met' : '**NOT met**');

interface Corpus {
  title: string;
  /** Where its cases come from, for the report. */
  origin: string;
  cases?: CorpusCase[];
  /** Why it was not scored ("not present"). */
  absent?: string;
  notes: string[];
  /** List the missed and falsely flagged cases by id (not for the held-out half). */
  listCases: boolean;
  /** Where the goals differ from the typed figures' (answers with references: every error, no false alarm). */
  goals?: { detection: number; falseAlarm: number };
}

function jsonCorpus(title: string, dir: string, listCases: boolean): Corpus {
  const origin = `\`${relative(projectRoot(), dir)}/*.json\``;
  const loaded = loadJsonCases(dir);
  if (!loaded.present) return { title, origin, absent: 'not present', notes: [], listCases };
  const notes = [
    `files: ${loaded.files.map((f) => `${f.file} (${f.cases})`).join(', ') || 'none'}`,
    ...(loaded.skipped.length ? [`not scored here (figure references): ${loaded.skipped.join(', ')}`] : []),
    ...(loaded.problems.length
      ? [
          `${loaded.problems.length} case(s) or file(s) left out for their shape${listCases ? `: ${loaded.problems.join('; ')}` : ''}`,
        ]
      : []),
  ];
  return { title, origin, cases: loaded.cases, notes, listCases };
}

function rowsBy(rows: readonly Breakdown[], label: string, withFalseAlarms: boolean): string[] {
  if (!rows.length) return [];
  return withFalseAlarms
    ? [
        `| ${label} | planted caught | for the right reason | correct flagged |`,
        '|---|---|---|---|',
        ...rows.map(
          (b) =>
            `| ${b.key} | ${pct(b.caught, b.planted)} | ${pct(b.rightReason, b.planted)} | ${pct(b.falseAlarms, b.correct)} |`,
        ),
      ]
    : [
        `| ${label} | caught | for the right reason |`,
        '|---|---|---|',
        ...rows
          .filter((b) => b.planted)
          .map((b) => `| ${b.key} | ${pct(b.caught, b.planted)} | ${pct(b.rightReason, b.planted)} |`),
      ];
}

function report(corpus: Corpus, score: CorpusScore | undefined): { lines: string[]; summary: string } {
  const head = [`### ${corpus.title}`, '', `- Cases: ${corpus.origin}`, ...corpus.notes.map((n) => `- ${n}`), ''];
  if (!score) return { lines: [...head, `Not scored: ${corpus.absent}.`, ''], summary: `${corpus.title}: ${corpus.absent}` };
  const { planted, correct, missed, falseAlarms, detection, falseAlarmRate } = score;
  const goals = corpus.goals ?? { detection: DETECTION_GOAL, falseAlarm: FALSE_ALARM_GOAL };
  const caught = planted.length - missed.length;
  const right = planted.filter((r) => r.rightReason).length;
  const lines = [
    ...head,
    `${score.results.length} answers: ${planted.length} with a planted error, ${correct.length} correct.`,
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    `| planted errors caught | >= ${goals.detection * 100}% | ${pct(caught, planted.length)} | ${met(detection >= goals.detection)} |`,
    `| correct answers flagged | <= ${goals.falseAlarm * 100}% | ${pct(falseAlarms.length, correct.length)} | ${met(falseAlarmRate <= goals.falseAlarm)} |`,
    `| caught for the right reason (the planted figure flagged) | | ${pct(right, planted.length)} | |`,
    '',
    ...rowsBy(
      breakdown(score, (c) => c.planted?.kind),
      'planted error',
      false,
    ),
    '',
    ...rowsBy(breakdown(score, languageOf), 'language', true),
    '',
  ];
  if (corpus.listCases) {
    if (missed.length)
      lines.push('Missed:', '', ...missed.map((r) => `- \`${r.c.id}\` (${r.c.planted!.kind}): "${r.c.planted!.figure}"`), '');
    if (falseAlarms.length)
      lines.push(
        'Correct answers flagged:',
        '',
        ...falseAlarms.map(
          (r) => `- \`${r.c.id}\`: ${r.grounding.unsupported.map((u) => `"${u.text}" (${u.reason})`).join(', ')}`,
        ),
        '',
      );
  }
  return {
    lines,
    summary: `${corpus.title}: caught ${pct(caught, planted.length)}, false alarms ${pct(falseAlarms.length, correct.length)}`,
  };
}

/** Answers written with figure references (`refs*.json` of a folder), run as a chat turn runs them. */
async function referenceCorpus(title: string, dir: string): Promise<{ corpus: Corpus; score?: CorpusScore }> {
  const cases = loadReferenceCases(dir);
  const corpus: Corpus = {
    title,
    origin: `\`${relative(projectRoot(), dir)}/refs*.json\``,
    notes: [
      'each answer is run as a chat turn runs it: its data results numbered and given refs in the order of its ' +
        'sources, its references filled in for the column and locale, then grounded (references as cells, typed ' +
        'figures as text)',
    ],
    listCases: false,
    goals: { detection: 1, falseAlarm: 0 },
    ...(cases ? {} : { absent: 'not present' }),
  };
  return { corpus, ...(cases ? { score: await scoreReferenceCases(cases) } : {}) };
}

async function main(): Promise<void> {
  const corpora: Corpus[] = [
    {
      title: 'In-repo adversarial corpus',
      origin: '`test/fixtures/grounding/grounding.corpus.ts` (also asserted by `grounding-corpus.spec.ts` in `npm test`)',
      cases: groundingCorpus(),
      notes: [
        'answers as a model writes them over tool results computed from the sample data, correct in every format the ' +
          'check reads (signs, units, currencies, scales, words, locales, hedges, ranges, tables)',
      ],
      listCases: true,
    },
    jsonCorpus('Tuning half (JSON)', TUNING_DIR, true),
    jsonCorpus('Held-out half (JSON, written blind)', HELD_OUT_DIR, false),
  ];
  const started = performance.now();
  const scores = corpora.map((c) => (c.cases ? scoreCorpus(c.cases) : undefined));
  const ms = performance.now() - started;
  const answers = scores.reduce((n, s) => n + (s?.results.length ?? 0), 0);
  const withReferences = [
    await referenceCorpus('Tuning answers written with figure references', TUNING_DIR),
    await referenceCorpus('Held-out answers written with figure references', HELD_OUT_DIR),
  ];
  const reports = [
    ...corpora.map((c, i) => report(c, scores[i])),
    ...withReferences.map(({ corpus, score }) => report(corpus, score)),
  ];
  const section = [
    START,
    '',
    '## Grounding on its corpora',
    '',
    `- Run: \`npm run bench:grounding\`, ${new Date().toISOString()}; ${cpus().length} cores; ${answers} answers grounded in ${ms.toFixed(0)} ms`,
    '- Each corpus: answers over results of the sample data, about half with exactly one planted error. A planted ' +
      'answer is caught when grounding reports anything unsupported (for the right reason when an unsupported ' +
      "figure's text overlaps the planted one); a correct answer is flagged when it reports anything. The held-out " +
      'half is reported in aggregate only.',
    '',
    ...reports.flatMap((r) => r.lines),
    END,
  ].join('\n');
  const file = join(projectRoot(), 'BENCHMARKS.md');
  await writeFile(file, spliceSection(await readFile(file, 'utf8'), section, { start: START, end: END }));
  for (const r of reports) log(r.summary);
  log('wrote the grounding section of BENCHMARKS.md');
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
