import type { Server } from 'node:http';
import type { CryptoKey, JWK, KeyObject } from 'jose';
import { freePort } from './free-port';

type Jose = typeof import('jose');
// ESM-only packages: TypeScript keeps these real import()s in CommonJS output under nodenext.
const jose = (): Promise<Jose> => import('jose');

/** The audience the test app is configured with (AUTH_OIDC_AUDIENCE). */
export const TEST_AUDIENCE = 'https://copilot.test';

/** A signing key of the issuer: its private half (to forge tokens by hand) and public JWK. */
export interface IssuerKey {
  kid: string;
  privateKey: KeyObject | CryptoKey;
  jwk: JWK & { kid: string };
}

/**
 * A real OpenID Connect provider (the `oidc-provider` package) on 127.0.0.1, over http (loopback is the
 * one place the app allows it): discovery, a JWKS, and JWT access tokens for TEST_AUDIENCE issued by the
 * client credentials grant. Each user is a client whose id is its `sub`; `claims` holds the extra claims
 * (groups, region, ...) its tokens carry, and may be changed between tokens.
 */
export class OidcIssuer {
  readonly claims = new Map<string, Record<string, unknown>>();
  /**
   * Public clients (no secret, PKCE) for the authorization code flow: client id → redirect URIs. A person signs
   * in on the provider's own login page (`/interaction/<uid>`: any login, no password) as the user named by the
   * login, whose tokens carry `claims` of that name; consent is given at once.
   */
  readonly publicClients = new Map<string, string[]>();
  /** Public clients that may use the refresh token grant: every code exchange then gives them a refresh token too. */
  readonly refreshingClients = new Set<string>();
  private server?: Server;
  private constructor(
    readonly issuer: string,
    private readonly port: number,
    public keys: IssuerKey[],
    /** How long its access tokens are valid, seconds. */
    private readonly accessTokenTtlS: number,
  ) {}

  static async start(
    users: Record<string, Record<string, unknown>>,
    options: { accessTokenTtlS?: number } = {},
  ): Promise<OidcIssuer> {
    const port = await freePort();
    const issuer = new OidcIssuer(`http://127.0.0.1:${port}`, port, [await newKey('key-1')], options.accessTokenTtlS ?? 300);
    for (const [sub, claims] of Object.entries(users)) issuer.claims.set(sub, claims);
    await issuer.listen();
    return issuer;
  }

  /** Signs with a new key from now on; the JWKS lists it first and still lists the old one (as providers roll keys). */
  async rotate(kid: string): Promise<void> {
    this.keys = [await newKey(kid), ...this.keys];
    await this.close();
    await this.listen();
  }

  /** An access token for `sub` from the token endpoint (client credentials). */
  async token(sub: string): Promise<string> {
    if (!this.claims.has(sub)) this.claims.set(sub, {});
    const ask = () =>
      fetch(`${this.issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${sub}:${sub}-secret`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'api' }),
      });
    // A kept-alive connection to the provider before a rotation restarted it fails once: ask again.
    const response = await ask().catch(ask);
    const body = (await response.json()) as { access_token?: string };
    if (!response.ok || !body.access_token)
      throw new Error(`token endpoint answered ${response.status}: ${JSON.stringify(body)}`);
    return body.access_token;
  }

  /** A token made by hand: `claims` over valid defaults, signed with the issuer's current key unless `header` says otherwise. */
  async forge(
    claims: Record<string, unknown>,
    options: { key?: IssuerKey; header?: Record<string, unknown> } = {},
  ): Promise<string> {
    const { SignJWT } = await jose();
    const key = options.key ?? this.keys[0];
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: this.issuer, aud: TEST_AUDIENCE, sub: 'forged', iat: now, exp: now + 300, ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, ...options.header })
      .sign(key.privateKey);
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async listen(): Promise<void> {
    const { default: Provider } = await import('oidc-provider');
    const users = [...this.claims.keys()];
    const provider = new Provider(this.issuer, {
      clients: [
        ...users.map(client),
        ...[...this.publicClients].map(([id, uris]) => publicClient(id, uris, this.refreshingClients.has(id))),
      ],
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      cookies: { keys: ['test-cookie-key'] },
      findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
      jwks: { keys: this.keys.map((key) => key.jwk) },
      features: {
        clientCredentials: { enabled: true },
        devInteractions: { enabled: false },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => TEST_AUDIENCE,
          useGrantedResource: () => true,
          getResourceServerInfo: () => ({
            scope: 'api',
            audience: TEST_AUDIENCE,
            accessTokenFormat: 'jwt',
            accessTokenTTL: this.accessTokenTtlS,
          }),
        },
      },
      ttl: { ClientCredentials: this.accessTokenTtlS },
      // A refresh token for every client allowed the grant (no offline_access scope and consent needed).
      issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
      // A signed-in person's claims by its account, a client credentials token's by its client.
      extraTokenClaims: (_ctx, token) => {
        const { accountId, clientId } = token as { accountId?: string; clientId?: string };
        return this.claims.get(String(accountId ?? clientId)) ?? {};
      },
    });
    // Unknown clients are made on the fly, so a test may ask a token for any new user.
    const original = provider.Client.find.bind(provider.Client);
    provider.Client.find = async (id: string) => {
      const found = await original(id);
      if (found) return found;
      const redirectUris = this.publicClients.get(id);
      if (redirectUris) {
        const Public = provider.Client as unknown as new (metadata: ReturnType<typeof publicClient>) => typeof found;
        return new Public(publicClient(id, redirectUris, this.refreshingClients.has(id)));
      }
      if (!this.claims.has(id)) return found;
      const Client = provider.Client as unknown as new (metadata: ReturnType<typeof client>) => typeof found;
      return new Client(client(id));
    };
    provider.use(async (ctx, next): Promise<void> => {
      const match = /^\/interaction\/([\w-]+)(\/login)?$/.exec(ctx.path);
      if (!match) {
        await next();
        return;
      }
      const details = await provider.interactionDetails(ctx.req, ctx.res);
      if (match[2] && ctx.method === 'POST') {
        const form = new URLSearchParams(await readBody(ctx.req));
        const login = form.get('login')?.trim();
        if (!login) throw new Error('no login');
        if (!this.claims.has(login)) this.claims.set(login, {});
        await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
        return;
      }
      if (details.prompt.name === 'login') {
        ctx.type = 'html';
        ctx.body = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in to the test provider</title>
<link rel="icon" href="data:,"></head><body><h1>Test provider</h1>
<form method="post" action="/interaction/${details.uid}/login"><label for="login">User</label>
<input id="login" name="login" autocomplete="off" required><button type="submit" id="provider-sign-in">Sign in</button></form></body></html>`;
        return;
      }
      // Consent: whatever the client asked for, granted.
      const promptDetails = details.prompt.details as {
        missingOIDCScope?: string[];
        missingOIDCClaims?: string[];
        missingResourceScopes?: Record<string, string[]>;
      };
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session?.accountId, clientId: String(details.params.client_id) });
      if (!grant) throw new Error('grant not found');
      if (promptDetails.missingOIDCScope) grant.addOIDCScope(promptDetails.missingOIDCScope.join(' '));
      if (promptDetails.missingOIDCClaims) grant.addOIDCClaims(promptDetails.missingOIDCClaims);
      for (const [indicator, scopes] of Object.entries(promptDetails.missingResourceScopes ?? {})) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
      const grantId = await grant.save();
      await provider.interactionFinished(
        ctx.req,
        ctx.res,
        { consent: details.grantId ? {} : { grantId } },
        { mergeWithLastSubmission: true },
      );
    });
    await new Promise<void>((resolve) => {
      this.server = provider.listen(this.port, '127.0.0.1', () => resolve());
    });
  }
}

function client(id: string) {
  return {
    client_id: id,
    client_secret: `${id}-secret`,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
  };
}

function publicClient(id: string, redirectUris: string[], refreshing = false) {
  return {
    client_id: id,
    token_endpoint_auth_method: 'none' as const,
    grant_types: refreshing ? ['authorization_code', 'refresh_token'] : ['authorization_code'],
    response_types: ['code' as const],
    redirect_uris: redirectUris,
  };
}

async function readBody(request: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of request) text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  return text;
}

async function newKey(kid: string): Promise<IssuerKey> {
  const { generateKeyPair, exportJWK } = await jose();
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' } };
}
