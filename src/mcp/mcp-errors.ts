import type { ErrorBody, ErrorShape } from '../common/http-exception.filter';
import type { JsonRpcErrorBody } from './mcp.types';

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

export const MCP_ERROR_SHAPE: ErrorShape = { prefix: '/mcp', render: toMcpError };
