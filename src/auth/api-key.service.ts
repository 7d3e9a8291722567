import { EntityManager, LockMode } from '@mikro-orm/postgresql';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { ADVISORY_LOCK, lockForTransaction } from '../database/advisory-locks';
import { PgPubSub } from '../database/pg-pubsub.service';
import { ApiKey, ApiKeyEntity, ApiKeyRole, type KeyAttributes } from './api-key.entity';
import { ApiKeyRepository } from './api-key.repository';
import { AuditLog, type AuditActor } from '../audit/audit-log.service';
import { Caller } from './caller';
import { generateSecret, hashSecret, secretPrefix } from './api-key.secret';
import { KeyStreams } from './key-streams.service';
import {
  ApiKeyListResponse,
  ApiKeyResponse,
  CreatedApiKeyResponse,
  MAX_KEY_ATTRIBUTES,
  toApiKeyResponse,
  UpdateApiKeyDto,
} from './api-key.dto';
import { ACCESS_CHANGED } from './access-changed';
import { toUserResponse, type UserListResponse, type UserResponse } from './identity.dto';

/** How long a verified key is trusted without asking the database again (revocations clear it at once). */
const AUTH_CACHE_TTL_MS = 30_000;
const AUTH_CACHE_MAX = 10_000;
const API_KEY_REVOKED = 'api_key_revoked';

/** Attribute names: what `$attr.<name>` can name. */
const ATTRIBUTE_NAME = /^[a-zA-Z][a-zA-Z0-9_]{0,62}$/;
const MAX_ATTRIBUTE_LENGTH = 255;
/** How the owner of every user starts (api_keys.owner): no key's subject may. */
const USER_OWNER_PREFIX = 'oidc:';

/** Keys are auth's: other modules read them through this service, never through the table. */
@Injectable()
export class ApiKeyService implements OnModuleInit {
  private readonly logger = new Logger(ApiKeyService.name);
  /** secret hash → caller; only valid keys are cached, so a new key works at once. */
  private readonly verified = new Map<string, { caller: Caller; until: number }>();

  constructor(
    private readonly em: EntityManager,
    private readonly pubsub: PgPubSub,
    private readonly streams: KeyStreams,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly audit: AuditLog,
    private readonly repo: ApiKeyRepository,
  ) {}

  /** Which of the names are existing access policies; governance, which owns them (above auth), registers it. */
  private policyNames?: (em: EntityManager, names: string[]) => Promise<string[]>;

  usePolicyNames(lookup: (em: EntityManager, names: string[]) => Promise<string[]>): void {
    this.policyNames = lookup;
  }

  onModuleInit(): void {
    // A key revoked on any replica stops working on every replica, and its open event streams end.
    this.pubsub.subscribe((event) => {
      if (event.type === ACCESS_CHANGED) this.verified.clear();
      if (event.type === API_KEY_REVOKED) {
        this.verified.clear();
        if (typeof event.keyId === 'string') this.streams.closeKey(event.keyId);
      }
      if (event.type === 'resync') {
        this.verified.clear();
        void this.closeRevokedStreams();
      }
    });
  }

  /** The caller behind a bearer secret, or undefined for an unknown or revoked key. */
  /** The caller of a key this replica verified recently (its authentication cache), without a query. */
  knownCaller(secret: string): Caller | undefined {
    const cached = this.verified.get(hashSecret(secret));
    return cached && cached.until > Date.now() ? cached.caller : undefined;
  }

  async authenticate(secret: string): Promise<Caller | undefined> {
    const hash = hashSecret(secret);
    const cached = this.verified.get(hash);
    if (cached && cached.until > Date.now()) return cached.caller;
    const key = await this.em.fork().findOne(ApiKeyEntity, { secretHash: hash, kind: 'key', revoked: false });
    if (!key) return undefined;
    const caller: Caller = { keyId: key.id, role: key.role, subject: key.subject, owner: key.owner };
    if (this.verified.size >= AUTH_CACHE_MAX) this.verified.clear();
    this.verified.set(hash, { caller, until: Date.now() + AUTH_CACHE_TTL_MS });
    return caller;
  }

  /** The secret is in this response only; it is never stored. */
  async create(
    input: {
      name: string;
      role: ApiKeyRole;
      subject?: string;
      policies?: string[];
      attributes?: unknown;
      tokensPerDay?: number | null;
    },
    actor?: AuditActor,
  ): Promise<CreatedApiKeyResponse> {
    const secret = generateSecret();
    return this.em.fork().transactional(async (em) => {
      const key = this.build(
        em,
        secret,
        input.name,
        input.role,
        input.subject === undefined ? undefined : checkSubject(input.subject),
      );
      if (input.policies) key.policies = await this.checkPolicies(em, input.policies);
      if (input.attributes !== undefined) key.attributes = checkAttributes(input.attributes);
      if (input.tokensPerDay !== undefined) key.tokensPerDay = input.tokensPerDay;
      await em.persist(key).flush();
      await this.audit.admin(em, actor, 'api_key.create', key.id);
      return { ...toApiKeyResponse(key), secret };
    });
  }

  /** Changes what the key runs as; every replica drops the access and the caller it cached for it. */
  /** The key's own daily token quota; null: the default applies (or the key is unknown). */
  /** Active keys that run under the policy, counted in the transaction `em` (a policy in use cannot be deleted). */
  countActiveWithPolicy(em: EntityManager, policy: string): Promise<number> {
    return this.repo.countActiveWithPolicy(em, policy);
  }

  /**
   * The caller an active key runs as (its role, subject and owner); null when the key is revoked or unknown.
   */
  async activeCaller(keyId: string): Promise<Caller | null> {
    const key = await this.repo.activeIdentity(this.em.fork(), keyId);
    return key ? { keyId, role: key.role, subject: key.subject, owner: key.owner } : null;
  }

  /** What a key's access is compiled from: its policies' names, its attributes and subject, and its kind; null when unknown. */
  async accessInputs(keyId: string): Promise<Pick<ApiKey, 'policies' | 'attributes' | 'subject' | 'kind'> | null> {
    const key = await this.em
      .fork()
      .findOne(ApiKeyEntity, { id: keyId }, { fields: ['policies', 'attributes', 'subject', 'kind'] });
    return key ? { policies: key.policies, attributes: key.attributes, subject: key.subject, kind: key.kind } : null;
  }

  /** What GET /me shows of a principal (a key or a user); null when unknown. */
  async principal(keyId: string): Promise<ApiKey | null> {
    return isUuid(keyId) ? this.em.fork().findOne(ApiKeyEntity, { id: keyId }) : null;
  }

  async tokensPerDay(keyId: string): Promise<number | null> {
    const key = await this.em.fork().findOne(ApiKeyEntity, { id: keyId }, { fields: ['tokensPerDay'] });
    return key?.tokensPerDay ?? null;
  }

  async update(id: string, dto: UpdateApiKeyDto, actor?: AuditActor): Promise<ApiKeyResponse> {
    const response = await this.em.fork().transactional(async (em) => {
      // A user's row is the identity provider's to shape (the mapping), not an API key to edit.
      const key = isUuid(id) ? await em.findOne(ApiKeyEntity, { id, kind: 'key' }) : null;
      if (!key || key.revoked) throw new DomainError('api_key_not_found', `API key "${String(id).slice(0, 100)}" not found`);
      if (dto.subject !== undefined) key.subject = checkSubject(dto.subject);
      if (dto.policies !== undefined) key.policies = await this.checkPolicies(em, dto.policies);
      if (dto.attributes !== undefined) key.attributes = checkAttributes(dto.attributes);
      if (dto.tokensPerDay !== undefined) key.tokensPerDay = dto.tokensPerDay;
      await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
      await this.audit.admin(em, actor, 'api_key.update', key.id);
      return toApiKeyResponse(key);
    });
    // This replica applies it at once; the others when the notification arrives.
    this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
    return response;
  }

  /** Every name must be an existing policy: a misspelt one would leave the key with less than meant. */
  async checkPolicies(em: EntityManager, names: string[]): Promise<string[]> {
    const unique = [...new Set(names)];
    if (!unique.length) return [];
    if (!this.policyNames) throw new Error('No policy names registered: the governance module is not loaded');
    const known = new Set(await this.policyNames(em, unique));
    const missing = unique.filter((name) => !known.has(name));
    if (missing.length) {
      throw new DomainError('invalid_policy', `Unknown polic${missing.length > 1 ? 'ies' : 'y'}: ${missing.join(', ')}`, {
        missing,
      });
    }
    return unique;
  }

  async list(): Promise<ApiKeyListResponse> {
    const keys = await this.em.fork().find(ApiKeyEntity, { kind: 'key' }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    return { apiKeys: keys.map(toApiKeyResponse) };
  }

  /** The users of the identity providers, active and revoked, oldest first. */
  async listUsers(): Promise<UserListResponse> {
    const users = await this.em.fork().find(ApiKeyEntity, { kind: 'user' }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    return { users: users.map(toUserResponse) };
  }

  /** A user's own daily token quota (null: the default); `user_not_found` for anything but an active user. */
  async updateUser(id: string, tokensPerDay: number | null, actor?: AuditActor): Promise<UserResponse> {
    const response = await this.em.fork().transactional(async (em) => {
      const user = isUuid(id) ? await em.findOne(ApiKeyEntity, { id, kind: 'user' }) : null;
      if (!user || user.revoked) throw new DomainError('user_not_found', `User "${String(id).slice(0, 100)}" not found`);
      user.tokensPerDay = tokensPerDay;
      // Quotas are cached per replica until keys change: this tells them.
      await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
      await this.audit.admin(em, actor, 'identity.user.update', user.id);
      return toUserResponse(user);
    });
    this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
    return response;
  }

  /** Revokes a key. The last active admin key cannot be revoked: nobody could administer the server. */
  async revoke(id: string, actor?: AuditActor): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const key = isUuid(id) ? await em.findOne(ApiKeyEntity, { id, kind: 'key' }) : null;
      if (!key || key.revoked) throw new DomainError('api_key_not_found', `API key "${id}" not found`);
      if (key.role === 'admin') {
        await lockForTransaction(em, ADVISORY_LOCK.adminRevoke);
        // Users do not count: an identity provider that is down or misconfigured must not lock every admin out.
        const admins = await em.count(ApiKeyEntity, { role: 'admin', kind: 'key', revoked: false });
        if (admins <= 1) throw new DomainError('last_admin_key', 'Cannot revoke the last active admin key');
      }
      await this.markRevoked(em, key);
      await this.audit.admin(em, actor, 'api_key.delete', key.id);
    });
    this.revoked(id);
  }

  /**
   * Revokes a user of an identity provider: its requests, streams and turns stop as a revoked key's do,
   * and its tokens are refused from now on. A user never seen yet is recorded revoked, so its first token is refused too.
   */
  async revokeUser(issuer: string, subject: string, actor?: AuditActor): Promise<void> {
    const id = await this.em.fork().transactional(async (em) => {
      await em.getConnection().execute(
        `insert into "api_keys" ("id", "name", "prefix", "secret_hash", "kind", "issuer", "role", "subject", "policies", "attributes", "revoked", "created_at")
         values (?, ?, '', null, 'user', ?, 'member', ?, '[]', '{}', true, now())
         on conflict ("issuer", "subject") where "kind" = 'user' do nothing`,
        [randomUUID(), `user ${subject}`.slice(0, 255), issuer, subject],
        'run',
        em.getTransactionContext(),
      );
      const user = await em.findOneOrFail(
        ApiKeyEntity,
        { kind: 'user', issuer, subject },
        { lockMode: LockMode.PESSIMISTIC_WRITE },
      );
      if (!user.revoked) await this.markRevoked(em, user);
      await this.audit.admin(em, actor, 'identity.revoke', user.id);
      return user.id;
    });
    this.revoked(id);
  }

  /**
   * Lifts a user's revocation: its next valid token is accepted again (tokens it held are not special:
   * any unexpired one works). `user_not_found` when the user is unknown or not revoked.
   */
  async liftUserRevocation(issuer: string, subject: string, actor?: AuditActor): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const user = await em.findOne(ApiKeyEntity, { kind: 'user', issuer, subject }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!user || !user.revoked) {
        throw new DomainError('user_not_found', `User "${subject.slice(0, 100)}" of that issuer is not revoked`);
      }
      user.revoked = false;
      // Every replica forgets what it cached of the user (its refusals are never cached, its rows are).
      await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
      await this.audit.admin(em, actor, 'identity.revoke.lift', user.id);
    });
    this.verified.clear();
    this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
  }

  private async markRevoked(em: EntityManager, key: ApiKey): Promise<void> {
    key.revoked = true;
    await this.pubsub.publish({ type: API_KEY_REVOKED, keyId: key.id }, em);
    // Access compiled for the key goes too: a chat turn it posted stops on whichever replica holds it.
    await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
  }

  /** This replica applies a committed revocation at once; the others when its notification arrives. */
  private revoked(id: string): void {
    this.verified.clear();
    this.streams.closeKey(id);
    this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
  }

  /** After a lost LISTEN connection a revocation may have gone unheard: ends the streams of keys revoked meanwhile. */
  private async closeRevokedStreams(): Promise<void> {
    const ids = this.streams.keyIds();
    if (!ids.length) return;
    try {
      const revoked = await this.em.fork().find(ApiKeyEntity, { id: { $in: ids }, revoked: true }, { fields: ['id'] });
      for (const key of revoked) this.streams.closeKey(key.id);
    } catch (error) {
      this.logger.warn({ msg: 'checking streamed keys after a resync failed', error: (error as Error).message });
    }
  }

  /**
   * At start: ADMIN_API_KEY becomes an active admin key; with no key at all and no ADMIN_API_KEY,
   * a generated admin secret is written to DATA_DIR/admin-api-key (0600). The secret is never logged.
   */
  async ensureAdminKey(): Promise<void> {
    const em = this.em.fork();
    if (this.config.adminApiKey) {
      if (this.config.adminApiKey.length < 16) {
        this.logger.warn({
          msg: 'ADMIN_API_KEY is shorter than 16 characters: anyone who guesses it is an admin; use a long random secret',
        });
      }
      const existing = await em.findOne(ApiKeyEntity, { secretHash: hashSecret(this.config.adminApiKey) });
      if (existing) {
        existing.role = 'admin';
        existing.revoked = false;
      } else {
        em.persist(this.build(em, this.config.adminApiKey, 'ADMIN_API_KEY', 'admin', 'admin'));
      }
      await em.flush();
      return;
    }
    if ((await em.count(ApiKeyEntity, { kind: 'key' })) > 0) return;
    const secret = generateSecret();
    em.persist(this.build(em, secret, 'initial admin key', 'admin', 'admin'));
    await em.flush();
    await mkdir(this.config.dataDir, { recursive: true });
    const file = join(this.config.dataDir, 'admin-api-key');
    await writeFile(file, secret + '\n', { mode: 0o600 });
    await chmod(file, 0o600);
    this.logger.log({ msg: 'created an admin API key; its secret is in the file', file });
  }

  private build(em: EntityManager, secret: string, name: string, role: ApiKeyRole, subject?: string): ApiKey {
    const id = randomUUID();
    return em.create(ApiKeyEntity, {
      id,
      name,
      prefix: secretPrefix(secret),
      secretHash: hashSecret(secret),
      kind: 'key',
      issuer: null,
      role,
      subject: subject ?? `key:${id}`,
      policies: [],
      attributes: {},
      tokensPerDay: null,
      revoked: false,
      createdAt: new Date(),
    });
  }
}

/**
 * A key's subject: anything but the start of a user's owner (`oidc:`, see Caller), so that no key can own
 * a user's chats, however its subject is chosen.
 */
function checkSubject(subject: string): string {
  if (subject.startsWith(USER_OWNER_PREFIX)) {
    throw new DomainError(
      'validation_failed',
      `A key's subject cannot start with "${USER_OWNER_PREFIX}": users' chats are owned so`,
    );
  }
  return subject;
}

function checkAttributes(input: unknown): KeyAttributes {
  const invalid = (message: string) => new DomainError('validation_failed', message);
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw invalid('attributes must be an object');
  const entries = Object.entries(input);
  if (entries.length > MAX_KEY_ATTRIBUTES) throw invalid(`A key has at most ${MAX_KEY_ATTRIBUTES} attributes`);
  for (const [name, value] of entries) {
    if (!ATTRIBUTE_NAME.test(name)) throw invalid(`Attribute name "${name.slice(0, 100)}" must be letters, digits or _`);
    const ok =
      (typeof value === 'string' && value.length <= MAX_ATTRIBUTE_LENGTH) ||
      (typeof value === 'number' && Number.isFinite(value));
    if (!ok) throw invalid(`Attribute "${name}" must be a string (at most ${MAX_ATTRIBUTE_LENGTH} characters) or a number`);
  }
  return Object.fromEntries<string | number>(entries as [string, string | number][]);
}
