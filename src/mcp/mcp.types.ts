import type { AgentSpec } from '../agents/agent.types';
import type { Caller } from '../auth/caller';

/** Who asks, and through which door: all the data tools (`/mcp`) or one agent's share (`/mcp/agents/:agentName`). */
export interface McpScope {
  caller: Caller;
  agent?: AgentSpec;
}

/** What the server says about itself in `initialize`. */
export const MCP_SERVER_INFO = { name: 'data-copilot', title: 'Data copilot', version: '1' } as const;

/** JSON-RPC code for an unknown resource (the MCP specification's, not one of the SDK's named codes). */
export const RESOURCE_NOT_FOUND = -32002;

/** A JSON-RPC error answered over HTTP with no request to answer: a 405 (as the SDK's stateless servers answer GET and DELETE), a parse error. */
export interface JsonRpcErrorBody {
  jsonrpc: '2.0';
  error: { code: number; message: string };
  id: null;
}
