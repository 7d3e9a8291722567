import type { CaseReport, EvalReport, EvalSummary } from './eval-runner';

const percent = (value: number) => `${(value * 100).toFixed(1)}%`;
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The cost cell: n/a without a price; marked as a floor when some model steps reported no usage. */
function costOf(s: EvalSummary): string {
  if (s.cost === null) return 'n/a';
  return `${s.stepsWithoutUsage ? '≥ ' : ''}$${s.cost.toFixed(4)}`;
}

/** The report as a Markdown page: the summary, accuracy per kind, one row per case, then each case's answers. */
export function renderMarkdown(report: EvalReport): string {
  const s = report.summary;
  const [lo, hi] = s.accuracyInterval;
  const lines = [
    `# Eval: ${s.model} (agent ${s.agent}, today ${s.today})`,
    '',
    '| accuracy | 95% interval | pass^k | k | cases | tool calls / run | tokens / run | latency p50 | latency p95 | cost |',
    '|---|---|---|---|---|---|---|---|---|---|',
    `| ${percent(s.accuracy)} | ${percent(lo)} – ${percent(hi)} | ${percent(s.passK)} | ${s.repeat} | ${s.cases} | ${s.toolCalls} | ${s.tokens} | ${s.latencyP50} ms | ${s.latencyP95} ms | ${costOf(s)} |`,
    ...(s.stepsWithoutUsage ? ['', `${s.stepsWithoutUsage} model steps reported no usage: tokens and cost leave them out.`] : []),
    '',
    '| kind | accuracy |',
    '|---|---|',
    ...Object.entries(s.byKind).map(([kind, accuracy]) => `| ${kind} | ${percent(accuracy)} |`),
    '',
    '| case | expects | passed | runs passed | tool calls | figures referenced / typed | unsupported numbers | why it failed |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const c of report.cases) {
    const failed = c.runs.find((r) => !r.passed);
    const unsupported = [...new Set(c.runs.flatMap((r) => (r.grounding?.unsupported ?? []).map((n) => n.text)))];
    lines.push(
      `| ${c.id} | ${c.expects} | ${c.passed ? 'yes' : 'no'} | ${c.passes}/${c.runs.length} | ${c.runs.map((r) => r.toolCalls).join(', ')} | ${c.runs.map((r) => `${r.figures.referenced} / ${r.figures.typed}`).join(', ')} | ${cell(unsupported.join(', '))} | ${cell(failed ? failed.reasons.join('; ') : '')} |`,
    );
  }
  lines.push('', '## Answers', '');
  for (const c of report.cases) lines.push(...answersOf(c), '');
  return lines.join('\n') + '\n';
}

/** One case's questions, expected figures and answers, collapsed. */
function answersOf(c: CaseReport): string[] {
  const quote = (text: string) => (text.trim() ? text : '(no answer)').split('\n').map((line) => `> ${escapeHtml(line)}`);
  const lines = [
    '<details>',
    `<summary>${c.passed ? '✅' : '❌'} ${escapeHtml(c.id)} (${c.expects}${c.member ? ', member key' : ''})</summary>`,
    '',
    ...[c.question, ...(c.followUps ?? [])].map((q, i) => `${i ? 'Then' : 'Asked'}: ${q}`),
  ];
  if (c.expected) {
    const rows = c.expected.rows.map((row) => [...row.labels.map((forms) => forms[0]), ...row.figures.map(String)].join(' · '));
    lines.push('', `Expected: ${rows.join('; ')}`);
  }
  for (const run of c.runs) {
    lines.push(
      '',
      `Run ${run.attempt}: ${run.passed ? 'passed' : `failed (${run.reasons.join('; ')})`}, ${run.toolCalls} tool calls`,
      '',
    );
    lines.push(...quote(run.answer));
  }
  lines.push('', '</details>');
  return lines;
}

function escapeHtml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

export interface BaselineDiff {
  lines: string[];
  /** Cases that passed in the baseline and fail now. */
  regressions: string[];
  /** Cases that failed in the baseline and pass now. */
  fixes: string[];
}

/** What changed against a baseline report: the summary's numbers and the cases that flipped. */
export function compareWithBaseline(report: EvalReport, baseline: EvalReport): BaselineDiff {
  const metric = (name: keyof EvalSummary, format: (v: number) => string) => {
    const now = report.summary[name];
    const before = baseline.summary[name];
    if (typeof now !== 'number' || typeof before !== 'number') return `${name}: not comparable`;
    const sign = now - before >= 0 ? '+' : '-';
    return `${name}: ${format(now)} (baseline ${format(before)}, ${sign}${format(Math.abs(now - before))})`;
  };
  const before = new Map(baseline.cases.map((c) => [c.id, c.passed]));
  const regressions = report.cases.filter((c) => before.get(c.id) === true && !c.passed).map((c) => c.id);
  const fixes = report.cases.filter((c) => before.get(c.id) === false && c.passed).map((c) => c.id);
  const lines = [
    `compared with the baseline (${baseline.summary.model}, ${baseline.summary.startedAt}):`,
    `  ${metric('accuracy', percent)}`,
    `  ${metric('passK', percent)}`,
    `  ${metric('toolCalls', (v) => v.toFixed(2))}`,
    `  ${metric('tokens', (v) => v.toFixed(0))}`,
    `  ${metric('latencyP50', (v) => `${v.toFixed(0)} ms`)}`,
    `  ${metric('latencyP95', (v) => `${v.toFixed(0)} ms`)}`,
    `  now failing: ${regressions.length ? regressions.join(', ') : 'none'}`,
    `  now passing: ${fixes.length ? fixes.join(', ') : 'none'}`,
  ];
  return { lines, regressions, fixes };
}
