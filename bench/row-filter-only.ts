/**
 * `npm run bench:row-filter`: only the row-filter scenario of the benchmark (bench/row-filter.ts);
 * replaces that section of BENCHMARKS.md.
 */
import { renderRowFilter, ROW_FILTER_END, ROW_FILTER_START, rowFilterGoals, rowFilterRun } from './row-filter';
import { runSection } from './section';

runSection({
  command: 'npm run bench:row-filter',
  title: 'row filter',
  seed: false,
  markers: { start: ROW_FILTER_START, end: ROW_FILTER_END },
  run: ({ admin, port, databaseUrl }) => rowFilterRun(admin, port, databaseUrl),
  render: renderRowFilter,
  goals: rowFilterGoals,
});
