import { Inject, Injectable, Logger } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import type { PlaygroundSignInResponse } from './playground-sign-in.dto';

const FETCH_TIMEOUT_MS = 5_000;
/** A failed discovery is tried again after this long at the soonest. */
const RETRY_MS = 10_000;

/**
 * The playground's sign-in with the identity provider (PLAYGROUND_OIDC_CLIENT_ID): what the page needs to
 * start the authorization code flow (public, no secret), and the origins its Content-Security-Policy lets it
 * reach: the issuer's (its discovery document) and its token endpoint's, read from that document.
 */
@Injectable()
export class PlaygroundSignIn {
  private readonly logger = new Logger(PlaygroundSignIn.name);
  private tokenOrigin?: Promise<string | undefined>;
  private failedAt = 0;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  settings(): PlaygroundSignInResponse {
    const signIn = this.config.playgroundSignIn;
    if (!signIn) return { enabled: false };
    return {
      enabled: true,
      issuer: signIn.issuer,
      clientId: signIn.clientId,
      scopes: signIn.scopes,
      resource: signIn.audience,
    };
  }

  /** The origins beyond 'self' the page may connect to: none without sign-in. */
  async connectOrigins(): Promise<string[]> {
    const signIn = this.config.playgroundSignIn;
    if (!signIn) return [];
    const issuerOrigin = new URL(signIn.issuer).origin;
    if (!this.tokenOrigin && Date.now() - this.failedAt >= RETRY_MS) {
      const discovering = this.discoverTokenOrigin(signIn.issuer);
      this.tokenOrigin = discovering;
      discovering.catch((error: unknown) => {
        this.logger.warn({ msg: 'playground sign-in: discovery failed', error: (error as Error)?.message });
        this.failedAt = Date.now();
        if (this.tokenOrigin === discovering) this.tokenOrigin = undefined;
      });
    }
    const tokenOrigin = await this.tokenOrigin?.catch(() => undefined);
    return [...new Set([issuerOrigin, ...(tokenOrigin ? [tokenOrigin] : [])])];
  }

  private async discoverTokenOrigin(issuer: string): Promise<string | undefined> {
    const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const response = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
    if (!response.ok) throw new Error(`discovery answered ${response.status}`);
    const document = (await response.json()) as { token_endpoint?: unknown };
    if (typeof document.token_endpoint !== 'string') throw new Error('discovery has no token_endpoint');
    const endpoint = new URL(document.token_endpoint);
    if (endpoint.protocol !== 'https:' && endpoint.protocol !== 'http:') throw new Error('token_endpoint is not http(s)');
    return endpoint.origin;
  }
}
