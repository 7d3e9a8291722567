import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';

/**
 * The Streamable HTTP transport's rule against DNS rebinding: a browser page may reach the server
 * only from an origin in CORS_ORIGINS. Requests without `Origin` (desktop hosts, IDEs, scripts) pass.
 */
@Injectable()
export class McpOriginGuard implements CanActivate {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const origin = context.switchToHttp().getRequest<FastifyRequest>().headers.origin;
    if (origin === undefined) return true;
    const allowed = this.config.corsOrigins;
    if (allowed === '*' || allowed?.includes(origin)) return true;
    throw new DomainError('forbidden', `Origin "${origin.slice(0, 200)}" may not use the MCP endpoint`);
  }
}
