import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { ApiKeyService } from '../auth/api-key.service';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { PgPubSub } from '../database/pg-pubsub.service';
import { ReplicatedCache } from '../database/replicated-cache';
import { MetadataService } from '../metadata/metadata.service';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import type { ObjectSummary } from '../metadata/metadata.repository';
import { AccessPolicyEntity } from './access-policy.entity';
import { ACCESS_CHANGED, type AccessAction } from './access-policy.types';
import { CallerAccess, type ObjectCatalog, objectNotFound } from './caller-access';

/**
 * Whether a definition (a metric, a saved view) is visible to a caller: given the objects it names and
 * every "object.field" it uses, true only when the caller may read each object and see each field.
 */
export type DefinitionLens = (objects: Iterable<string>, uses: Iterable<string>) => Promise<boolean>;

/** The caller the server itself runs as (seeding sample data): every object, row and field. */
export const SYSTEM_CALLER: Caller = Object.freeze({ keyId: 'system', role: 'admin', subject: 'system', owner: 'system' });

/**
 * Each key's access, compiled from its policies once and kept until a policy or a key changes: every
 * such write publishes ACCESS_CHANGED, which clears this cache on every replica (like the metadata cache).
 */
@Injectable()
export class AccessService {
  private readonly cache: ReplicatedCache<CallerAccess>;
  /** Each key as it runs now (null: revoked or unknown); revoking or changing a key clears it on every replica. */
  private readonly keys: ReplicatedCache<Caller | null>;

  constructor(
    private readonly em: EntityManager,
    private readonly pubsub: PgPubSub,
    private readonly metadata: MetadataService,
    private readonly apiKeys: ApiKeyService,
  ) {
    this.cache = new ReplicatedCache(pubsub, ACCESS_CHANGED);
    this.keys = new ReplicatedCache(pubsub, ACCESS_CHANGED);
  }

  invalidate(): void {
    this.cache.invalidate();
    this.keys.invalidate();
  }

  /**
   * The caller a key runs as now (its role and subject), through this replica's cache or, `fresh`, read
   * from the table. The cache is cleared on every replica by the notification of a key's revocation or
   * change, and is not used while this replica's LISTEN connection is down (it could miss one): what a
   * durable turn checks before each tool call. `key_revoked` when the key is revoked or unknown, or no
   * longer runs as `expect`.
   */
  async keyCaller(
    keyId: string | null | undefined,
    options: { expect?: Partial<Pick<Caller, 'role' | 'subject' | 'owner'>>; fresh?: boolean } = {},
  ): Promise<Caller> {
    let caller: Caller | null = null;
    if (isUuid(keyId)) {
      const load = () => this.loadKey(keyId);
      caller = options.fresh || !this.pubsub.listening ? await load() : await this.keys.get(keyId, load);
    }
    return checkedCaller(caller, options.expect);
  }

  /**
   * The caller of a key as a statement of the caller's own read it (a durable chat's claim reads its
   * turn's key with the claim): `identity` null when the key is revoked or unknown. `key_revoked` as keyCaller.
   */
  callerOf(
    keyId: string | null,
    identity: Pick<Caller, 'role' | 'subject' | 'owner'> | null,
    expect?: Partial<Pick<Caller, 'role' | 'subject' | 'owner'>>,
  ): Caller {
    const caller = keyId && identity ? { keyId, role: identity.role, subject: identity.subject, owner: identity.owner } : null;
    return checkedCaller(caller, expect);
  }

  /** `key_revoked` unless the caller's key still runs as this caller; the server itself always does. */
  async assertCurrent(caller: Caller, options: { fresh?: boolean } = {}): Promise<void> {
    if (caller === SYSTEM_CALLER) return;
    await this.keyCaller(caller.keyId, { expect: caller, fresh: options.fresh });
  }

  /** The fingerprint of the caller's access as it is now (CallerAccess.fingerprint). */
  async fingerprint(caller: Caller): Promise<string> {
    return (await this.forCaller(caller)).fingerprint(caller.role);
  }

  /**
   * What `caller` may read and write. A key without policies keeps every right of its role; a caller
   * that names no key (other than the server itself) gets nothing: access fails closed.
   */
  async forCaller(caller: Caller): Promise<CallerAccess> {
    if (caller === SYSTEM_CALLER) return CallerAccess.unrestricted();
    if (!isUuid(caller.keyId)) return CallerAccess.fromPolicies([], caller.subject, {});
    return this.cache.get(caller.keyId, () => this.load(caller));
  }

  /**
   * The caller's view of an object for `action` (CallerAccess.view). An object it may not read is
   * `object_not_found`, exactly like one that does not exist, listing only the objects it may read.
   */
  async view(caller: Caller | CallerAccess, objectName: string, action: AccessAction): Promise<ObjectMeta> {
    const access = caller instanceof CallerAccess ? caller : await this.forCaller(caller);
    try {
      const object = await this.metadata.getObject(objectName);
      return access.view(object, action, await this.catalog(object));
    } catch (error) {
      if (!(error instanceof DomainError) || error.code !== 'object_not_found' || !access.restricted) throw error;
      const objects = await this.metadata.listObjects();
      throw objectNotFound(
        objectName,
        objects.map((o) => o.name).filter((name) => access.mayRead(name)),
      );
    }
  }

  /**
   * The objects the caller may read, each with the number of (non-system) fields it sees, which is what
   * describing the object shows: the one answer to "which objects may this caller see" (GET /objects,
   * list_objects, MCP resources). `mayUseObject` narrows further (an agent's allowedObjects).
   */
  async visibleObjects(
    caller: Caller | CallerAccess,
    mayUseObject: (name: string) => boolean = () => true,
  ): Promise<ObjectSummary[]> {
    const access = caller instanceof CallerAccess ? caller : await this.forCaller(caller);
    const objects = (await this.metadata.listObjects()).filter((o) => access.mayRead(o.name) && mayUseObject(o.name));
    if (!access.restricted) return objects;
    return Promise.all(
      objects.map(async (o) => ({
        ...o,
        fieldCount: (await this.view(access, o.name, 'read')).fields.filter((f) => !f.system).length,
      })),
    );
  }

  /**
   * The object as the caller may read it, for a description (GET /objects/:name, describe_object, MCP
   * resources): its read view, where a lookup into an object the caller may not read names no target.
   */
  async describe(caller: Caller | CallerAccess, objectName: string): Promise<ObjectMeta> {
    const access = caller instanceof CallerAccess ? caller : await this.forCaller(caller);
    return access.withoutUnreadableReferences(await this.view(access, objectName, 'read'));
  }

  /**
   * The one rule for definitions: a metric or a view is shown to (and usable by) the caller only when
   * it may read every object and see every field the definition uses, so a definition never tells what
   * the data would not (a hidden field's name, a filter on it, an object it may not read). Anything
   * else is absent, like an unknown name. `mayUseObject` narrows further (an agent's allowedObjects).
   * Each object is looked at once per lens.
   */
  async definitionLens(caller: Caller, mayUseObject: (name: string) => boolean = () => true): Promise<DefinitionLens> {
    const access = await this.forCaller(caller);
    const seen = new Map<string, Promise<Set<string> | undefined>>();
    const visibleFields = (name: string): Promise<Set<string> | undefined> => {
      let fields = seen.get(name);
      if (!fields) {
        fields = mayUseObject(name) ? this.visibleFieldNames(access, name) : Promise.resolve(undefined);
        seen.set(name, fields);
      }
      return fields;
    };
    return async (objects, uses) => {
      for (const name of objects) if (!(await visibleFields(name))) return false;
      for (const use of uses) {
        const dot = use.indexOf('.');
        const fields = dot > 0 ? await visibleFields(use.slice(0, dot)) : undefined;
        if (!fields?.has(use.slice(dot + 1))) return false;
      }
      return true;
    };
  }

  /**
   * Fields of `objectName` the caller may not see (empty when it sees them all, or may not read the
   * object at all): the audit trail drops their values from the arguments it stores.
   */
  async hiddenFields(caller: Caller, objectName: string): Promise<string[]> {
    const access = await this.forCaller(caller);
    if (!access.restricted) return [];
    let object: ObjectMeta;
    try {
      object = await this.metadata.getObject(objectName);
    } catch {
      return [];
    }
    const visible = access.describe(object, await this.catalog(object));
    if (!visible) return [];
    const shown = new Set(visible.fields.map((f) => f.name));
    return object.fields.map((f) => f.name).filter((name) => !shown.has(name));
  }

  /** The names of the object's fields the caller sees; undefined when the object is unknown or unreadable to it. */
  private async visibleFieldNames(access: CallerAccess, objectName: string): Promise<Set<string> | undefined> {
    let object: ObjectMeta;
    try {
      object = await this.metadata.getObject(objectName);
    } catch (error) {
      if (error instanceof DomainError && error.code === 'object_not_found') return undefined;
      throw error;
    }
    const visible = access.describe(object, await this.catalog(object));
    return visible && new Set(visible.fields.map((f) => f.name));
  }

  /**
   * The definitions of the objects `object`'s computed fields read, at any depth (a rollup's related
   * object, the fields that one's computed fields read, ...): what CallerAccess.view reads them through.
   */
  private async catalog(object: ObjectMeta): Promise<ObjectCatalog> {
    const objects = new Map<string, ObjectMeta>([[object.name, object]]);
    const pending = [object];
    while (pending.length) {
      for (const field of pending.pop()!.fields) {
        const target = field.related?.target;
        if (!target || objects.has(target)) continue;
        const meta = await this.metadata.getObject(target).catch(() => undefined);
        if (!meta) continue;
        objects.set(target, meta);
        pending.push(meta);
      }
    }
    return (name) => objects.get(name);
  }

  private loadKey(keyId: string): Promise<Caller | null> {
    return this.apiKeys.activeCaller(keyId);
  }

  private async load(caller: Caller): Promise<CallerAccess> {
    const key = await this.apiKeys.accessInputs(caller.keyId);
    if (!key) return CallerAccess.fromPolicies([], caller.subject, {}); // gone since it authenticated: nothing
    const names = key.policies ?? [];
    // A member user whose claims bring no policy reads nothing: an identity provider's every user is not meant to see all.
    if (!names.length && key.kind === 'user' && caller.role !== 'admin') return CallerAccess.fromPolicies([], key.subject, {});
    if (!names.length) return CallerAccess.unrestricted();
    const policies = await this.em.fork().find(AccessPolicyEntity, { name: { $in: names } });
    // A name that no longer resolves grants nothing; the remaining policies still restrict the key.
    return CallerAccess.fromPolicies(
      policies.map((p) => ({ name: p.name, objects: p.objects })),
      key.subject,
      key.attributes ?? {},
    );
  }
}

/** The caller, unless it is missing (revoked, unknown) or no longer runs as `expected`: then `key_revoked`. */
function checkedCaller(caller: Caller | null, expected?: Partial<Pick<Caller, 'role' | 'subject' | 'owner'>>): Caller {
  if (!caller) throw keyRevoked('was revoked');
  const differs = (field: 'role' | 'subject' | 'owner') => expected?.[field] !== undefined && expected[field] !== caller[field];
  if (differs('owner') || differs('subject') || differs('role')) throw keyRevoked('now acts for another subject or role');
  return caller;
}

function keyRevoked(what: string): DomainError {
  return new DomainError('key_revoked', `The API key this turn runs as ${what}; send the message again with an active key`);
}
