import type { ErrorBody, ErrorShape } from '../common/http-exception.filter';
import type { JsonRpcErrorBody } from './mcp.types';
import { mcpChallenge } from './protected-resource';

/** JSON-RPC's code for a body that is not JSON. */
export const PARSE_ERROR = -32700;

/**
 * A body that is not JSON never reaches the MCP transport (the app's JSON parser refuses it first), so
 * it is answered here as the SDK's own transports answer it: a JSON-RPC parse error, `id: null`, 400.
 * Every other refusal under /mcp (401, 403, 404, the body limits) keeps the app's error body.
 */
function toMcpError(_status: number, body: ErrorBody): ErrorBody | JsonRpcErrorBody {
  if (body.code !== 'invalid_json') return body;
  return { jsonrpc: '2.0', error: { code: PARSE_ERROR, message: 'Parse error: Invalid JSON' }, id: null };
}

/**
 * Errors under /mcp. With identity providers configured (`signIn`), a 401 also says where the client's user
 * signs in: its `WWW-Authenticate` names the endpoint's protected resource metadata (RFC 9728), as MCP
 * clients that sign users in expect.
 */
export function mcpErrorShape(signIn: boolean): ErrorShape {
  return { prefix: '/mcp', render: toMcpError, ...(signIn ? { challenge: mcpChallenge } : {}) };
}
