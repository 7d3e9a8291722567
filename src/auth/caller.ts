import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { ApiKeyRole } from './api-key.entity';

/**
 * The authenticated caller of a request: the principal's id (an API key's or a user's), role, subject and owner.
 *
 * - `subject`: who row filters run for (`$subject`), what admins write filters and agent lists against.
 *   A key's subject, or a user's mapped subject claim: two issuers may both have a user "alice".
 * - `owner`: what owns chats, their claims and approvals, streams, rate-limit buckets. A key's subject (two
 *   keys of one subject share their chats); for a user, its issuer and subject, which no key's subject and
 *   no user of another issuer can have. Read from `api_keys.owner`, the one place it is defined.
 */
export interface Caller {
  keyId: string;
  role: ApiKeyRole;
  subject: string;
  owner: string;
}

/** Injects the authenticated Caller. */
export const Caller = createParamDecorator((_data: unknown, ctx: ExecutionContext): Caller => {
  return ctx.switchToHttp().getRequest<{ caller: Caller }>().caller;
});
