/**
 * Sign-in with the identity provider: OAuth 2.0 authorization code with PKCE (S256), as a public client.
 * The page finds the provider's endpoints by OpenID discovery, sends the browser to its authorization
 * endpoint with a code challenge, a state and a nonce, and, back on the playground with a code, exchanges
 * it at the token endpoint for an access token: the Bearer of every API call from then on, as a pasted key.
 * Before that token expires the page gets another with the refresh token, when the provider gave one.
 */

/** GET /playground/sign-in. */
export interface SignInSettings {
  enabled: boolean;
  issuer?: string;
  clientId?: string;
  scopes?: string[];
  resource?: string;
}

interface Discovery {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
}

/** What the page keeps (sessionStorage) between leaving for the provider and coming back. */
interface Pending {
  verifier: string;
  state: string;
  nonce: string;
  issuer: string;
  tokenEndpoint: string;
  redirectUri: string;
}

const PENDING = 'playground.signIn.pending';

/** What a sign-in gave: the access token, and what the page needs to get the next one before it expires. */
export interface SignedIn {
  accessToken: string;
  tokenEndpoint: string;
  /** Absent when the provider gave none: the person signs in again instead. */
  refreshToken?: string;
  /** When the access token was received and when it expires (ms since the epoch); absent when the provider did not say. */
  receivedAt: number;
  expiresAt?: number;
}

/** The token endpoint's answer (RFC 6749, section 5.1). */
interface TokenAnswer {
  access_token?: string;
  refresh_token?: string;
  expires_in?: number;
  id_token?: string;
  error?: string;
  error_description?: string;
}

/** The settings the server publishes; sign-in off when they cannot be read. */
export async function signInSettings(): Promise<SignInSettings> {
  try {
    const response = await fetch('/playground/sign-in', { headers: { Accept: 'application/json' } });
    if (!response.ok) return { enabled: false };
    return (await response.json()) as SignInSettings;
  } catch {
    return { enabled: false };
  }
}

/** The host the button names ("Sign in with idp.example.com"). */
export function issuerHost(settings: SignInSettings): string {
  try {
    return new URL(settings.issuer ?? '').host;
  } catch {
    return 'the identity provider';
  }
}

function base64url(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomText(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

/** Where the provider sends the browser back: this page, without query or fragment. */
function redirectUri(): string {
  return `${location.origin}${location.pathname}`;
}

async function discover(issuer: string): Promise<Discovery> {
  const response = await fetch(`${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`, {
    headers: { Accept: 'application/json' },
  });
  if (!response.ok) throw new Error(`The identity provider's discovery document answered ${response.status}`);
  const document = (await response.json()) as Partial<Discovery>;
  if (document.issuer !== issuer) throw new Error('The identity provider names another issuer');
  if (typeof document.authorization_endpoint !== 'string' || typeof document.token_endpoint !== 'string') {
    throw new Error('The identity provider publishes no authorization or token endpoint');
  }
  return document as Discovery;
}

/** Leaves for the provider's authorization endpoint (the page unloads). */
export async function startSignIn(settings: SignInSettings): Promise<void> {
  if (!settings.enabled || !settings.issuer || !settings.clientId) throw new Error('Sign-in is not configured');
  if (!crypto.subtle) throw new Error('Sign-in needs the page over https (or on localhost)');
  const discovery = await discover(settings.issuer);
  const verifier = randomText();
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const pending: Pending = {
    verifier,
    state: randomText(),
    nonce: randomText(),
    issuer: settings.issuer,
    tokenEndpoint: discovery.token_endpoint,
    redirectUri: redirectUri(),
  };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const url = new URL(discovery.authorization_endpoint);
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: settings.clientId,
    redirect_uri: pending.redirectUri,
    scope: (settings.scopes ?? ['openid']).join(' '),
    state: pending.state,
    nonce: pending.nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  };
  // RFC 8707 names the API by `resource`; Auth0 by `audience`.
  if (settings.resource) Object.assign(params, { resource: settings.resource, audience: settings.resource });
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  location.assign(url.href);
}

/** The claims of a JWT, unverified (the nonce check of an ID token the token endpoint itself just gave). */
function claimsOf(jwt: string): Record<string, unknown> {
  const part = jwt.split('.')[1] ?? '';
  const text = atob(
    part
      .replace(/-/g, '+')
      .replace(/_/g, '/')
      .padEnd(Math.ceil(part.length / 4) * 4, '='),
  );
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(text, (c) => c.charCodeAt(0)))) as Record<string, unknown>;
}

/**
 * Back from the provider: the tokens for the code in the URL, or undefined when the page was not opened by a
 * redirect of the provider. The code and state leave the address bar either way.
 */
export async function completeSignIn(settings: SignInSettings): Promise<SignedIn | undefined> {
  const query = new URLSearchParams(location.search);
  const state = query.get('state');
  if (!state || (!query.has('code') && !query.has('error'))) return undefined;
  history.replaceState(null, '', redirectUri() + location.hash);
  const raw = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING);
  const pending = raw ? (JSON.parse(raw) as Pending) : undefined;
  if (!pending || pending.state !== state) throw new Error('The sign-in came back with an unknown state: sign in again');
  const error = query.get('error');
  if (error) throw new Error(`The identity provider refused the sign-in: ${query.get('error_description') ?? error}`);
  if (!settings.clientId || pending.issuer !== settings.issuer) throw new Error('Sign-in is no longer configured so');
  const body = new URLSearchParams({
    grant_type: 'authorization_code',
    code: query.get('code') ?? '',
    redirect_uri: pending.redirectUri,
    client_id: settings.clientId,
    code_verifier: pending.verifier,
  });
  if (settings.resource) body.set('resource', settings.resource);
  const answer = await askToken(pending.tokenEndpoint, body, 'the code');
  if (answer.id_token && claimsOf(answer.id_token).nonce !== pending.nonce) {
    throw new Error('The identity provider answered with another nonce: sign in again');
  }
  return signedIn(answer, pending.tokenEndpoint);
}

/**
 * The next access token of a sign-in, by its refresh token (RFC 6749, section 6). The provider may give a new
 * refresh token with it (rotation); otherwise the one used stays good.
 */
export async function refreshSignIn(settings: SignInSettings, previous: SignedIn): Promise<SignedIn> {
  if (!previous.refreshToken || !settings.clientId) throw new Error('This sign-in cannot be refreshed: sign in again');
  const body = new URLSearchParams({
    grant_type: 'refresh_token',
    refresh_token: previous.refreshToken,
    client_id: settings.clientId,
  });
  if (settings.resource) body.set('resource', settings.resource);
  const next = signedIn(await askToken(previous.tokenEndpoint, body, 'the refresh token'), previous.tokenEndpoint);
  return { ...next, refreshToken: next.refreshToken ?? previous.refreshToken };
}

/**
 * When to get the next token: a minute before the access token expires, but not before half its life is
 * over (a short-lived token is not renewed at once); undefined when its expiry is unknown.
 */
export function renewalAt(grant: Pick<SignedIn, 'receivedAt' | 'expiresAt'>): number | undefined {
  if (grant.expiresAt === undefined) return undefined;
  return Math.max(grant.expiresAt - 60_000, grant.receivedAt + (grant.expiresAt - grant.receivedAt) / 2);
}

async function askToken(tokenEndpoint: string, body: URLSearchParams, what: string): Promise<TokenAnswer> {
  const response = await fetch(tokenEndpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    body,
  });
  const answer = (await response.json().catch(() => ({}))) as TokenAnswer;
  if (!response.ok || typeof answer.access_token !== 'string') {
    throw new Error(
      `The identity provider's token endpoint refused ${what}: ${answer.error_description ?? answer.error ?? response.status}`,
    );
  }
  return answer;
}

/** The sign-in a token answer makes: its expiry from `expires_in`, else from the access token's own `exp`. */
function signedIn(answer: TokenAnswer, tokenEndpoint: string): SignedIn {
  const accessToken = answer.access_token!;
  const receivedAt = Date.now();
  let expiresAt: number | undefined;
  if (typeof answer.expires_in === 'number' && answer.expires_in > 0) expiresAt = receivedAt + answer.expires_in * 1000;
  else {
    try {
      const exp = claimsOf(accessToken).exp;
      if (typeof exp === 'number') expiresAt = exp * 1000;
    } catch {
      // An opaque access token that says nothing of its expiry: kept until the server refuses it.
    }
  }
  return {
    accessToken,
    tokenEndpoint,
    receivedAt,
    ...(expiresAt !== undefined ? { expiresAt } : {}),
    ...(typeof answer.refresh_token === 'string' ? { refreshToken: answer.refresh_token } : {}),
  };
}
