import type { FastifyRequest } from 'fastify';
import type { OidcIssuerConfig } from '../config/app-config';

/** Where a protected resource's metadata is (RFC 9728): this path, then the resource's own path. */
export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/** The MCP endpoints, as their metadata documents name them: `/mcp` and `/mcp/agents/<name>`. */
const MCP_PATH = /^\/mcp(?:\/agents\/([^/?#]+))?\/?(?:[?#]|$)/;

/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728): what an MCP client reads to learn where its user signs
 * in. The authorization servers are the configured token issuers; a token of any of them, for the configured
 * audience, is accepted as `Authorization: Bearer`.
 */
export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers: string[];
  bearer_methods_supported: ['header'];
  resource_name: string;
}

export function protectedResourceMetadata(issuers: readonly OidcIssuerConfig[], resource: string): ProtectedResourceMetadata {
  return {
    resource,
    authorization_servers: issuers.map((issuer) => issuer.issuer),
    bearer_methods_supported: ['header'],
    resource_name: 'Data copilot',
  };
}

/** The server's URL as the request reached it (scheme and host, no path): what its client names it by. */
export function originOf(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/** The resource an MCP request is for (`/mcp`, `/mcp/agents/<name>`), its query and anything below left out. */
export function mcpResourcePath(url: string): string {
  const match = MCP_PATH.exec(url);
  return match?.[1] ? `/mcp/agents/${match[1]}` : '/mcp';
}

/**
 * The challenge of a 401 under /mcp: `Bearer` with the URL of the resource's metadata (RFC 9728, section 5.1),
 * where the MCP client finds the authorization servers to sign its user in with. Plain `Bearer` when the
 * request's host makes no URL.
 */
export function mcpChallenge(request: FastifyRequest): string {
  try {
    const url = new URL(`${PROTECTED_RESOURCE_PATH}${mcpResourcePath(request.url)}`, originOf(request));
    return `Bearer resource_metadata="${url.href}"`;
  } catch {
    return 'Bearer';
  }
}
