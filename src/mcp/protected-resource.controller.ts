import { Controller, Get, Inject, Param, Req } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { Public } from '../auth/auth.decorators';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { originOf, protectedResourceMetadata, type ProtectedResourceMetadata } from './protected-resource';

/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) of the server and of its MCP endpoints, where a 401 from
 * /mcp points MCP clients: which identity providers sign users in. Only with AUTH_OIDC_ISSUER(S); otherwise
 * there is none (404), since only API keys are accepted.
 */
@ApiExcludeController()
@Controller('.well-known/oauth-protected-resource')
export class ProtectedResourceController {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  @Get()
  @Public()
  server(@Req() request: FastifyRequest): ProtectedResourceMetadata {
    return this.metadata(request, '');
  }

  @Get('mcp')
  @Public()
  mcp(@Req() request: FastifyRequest): ProtectedResourceMetadata {
    return this.metadata(request, '/mcp');
  }

  @Get('mcp/agents/:agentName')
  @Public()
  agent(@Req() request: FastifyRequest, @Param('agentName') agentName: string): ProtectedResourceMetadata {
    return this.metadata(request, `/mcp/agents/${encodeURIComponent(agentName)}`);
  }

  private metadata(request: FastifyRequest, path: string): ProtectedResourceMetadata {
    if (!this.config.oidcIssuers.length) {
      throw new DomainError('route_not_found', 'No identity provider is configured: this server takes API keys only');
    }
    return protectedResourceMetadata(this.config.oidcIssuers, `${originOf(request)}${path}`);
  }
}
