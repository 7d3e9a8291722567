/**
 * `npm run bench:webhooks`: webhook deliveries to five verifying receivers under a write load, and the
 * writes with and without them (bench/webhooks.ts); replaces that section of BENCHMARKS.md.
 */
import { renderWebhooks, WEBHOOKS_END, WEBHOOKS_START, webhooksGoals, webhooksRun } from './webhooks';
import { runSection } from './section';

runSection({
  command: 'npm run bench:webhooks',
  title: 'webhooks',
  seed: false,
  statements: true,
  markers: { start: WEBHOOKS_START, end: WEBHOOKS_END },
  env: { WEBHOOK_ALLOW_PRIVATE: 'true' },
  run: webhooksRun,
  render: renderWebhooks,
  goals: webhooksGoals,
});
