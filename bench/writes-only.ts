/**
 * `npm run bench:writes`: record creates with the change feed off and on, into one object and into
 * eight (bench/writes.ts); replaces that section of BENCHMARKS.md.
 */
import { renderWrites, WRITES_END, WRITES_START, writesGoals, writesRun } from './writes';
import { runSection } from './section';

runSection({
  command: 'npm run bench:writes',
  title: 'record writes',
  seed: false,
  markers: { start: WRITES_START, end: WRITES_END },
  run: writesRun,
  render: renderWrites,
  goals: writesGoals,
});
