import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { DomainError } from '../common/domain-error';
import type { ApiKeyRole } from './api-key.entity';
import { ApiKeyService } from './api-key.service';
import { Caller, PUBLIC_KEY, ROLES_KEY } from './auth.decorators';

/** Global guard: every route needs `Authorization: Bearer <key>` unless marked @Public(); roles from @Roles(). */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeyService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets)) return true;
    const request = context.switchToHttp().getRequest<FastifyRequest & { caller?: Caller }>();
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) throw new DomainError('unauthorized', 'Missing API key: send "Authorization: Bearer <key>"');
    const caller = await this.keys.authenticate(match[1]);
    if (!caller) throw new DomainError('unauthorized', 'Unknown or revoked API key');
    const roles = this.reflector.getAllAndOverride<ApiKeyRole[]>(ROLES_KEY, targets) ?? ['admin'];
    if (!roles.includes(caller.role)) {
      throw new DomainError('forbidden', `This route needs the role ${roles.join(' or ')}`);
    }
    request.caller = caller;
    return true;
  }
}
