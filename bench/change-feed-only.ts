/**
 * `npm run bench:change-feed`: only the change-feed scenario (bench/change-feed.ts), two replicas on
 * one database; replaces that section of BENCHMARKS.md.
 */
import { CHANGE_FEED_END, CHANGE_FEED_START, changeFeedGoals, changeFeedRun, renderChangeFeed } from './change-feed';
import { runSection } from './section';

runSection({
  command: 'npm run bench:change-feed',
  title: 'change feed',
  seed: false,
  markers: { start: CHANGE_FEED_START, end: CHANGE_FEED_END },
  run: changeFeedRun,
  render: renderChangeFeed,
  goals: changeFeedGoals,
});
