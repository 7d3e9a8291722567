import { Inject, Injectable, Logger } from '@nestjs/common';
import type { JWTPayload, JWTVerifyGetKey } from 'jose';
import { APP_CONFIG, type AppConfig, type OidcIssuerConfig } from '../config/app-config';
import { DomainError } from '../common/domain-error';

/**
 * Signature algorithms accepted: asymmetric only. `none` and the HMAC family are refused, so a token
 * "signed" with an issuer's public key as an HMAC secret can never pass.
 */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** Clock difference tolerated on exp, nbf and iat, seconds. */
const CLOCK_TOLERANCE_S = 60;
/** A JWKS is refetched at the latest after this long, even without an unknown kid. */
const JWKS_MAX_AGE_MS = 10 * 60_000;
const FETCH_TIMEOUT_MS = 5_000;
/** A failed discovery is retried after this long at the soonest (the provider being down is not hammered). */
const DISCOVERY_RETRY_MS = 5_000;
/** `header.payload.signature`, each base64url: what tells a JWT from an API key's secret. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

type Jose = typeof import('jose');
// ESM-only package: TypeScript keeps this a real import() in CommonJS output under nodenext.
let joseModule: Promise<Jose> | undefined;
const jose = (): Promise<Jose> => (joseModule ??= import('jose'));

interface IssuerState {
  config: OidcIssuerConfig;
  keys?: Promise<JWTVerifyGetKey>;
  failedAt?: number;
}

/** A token verified: its issuer and claims. */
export interface VerifiedToken {
  issuer: string;
  claims: JWTPayload;
}

/** Why a token was refused: logged, never sent (the response is always `invalid_token`). */
export class TokenRefused extends DomainError {
  constructor(readonly reason: string) {
    super('invalid_token', 'Invalid bearer token');
  }
}

/**
 * Verifies bearer JWTs of the configured issuers: signature by a key of the issuer's JWKS (found through
 * its OpenID discovery document unless configured), issuer, audience, expiry and not-before.
 */
@Injectable()
export class OidcTokenVerifier {
  private readonly logger = new Logger(OidcTokenVerifier.name);
  private readonly issuers: Map<string, IssuerState>;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {
    this.issuers = new Map(config.oidcIssuers.map((issuer) => [issuer.issuer, { config: issuer }]));
  }

  /** Whether the secret is a JWT this verifier must judge (an API key never has a JWT's shape). */
  handles(secret: string): boolean {
    if (!this.issuers.size || !JWT_SHAPE.test(secret)) return false;
    // A JWT's header is a JSON object naming its algorithm; an API key that merely has two dots is not one.
    try {
      const header: unknown = JSON.parse(Buffer.from(secret.slice(0, secret.indexOf('.')), 'base64url').toString('utf8'));
      return !!header && typeof header === 'object' && typeof (header as { alg?: unknown }).alg === 'string';
    } catch {
      return false;
    }
  }

  /** The token's issuer and claims; TokenRefused (401 invalid_token) otherwise. */
  async verify(token: string): Promise<VerifiedToken> {
    const { jwtVerify, decodeJwt, errors } = await jose();
    let unverified: JWTPayload;
    try {
      unverified = decodeJwt(token);
    } catch {
      throw new TokenRefused('not a JWT');
    }
    const state = typeof unverified.iss === 'string' ? this.issuers.get(unverified.iss) : undefined;
    if (!state) throw new TokenRefused(`unknown issuer ${JSON.stringify(String(unverified.iss)).slice(0, 200)}`);
    const keys = await this.keysOf(state);
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: state.config.issuer,
        audience: state.config.audience,
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_S,
        requiredClaims: ['exp'],
      });
      return { issuer: state.config.issuer, claims: payload };
    } catch (error) {
      if (error instanceof errors.JWKSTimeout || !(error instanceof errors.JOSEError)) throw this.unavailable(state, error);
      if (error.code === 'ERR_JOSE_GENERIC' && /fetch|response/i.test(error.message)) throw this.unavailable(state, error);
      throw new TokenRefused(`${error.code}: ${error.message}`);
    }
  }

  /**
   * The issuer's key set: fetched when first needed, kept up to JWKS_MAX_AGE_MS, and fetched again for a
   * token whose `kid` it lacks, at most once per AUTH_OIDC_JWKS_REFRESH_MS (forged kids cannot make the
   * server hammer the provider).
   */
  private async keysOf(state: IssuerState): Promise<JWTVerifyGetKey> {
    if (state.failedAt !== undefined && Date.now() - state.failedAt < DISCOVERY_RETRY_MS) {
      throw this.unavailable(state, new Error('discovery failed moments ago'));
    }
    state.keys ??= this.discover(state.config).then(async (url) => {
      const { createRemoteJWKSet } = await jose();
      return createRemoteJWKSet(new URL(url), {
        cooldownDuration: this.config.oidcJwksRefreshMs,
        cacheMaxAge: JWKS_MAX_AGE_MS,
        timeoutDuration: FETCH_TIMEOUT_MS,
      });
    });
    try {
      return await state.keys;
    } catch (error) {
      state.keys = undefined;
      state.failedAt = Date.now();
      throw this.unavailable(state, error);
    }
  }

  /** The JWKS URL: configured, or the `jwks_uri` of the issuer's discovery document (which must name the same issuer). */
  private async discover(config: OidcIssuerConfig): Promise<string> {
    if (config.jwksUrl) return config.jwksUrl;
    const url = `${config.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const response = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
    if (!response.ok) throw new Error(`discovery answered ${response.status}`);
    const document = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
    if (document.issuer !== config.issuer) throw new Error(`discovery names the issuer ${String(document.issuer)}`);
    if (typeof document.jwks_uri !== 'string') throw new Error('discovery has no jwks_uri');
    const jwks = new URL(document.jwks_uri);
    const issuerUrl = new URL(config.issuer);
    // The keys come over TLS, or from the same loopback address the configuration already allowed over http.
    if (
      jwks.protocol !== 'https:' &&
      !(jwks.protocol === 'http:' && issuerUrl.protocol === 'http:' && jwks.hostname === issuerUrl.hostname)
    ) {
      throw new Error(`discovery's jwks_uri ${jwks.href} is not https`);
    }
    return jwks.href;
  }

  private unavailable(state: IssuerState, error: unknown): DomainError {
    this.logger.warn({ msg: 'identity provider unavailable', issuer: state.config.issuer, error: (error as Error)?.message });
    return new DomainError(
      'identity_provider_unavailable',
      'The identity provider could not be reached to check the token',
      undefined,
      {
        retryAfterSeconds: Math.ceil(DISCOVERY_RETRY_MS / 1000),
      },
    );
  }
}
