import fastifyRateLimit from '@fastify/rate-limit';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import { DomainError } from '../common/domain-error';
import type { AppConfig } from '../config/app-config';
import { ApiKeyService } from './api-key.service';

/** Paths where an API key is the credential; elsewhere (health, metrics, the playground's files) nothing is limited by key. */
const KEYED_PREFIXES = ['/api/', '/v1/', '/mcp'];

const WINDOW_MS = 60_000;

/**
 * Requests per member API key per minute (RATE_LIMIT_PER_MINUTE), by @fastify/rate-limit: every
 * answer to a limited key carries `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`, and
 * past the limit it is 429 `rate_limited` with `Retry-After`. Admin keys, requests without a valid
 * key (the guard answers them 401) and stream tokens are not counted. The counters live in this
 * process: with N replicas a key can make up to N times the limit, which is what a per-replica
 * limiter allows in exchange for costing no round trip to a shared store.
 *
 * Runs as a Fastify onRequest hook, before the route: the key is looked up in the authentication
 * cache the guard fills, so a limited request costs no database query of its own.
 */
export async function installRateLimits(app: NestFastifyApplication, config: AppConfig): Promise<void> {
  if (config.rateLimitPerMinute <= 0) return;
  const keys = app.get(ApiKeyService);
  const throttle = app.get(AuthFailureThrottle);
  const fastify = app.getHttpAdapter().getInstance();
  await app.register(fastifyRateLimit, { global: false, enableDraftSpec: true });
  // The key a request is counted under: the member key's id, or '' for requests that are not limited.
  const keyOf = async (request: FastifyRequest): Promise<string> => {
    const path = request.url;
    if (!KEYED_PREFIXES.some((prefix) => path.startsWith(prefix))) return '';
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) return '';
    // From an address the failed-auth throttle holds, only keys already verified are looked at (the guard refuses the rest).
    const caller = keys.knownCaller(match[1]) ?? (throttle.blocked(request.ip) ? undefined : await keys.authenticate(match[1]));
    return caller && caller.role !== 'admin' ? `key:${caller.keyId}` : '';
  };
  const limiter = fastify.rateLimit({
    max: config.rateLimitPerMinute,
    timeWindow: WINDOW_MS,
    keyGenerator: keyOf,
    allowList: (_request, key) => key === '',
    errorResponseBuilder: (_request, context) =>
      new DomainError(
        'rate_limited',
        `Too many requests: an API key may make ${context.max} per minute; try again in ${context.after}`,
        { limit: context.max },
        { retryAfterSeconds: Math.max(1, Math.ceil(context.ttl / 1000)) },
      ),
  });
  fastify.addHook('onRequest', limiter);
}

/**
 * Failed authentications (an unknown or revoked API key, a bad stream token) per client address:
 * past `perMinute` in a minute, every request of that address that presents a credential is 429
 * `rate_limited` until the minute is over, so a key cannot be guessed by trying. Requests with no
 * credential at all are not counted: they guess nothing. Per process, like the request limits.
 */
export class AuthFailureThrottle {
  private readonly failures = new Map<string, { count: number; resetAt: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether `address` has failed too often in its current minute. */
  blocked(address: string): boolean {
    if (this.perMinute <= 0) return false;
    const entry = this.current(address);
    return entry !== undefined && entry.count >= this.perMinute;
  }

  /** 429 when `address` has failed too often in its current minute. */
  assertAllowed(address: string): void {
    const entry = this.blocked(address) ? this.current(address) : undefined;
    if (entry) {
      const retryAfterSeconds = Math.max(1, Math.ceil((entry.resetAt - this.now()) / 1000));
      throw new DomainError(
        'rate_limited',
        `Too many failed authentications from this address; try again in ${retryAfterSeconds} s`,
        undefined,
        { retryAfterSeconds },
      );
    }
  }

  failed(address: string): void {
    if (this.perMinute <= 0) return;
    const entry = this.current(address);
    if (entry) {
      entry.count++;
      return;
    }
    // Bounded: an attacker with many addresses cannot grow this without limit.
    if (this.failures.size >= MAX_TRACKED_ADDRESSES) this.prune();
    this.failures.set(address, { count: 1, resetAt: this.now() + WINDOW_MS });
  }

  private current(address: string): { count: number; resetAt: number } | undefined {
    const entry = this.failures.get(address);
    if (entry && entry.resetAt <= this.now()) {
      this.failures.delete(address);
      return undefined;
    }
    return entry;
  }

  private prune(): void {
    const now = this.now();
    for (const [address, entry] of this.failures) if (entry.resetAt <= now) this.failures.delete(address);
    if (this.failures.size >= MAX_TRACKED_ADDRESSES) this.failures.clear();
  }
}

const MAX_TRACKED_ADDRESSES = 100_000;
