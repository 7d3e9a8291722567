import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { ApiKeyRole } from './api-key.entity';

/** The authenticated caller of a request: the API key's id, role and subject. */
export interface Caller {
  keyId: string;
  role: ApiKeyRole;
  subject: string;
}

/** Injects the authenticated Caller. */
export const Caller = createParamDecorator((_data: unknown, ctx: ExecutionContext): Caller => {
  return ctx.switchToHttp().getRequest<{ caller: Caller }>().caller;
});
