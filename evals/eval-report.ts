import type { EvalReport, EvalSummary } from './eval-runner';

const percent = (value: number) => `${(value * 100).toFixed(1)}%`;
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The report as a Markdown page: the summary, accuracy per kind, then one row per case. */
export function renderMarkdown(report: EvalReport): string {
  const s = report.summary;
  const lines = [
    `# Eval: ${s.model} (agent ${s.agent})`,
    '',
    '| accuracy | pass^k | k | cases | tool calls / run | tokens / run | latency p50 | latency p95 | cost |',
    '|---|---|---|---|---|---|---|---|---|',
    `| ${percent(s.accuracy)} | ${percent(s.passK)} | ${s.repeat} | ${s.cases} | ${s.toolCalls} | ${s.tokens} | ${s.latencyP50} ms | ${s.latencyP95} ms | ${s.cost === null ? 'n/a' : `$${s.cost.toFixed(4)}`} |`,
    '',
    '| kind | accuracy |',
    '|---|---|',
    ...Object.entries(s.byKind).map(([kind, accuracy]) => `| ${kind} | ${percent(accuracy)} |`),
    '',
    '| case | expects | passed | runs passed | tool calls | unsupported numbers | why it failed |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const c of report.cases) {
    const failed = c.runs.find((r) => !r.passed);
    const unsupported = [...new Set(c.runs.flatMap((r) => (r.grounding?.unsupported ?? []).map((n) => n.text)))];
    lines.push(
      `| ${c.id} | ${c.expects} | ${c.passed ? 'yes' : 'no'} | ${c.passes}/${c.runs.length} | ${c.runs.map((r) => r.toolCalls).join(', ')} | ${cell(unsupported.join(', '))} | ${cell(failed ? failed.reasons.join('; ') : '')} |`,
    );
  }
  return lines.join('\n') + '\n';
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
