import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { DomainError } from '../common/domain-error';
import type { ApiKeyRole } from './api-key.entity';
import { ApiKeyService } from './api-key.service';
import { PUBLIC_KEY, ROLES_KEY, STREAM_TOKEN_KEY, type StreamTokenRoute } from './auth.decorators';
import { Caller } from './caller';
import { AuthFailureThrottle } from './rate-limits';
import { StreamTokenService } from './stream-token.service';
import { UserPrincipalService } from './user-principal.service';

/** `Authorization: Bearer <key or identity provider token>`. */
const BEARER = /^Bearer\s+(\S+)\s*$/i;

type GuardedRequest = FastifyRequest & { caller?: Caller };

/**
 * Global guard: every route needs `Authorization: Bearer <key>` (or a JWT of a configured identity
 * provider, which authenticates a user) unless marked @Public(); roles from
 * @Roles(). Event-stream routes marked @AcceptsStreamToken() also take `?token=<stream token>`.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeyService,
    private readonly streamTokens: StreamTokenService,
    private readonly throttle: AuthFailureThrottle,
    private readonly users: UserPrincipalService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets)) return true;
    const request = context.switchToHttp().getRequest<GuardedRequest>();
    const streamRoute = this.reflector.getAllAndOverride<StreamTokenRoute | undefined>(STREAM_TOKEN_KEY, targets);
    const caller = await this.authenticateThrottled(request, streamRoute);
    const roles = this.reflector.getAllAndOverride<ApiKeyRole[]>(ROLES_KEY, targets) ?? ['admin'];
    if (!roles.includes(caller.role)) {
      throw new DomainError('forbidden', `This route needs the role ${roles.join(' or ')}`);
    }
    request.caller = caller;
    return true;
  }

  /**
   * A request that presents a wrong credential counts against its address; an address past its
   * budget gets 429 before an unknown credential is even looked up. A key this replica verified
   * recently still works from there: many honest clients may share one address (a proxy, a NAT), and
   * one of them guessing must not lock the others out.
   */
  private async authenticateThrottled(request: GuardedRequest, streamRoute: StreamTokenRoute | undefined): Promise<Caller> {
    const presented = request.headers.authorization !== undefined || hasQueryToken(request);
    if (!presented) return this.authenticate(request, streamRoute);
    try {
      this.throttle.assertAllowed(request.ip);
    } catch (refused) {
      const header = request.headers.authorization;
      const match = typeof header === 'string' ? BEARER.exec(header) : null;
      const known = match ? this.knownCaller(match[1]) : undefined;
      if (!known) throw refused;
      return known;
    }
    try {
      return await this.authenticate(request, streamRoute);
    } catch (error) {
      if (error instanceof DomainError && (error.code === 'unauthorized' || error.code === 'invalid_token')) {
        this.throttle.failed(request.ip);
      }
      throw error;
    }
  }

  /** The caller of a key or token this replica verified recently, without verifying it again. */
  private knownCaller(secret: string): Caller | undefined {
    return this.users.handles(secret) ? this.users.knownCaller(secret) : this.keys.knownCaller(secret);
  }

  private async authenticate(request: GuardedRequest, streamRoute: StreamTokenRoute | undefined): Promise<Caller> {
    const token = takeStreamToken(request, streamRoute !== undefined);
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? BEARER.exec(header) : null;
    if (match) {
      // A JWT of a configured identity provider is a user's token; anything else is an API key's secret.
      if (this.users.handles(match[1])) return this.users.authenticate(match[1]);
      const caller = await this.keys.authenticate(match[1]);
      if (!caller) throw new DomainError('unauthorized', 'Unknown or revoked API key');
      return caller;
    }
    if (token === undefined) throw new DomainError('unauthorized', 'Missing API key: send "Authorization: Bearer <key>"');
    if (!streamRoute) {
      throw new DomainError(
        'unauthorized',
        'Stream tokens open event streams only; send "Authorization: Bearer <key>" on this route',
      );
    }
    const grant = typeof token === 'string' ? await this.streamTokens.verify(token) : undefined;
    if (!grant) throw new DomainError('unauthorized', 'Unknown or expired stream token, or its key was revoked');
    if (grant.chatId !== null) {
      const param = streamRoute.chatParam;
      const value = param ? (request.params as Record<string, string | undefined>)[param] : undefined;
      const chatId =
        streamRoute.chatParamIs === 'clientId' && value !== undefined
          ? await this.streamTokens.chatOfClientId(grant.caller, value)
          : value?.toLowerCase();
      if (chatId === undefined || chatId !== grant.chatId) {
        throw new DomainError('unauthorized', 'This stream token was made for another chat');
      }
    }
    return grant.caller;
  }
}

function hasQueryToken(request: GuardedRequest): boolean {
  const query = request.query as Record<string, unknown> | undefined;
  return !!query && typeof query === 'object' && 'token' in query;
}

/**
 * The `token` query parameter. On a stream route it is consumed here, so the credential never reaches
 * the handler or its query DTO; elsewhere it stays, and is refused when it would be the only credential.
 */
function takeStreamToken(request: GuardedRequest, consume: boolean): unknown {
  const query = request.query as Record<string, unknown> | undefined;
  if (!query || typeof query !== 'object' || !('token' in query)) return undefined;
  const token = query.token;
  if (consume) delete query.token;
  return token;
}
