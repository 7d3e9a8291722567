/**
 * Headers of every playground response. The page loads only its own script and stylesheet and
 * talks only to this server, so the policy allows nothing but 'self' (no inline script or style,
 * no framing, no plugins), and the API key it holds has nowhere else to go. With sign-in configured
 * (PLAYGROUND_OIDC_CLIENT_ID) it may also reach the identity provider's discovery document and token
 * endpoint (`signInOrigins`): the code exchange is a fetch from the page.
 */
export function playgroundHeaders(signInOrigins: readonly string[] = []): Readonly<Record<string, string>> {
  return {
    'content-security-policy': [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self'",
      ["connect-src 'self'", ...signInOrigins].join(' '),
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join('; '),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
    'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
    // Revalidated on every load (ETag), so a rebuilt page is never served stale.
    'cache-control': 'no-cache',
  };
}

/** The headers without sign-in. */
export const PLAYGROUND_HEADERS = playgroundHeaders();
