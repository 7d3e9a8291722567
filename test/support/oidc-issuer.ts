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
  private server?: Server;
  private constructor(
    readonly issuer: string,
    private readonly port: number,
    public keys: IssuerKey[],
  ) {}

  static async start(users: Record<string, Record<string, unknown>>): Promise<OidcIssuer> {
    const port = await freePort();
    const issuer = new OidcIssuer(`http://127.0.0.1:${port}`, port, [await newKey('key-1')]);
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
      clients: users.map(client),
      jwks: { keys: this.keys.map((key) => key.jwk) },
      features: {
        clientCredentials: { enabled: true },
        devInteractions: { enabled: false },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => TEST_AUDIENCE,
          useGrantedResource: () => true,
          getResourceServerInfo: () => ({ scope: 'api', audience: TEST_AUDIENCE, accessTokenFormat: 'jwt', accessTokenTTL: 300 }),
        },
      },
      ttl: { ClientCredentials: 300 },
      extraTokenClaims: (_ctx, token) => this.claims.get(String((token as { clientId?: string }).clientId)) ?? {},
    });
    // Unknown clients are made on the fly, so a test may ask a token for any new user.
    const original = provider.Client.find.bind(provider.Client);
    provider.Client.find = async (id: string) => {
      const found = await original(id);
      if (found || !this.claims.has(id)) return found;
      const Client = provider.Client as unknown as new (metadata: ReturnType<typeof client>) => typeof found;
      return new Client(client(id));
    };
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

async function newKey(kid: string): Promise<IssuerKey> {
  const { generateKeyPair, exportJWK } = await jose();
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' } };
}
