import type { FastifyCorsOptions } from '@fastify/cors';

/** What a browser page may send cross-origin; the methods of the API's routes. */
export const CORS_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Request headers a page may set: the key, JSON bodies, stream resumption, its own request id, record versions. */
export const CORS_ALLOWED_HEADERS = ['authorization', 'content-type', 'last-event-id', 'x-request-id', 'if-match'] as const;

/** Response headers a page may read beyond the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = ['x-request-id', 'etag', 'retry-after', 'change-set-id'] as const;

/**
 * Options of @fastify/cors for CORS_ORIGINS. A listed origin is answered by an origin function, not an
 * origin list: with a list the plugin would still send Access-Control-Expose-Headers (and, on preflights,
 * the allowed methods and headers) to every other origin, whereas the function's `false` sends no
 * access-control-* header at all and leaves a preflight unanswered (404). Requests without an Origin
 * header (same-origin pages, curl, servers) get none either. No credentials: the API takes Bearer keys,
 * never cookies.
 */
export function corsOptions(origins: '*' | readonly string[]): FastifyCorsOptions {
  const allowed = new Set(origins);
  return {
    origin:
      origins === '*'
        ? '*'
        : (origin: string | undefined, callback: (error: Error | null, origin: string | false) => void) =>
            callback(null, origin !== undefined && allowed.has(origin) ? origin : false),
    methods: [...CORS_METHODS],
    allowedHeaders: [...CORS_ALLOWED_HEADERS],
    exposedHeaders: [...CORS_EXPOSED_HEADERS],
    credentials: false,
    // Browsers reuse a preflight's answer this long (seconds) before asking again.
    maxAge: 600,
    // An OPTIONS request without Access-Control-Request-Method would otherwise get a text/plain 400.
    strictPreflight: false,
  };
}
