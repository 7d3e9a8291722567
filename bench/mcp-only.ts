/**
 * `npm run bench:mcp`: only the MCP overhead scenario of the benchmark (bench/mcp.ts), with the sample
 * CRM; replaces that section of BENCHMARKS.md.
 */
import { MCP_END, MCP_START, mcpGoals, mcpRun, renderMcp } from './mcp';
import { runSection } from './section';

runSection({
  command: 'npm run bench:mcp',
  title: 'MCP',
  seed: true,
  memberSockets: 16,
  markers: { start: MCP_START, end: MCP_END },
  // No model call is made; the app only has an endpoint configured, as in the full benchmark.
  run: ({ port, secret, member }) => mcpRun(port, secret, member),
  render: renderMcp,
  goals: mcpGoals,
});
