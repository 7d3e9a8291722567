/**
 * `npm run bench:computed`: computed fields at size (bench/computed.ts): stored rollups against plain fields,
 * a rollup under a row filter, writes with stored rollups, a formula filter, a fill; replaces that section of
 * BENCHMARKS.md.
 */
import { COMPUTED_END, COMPUTED_START, computedGoals, computedRun, renderComputed } from './computed';
import { runSection } from './section';

runSection({
  command: 'npm run bench:computed',
  title: 'computed fields',
  seed: false,
  markers: { start: COMPUTED_START, end: COMPUTED_END },
  env: { RATE_LIMIT_PER_MINUTE: '10000000' },
  run: ({ admin, port, databaseUrl }) => computedRun(admin, port, databaseUrl),
  render: renderComputed,
  goals: computedGoals,
});
