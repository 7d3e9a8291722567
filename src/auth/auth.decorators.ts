import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiQuery } from '@nestjs/swagger';
import type { ApiKeyRole } from './api-key.entity';

export const ROLES_KEY = 'roles';
export const PUBLIC_KEY = 'public';
export const STREAM_TOKEN_KEY = 'streamToken';

/** How an event-stream route takes stream tokens (see AcceptsStreamToken). */
export interface StreamTokenRoute {
  /** The path parameter holding the chat id that a chat-bound token must name; none: chat-bound tokens are refused. */
  chatParam?: string;
  /**
   * What `chatParam` holds: the chat's id (the default), or `clientId`, the id an AI SDK client gave
   * the chat (unique per owner): a chat-bound token then opens the route for that client id of its key's chats.
   */
  chatParamIs?: 'id' | 'clientId';
}

/** Roles allowed on a route. A route without `@Roles` is admin-only: forgetting it fails closed. */
export const Roles = (...roles: ApiKeyRole[]) => SetMetadata(ROLES_KEY, roles);

/** The route needs no API key (health only). */
export const Public = () => SetMetadata(PUBLIC_KEY, true);

/**
 * An event-stream route that also takes `?token=<stream token>` instead of the Authorization header,
 * for browsers' EventSource, which cannot send headers. The stream then runs as the key that made the
 * token, under the route's @Roles. A token made for a chat opens only routes whose `chatParam` path
 * parameter is that chat's id. Every other route refuses tokens (401).
 */
export const AcceptsStreamToken = (route: StreamTokenRoute = {}) =>
  applyDecorators(
    SetMetadata(STREAM_TOKEN_KEY, route),
    ApiQuery({
      name: 'token',
      required: false,
      description: 'A stream token from POST /api/v1/stream-tokens, for clients that cannot send Authorization (EventSource)',
      schema: { type: 'string', maxLength: 128 },
    }),
  );
