/**
 * `npm run bench:schemas`: only the client-tool-schema scenario of the benchmark (bench/client-schemas.ts);
 * replaces that section of BENCHMARKS.md.
 */
import { clientSchemasRun, SCHEMA_CYCLES } from './client-schemas';
import { CLIENT_SCHEMAS_END, CLIENT_SCHEMAS_START, clientSchemaGoals, renderClientSchemas } from './report';
import { runSection } from './section';

runSection({
  command: 'npm run bench:schemas',
  title: 'client tool schemas',
  // The data_chat agent is created whatever SEED says; the sample CRM is not needed here.
  seed: false,
  markers: { start: CLIENT_SCHEMAS_START, end: CLIENT_SCHEMAS_END },
  // BENCH_SCHEMA_CYCLES: a longer run by hand, to see whether memory levels off.
  run: ({ member, app, llm }) => clientSchemasRun(member, app, llm, Number(process.env.BENCH_SCHEMA_CYCLES ?? SCHEMA_CYCLES)),
  render: renderClientSchemas,
  goals: clientSchemaGoals,
});
