/**
 * `npm run bench:openai`: only the OpenAI-compatible overhead scenario of the benchmark
 * (bench/openai-compat.ts), with the sample CRM; replaces that section of BENCHMARKS.md.
 */
import { OPENAI_COMPAT_END, OPENAI_COMPAT_START, openAiCompatGoals, openAiCompatRun, renderOpenAiCompat } from './openai-compat';
import { runSection } from './section';

runSection({
  command: 'npm run bench:openai',
  title: 'OpenAI-compatible',
  seed: true,
  memberSockets: 16,
  markers: { start: OPENAI_COMPAT_START, end: OPENAI_COMPAT_END },
  run: ({ port, secret, member, llm }) => openAiCompatRun(port, secret, member, llm),
  render: renderOpenAiCompat,
  goals: openAiCompatGoals,
});
