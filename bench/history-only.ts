/**
 * `npm run bench:history`: record history, the trash and change sets (bench/history.ts): write throughput
 * against the build before them, history pages, reverts, storage and its compaction; replaces that section
 * of BENCHMARKS.md.
 */
import { HISTORY_END, HISTORY_ENV, HISTORY_START, historyGoals, historyRun, renderHistory } from './history';
import { runSection } from './section';

runSection({
  command: 'npm run bench:history',
  title: 'record history',
  seed: false,
  markers: { start: HISTORY_START, end: HISTORY_END },
  env: HISTORY_ENV,
  statements: true,
  run: historyRun,
  render: renderHistory,
  goals: historyGoals,
});
