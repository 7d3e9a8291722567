import type { JSONRPCRequest, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { AgentSpec } from '../agents/agent.types';
import type { Caller } from '../auth/caller';
import type { McpSession } from './mcp-sessions';

/** Who asks, and through which door: all the data tools (`/mcp`) or one agent's share (`/mcp/agents/:agentName`). */
export interface McpScope {
  caller: Caller;
  agent?: AgentSpec;
  /** The request's session, when the client opened one (signed, so verified): what it can confirm. */
  session?: McpSession;
}

/** Sends a request to the client on the response stream of its request `relatedRequestId` (the POST it waits on). */
export type McpSend = (message: JSONRPCRequest, relatedRequestId: RequestId) => Promise<void>;

/** What the server says about itself in `initialize`. */
export const MCP_SERVER_INFO = { name: 'data-copilot', title: 'Data copilot', version: '1' } as const;

/** The Streamable HTTP answer to a session id this server did not issue to this key on this path (404). */
export const SESSION_NOT_FOUND: JsonRpcErrorBody = {
  jsonrpc: '2.0',
  error: { code: -32001, message: 'Session not found' },
  id: null,
};

/** JSON-RPC code for an unknown resource (the MCP specification's, not one of the SDK's named codes). */
export const RESOURCE_NOT_FOUND = -32002;

/** A JSON-RPC error answered over HTTP with no request to answer: a 405 (as the SDK's stateless servers answer GET and DELETE), a parse error. */
export interface JsonRpcErrorBody {
  jsonrpc: '2.0';
  error: { code: number; message: string };
  id: null;
}
