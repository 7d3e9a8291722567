import { EntityManager, LockMode } from '@mikro-orm/postgresql';
import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { createHash, randomUUID } from 'node:crypto';
import { canonicalJson } from '../common/canonical-json';
import { PgPubSub } from '../database/pg-pubsub.service';
import { AuditLog, type AuditActor } from '../audit/audit-log.service';
import { ACCESS_CHANGED } from './access-changed';
import { ApiKeyEntity } from './api-key.entity';
import { ApiKeyService } from './api-key.service';
import type { Caller } from './caller';
import {
  DEFAULT_IDENTITY_MAPPING,
  mapClaims,
  mappedPolicies,
  parseIdentityMapping,
  type IdentityMapping,
  type UserIdentity,
} from './identity-mapping';
import { IdentityMappingRepository } from './identity-mapping.repository';
import { OidcTokenVerifier, TokenRefused } from './oidc-token.verifier';

/** How long a verified token (or a user's row as last seen) is trusted without verifying or reading again. */
const CACHE_TTL_MS = 30_000;
const CACHE_MAX = 10_000;

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * End users of the identity providers as principals. Each user is a row of `api_keys` (kind `user`) made
 * at its first valid token and brought up to date whenever its token maps to another role, other policies
 * or attributes: its id is the caller's keyId, so quotas, rate limits, usage, audit, pool shares, streams
 * and revocation treat a user exactly as a key.
 */
@Injectable()
export class UserPrincipalService implements OnModuleInit {
  private readonly logger = new Logger(UserPrincipalService.name);
  /** Token hash → its caller, until the token expires or CACHE_TTL_MS, whichever is first. */
  private readonly tokens = new Map<string, { caller: Caller; until: number }>();
  /** issuer + subject → the identity its row holds and the caller it runs as. */
  private readonly users = new Map<string, { identity: string; caller: Caller; until: number }>();
  private mapping?: Promise<IdentityMapping>;

  constructor(
    private readonly em: EntityManager,
    private readonly pubsub: PgPubSub,
    private readonly verifier: OidcTokenVerifier,
    private readonly repo: IdentityMappingRepository,
    private readonly apiKeys: ApiKeyService,
    private readonly audit: AuditLog,
  ) {}

  onModuleInit(): void {
    // A revocation, a changed mapping or policy, a lost LISTEN: nothing cached may outlive it.
    this.pubsub.subscribe((event) => {
      if (event.type === ACCESS_CHANGED || event.type === 'api_key_revoked' || event.type === 'resync') this.clear();
    });
  }

  /** Whether the bearer secret is an identity provider's token (else it is an API key). */
  handles(secret: string): boolean {
    return this.verifier.handles(secret);
  }

  /** The caller of a token this replica verified recently, without verifying it again. */
  knownCaller(token: string): Caller | undefined {
    const cached = this.tokens.get(sha256(token));
    return cached && cached.until > Date.now() ? cached.caller : undefined;
  }

  /** The caller a token authenticates; 401 invalid_token (its reason in the log) when it is refused. */
  async authenticate(token: string): Promise<Caller> {
    const hash = sha256(token);
    const cached = this.tokens.get(hash);
    if (cached && cached.until > Date.now()) return cached.caller;
    try {
      const { issuer, claims } = await this.verifier.verify(token);
      const mapping = await this.currentMapping();
      const identity = mapClaims(mapping, claims);
      if (!identity) throw new TokenRefused(`no usable subject claim "${mapping.subject}"`);
      const caller = await this.principal(issuer, identity);
      if (this.tokens.size >= CACHE_MAX) this.tokens.clear();
      this.tokens.set(hash, { caller, until: Math.min(Date.now() + CACHE_TTL_MS, (claims.exp ?? 0) * 1000 + 60_000) });
      return caller;
    } catch (error) {
      if (error instanceof TokenRefused) this.logger.warn({ msg: 'refused a bearer token', reason: error.reason });
      throw error;
    }
  }

  async getMapping(): Promise<IdentityMapping> {
    return this.currentMapping();
  }

  /** Replaces the mapping; every user runs under it from its next request on. */
  async putMapping(input: Record<string, unknown>, actor?: AuditActor): Promise<IdentityMapping> {
    const mapping = parseIdentityMapping(input);
    await this.em.fork().transactional(async (em) => {
      await this.apiKeys.checkPolicies(em, mappedPolicies(mapping));
      await this.repo.put(em, mapping);
      await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
      await this.audit.admin(em, actor, 'identity.mapping', 'identity_mapping');
    });
    this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
    return mapping;
  }

  private currentMapping(): Promise<IdentityMapping> {
    this.mapping ??= this.repo.get(this.em.fork()).then((stored) => stored ?? DEFAULT_IDENTITY_MAPPING);
    this.mapping.catch(() => (this.mapping = undefined));
    return this.mapping;
  }

  /**
   * The user's row as the token says it runs: created at its first token, updated (and every replica's
   * access caches cleared, as a key's PATCH does) when the token maps to another role, policies or
   * attributes. A revoked user's token is refused.
   */
  private async principal(issuer: string, identity: UserIdentity): Promise<Caller> {
    const id = `${issuer}\n${identity.subject}`;
    const wanted = canonicalJson({ role: identity.role, policies: identity.policies, attributes: identity.attributes });
    const seen = this.users.get(id);
    if (seen && seen.identity === wanted && seen.until > Date.now()) return seen.caller;
    let changed = false;
    const caller = await this.em.fork().transactional(async (em) => {
      await em.getConnection().execute(
        `insert into "api_keys" ("id", "name", "prefix", "secret_hash", "kind", "issuer", "role", "subject", "policies", "attributes", "revoked", "created_at")
         values (?, ?, '', null, 'user', ?, ?, ?, ?, ?, false, now())
         on conflict ("issuer", "subject") where "kind" = 'user' do nothing`,
        [
          randomUUID(),
          `user ${identity.subject}`.slice(0, 255),
          issuer,
          identity.role,
          identity.subject,
          JSON.stringify(identity.policies),
          JSON.stringify(identity.attributes),
        ],
        'run',
        em.getTransactionContext(),
      );
      const row = await em.findOneOrFail(
        ApiKeyEntity,
        { kind: 'user', issuer, subject: identity.subject },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (row.revoked) throw new TokenRefused(`user ${identity.subject} of ${issuer} is revoked`);
      const current = canonicalJson({ role: row.role, policies: row.policies ?? [], attributes: row.attributes ?? {} });
      if (current !== wanted) {
        row.role = identity.role;
        row.policies = identity.policies;
        row.attributes = identity.attributes;
        changed = true;
        await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
      }
      return { keyId: row.id, role: identity.role, subject: identity.subject, owner: row.owner } satisfies Caller;
    });
    if (changed) this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
    if (this.users.size >= CACHE_MAX) this.users.clear();
    this.users.set(id, { identity: wanted, caller, until: Date.now() + CACHE_TTL_MS });
    return caller;
  }

  private clear(): void {
    this.tokens.clear();
    this.users.clear();
    this.mapping = undefined;
  }
}
