import type { FastifyRequest } from 'fastify';
import { mcpChallenge, mcpResourcePath } from './protected-resource';

const request = (url: string, host = 'copilot.example.com') => ({ url, protocol: 'https', host }) as FastifyRequest;

describe('the protected resource of an MCP request', () => {
  it.each([
    ['/mcp', '/mcp'],
    ['/mcp/', '/mcp'],
    ['/mcp?session=1', '/mcp'],
    ['/mcp/agents/deal_desk', '/mcp/agents/deal_desk'],
    ['/mcp/agents/deal_desk?x=1', '/mcp/agents/deal_desk'],
    ['/mcp/agents/deal%20desk', '/mcp/agents/deal%20desk'],
    ['/mcp/unknown/path', '/mcp'],
  ])('%s is %s', (url, resource) => {
    expect(mcpResourcePath(url)).toBe(resource);
  });

  it('names the metadata URL in the challenge, or only the scheme when the host makes no URL', () => {
    expect(mcpChallenge(request('/mcp/agents/a'))).toBe(
      'Bearer resource_metadata="https://copilot.example.com/.well-known/oauth-protected-resource/mcp/agents/a"',
    );
    expect(mcpChallenge(request('/mcp', 'bad host"'))).toBe('Bearer');
  });
});
