import { createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import type { ApiKeyRole } from './api-key.entity';

/** The authenticated caller of a request: the API key's id, role and subject. */
export interface Caller {
  keyId: string;
  role: ApiKeyRole;
  subject: string;
}

export const ROLES_KEY = 'roles';
export const PUBLIC_KEY = 'public';

/** Roles allowed on a route. A route without `@Roles` is admin-only: forgetting it fails closed. */
export const Roles = (...roles: ApiKeyRole[]) => SetMetadata(ROLES_KEY, roles);

/** The route needs no API key (health only). */
export const Public = () => SetMetadata(PUBLIC_KEY, true);

/** Injects the authenticated Caller. */
export const Caller = createParamDecorator((_data: unknown, ctx: ExecutionContext): Caller => {
  return ctx.switchToHttp().getRequest<{ caller: Caller }>().caller;
});
