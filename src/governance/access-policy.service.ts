import { EntityManager, UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { PgPubSub } from '../database/pg-pubsub.service';
import { ApiKeyService } from '../auth/api-key.service';
import { MetadataService } from '../metadata/metadata.service';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import { AccessPolicyEntity } from './access-policy.entity';
import { AuditLog, type AuditActor } from '../audit/audit-log.service';
import { CreatePolicyDto, PolicyListResponse, PolicyResponse, ReplacePolicyDto, toPolicyResponse } from './access-policy.dto';
import {
  ACCESS_ACTIONS,
  ACCESS_CHANGED,
  ALL_OBJECTS,
  MAX_HIDDEN_FIELDS,
  MAX_POLICY_OBJECTS,
  type PolicyObjectGrant,
  type PolicyObjects,
} from './access-policy.types';

const GRANT_KEYS = new Set<string>([...ACCESS_ACTIONS, 'rowFilter', 'hiddenFields']);

/**
 * The data engine's checks of a grant against its object: a row filter must compile (its placeholders
 * are resolved per key later) and a hidden field must exist; each throws the engine's error. The data
 * module, which applies policies and so sits above governance, registers them (useChecks).
 */
export interface PolicyChecks {
  rowFilter(object: ObjectMeta, where: unknown): void;
  field(object: ObjectMeta, name: string): void;
}

/** Admin CRUD of access policies. Every write tells every replica to recompile the keys' access. */
@Injectable()
export class AccessPolicyService {
  constructor(
    private readonly em: EntityManager,
    private readonly pubsub: PgPubSub,
    private readonly metadata: MetadataService,
    private readonly audit: AuditLog,
    private readonly apiKeys: ApiKeyService,
  ) {
    apiKeys.usePolicyNames(async (em, names) =>
      (await em.find(AccessPolicyEntity, { name: { $in: names } }, { fields: ['name'] })).map((policy) => policy.name),
    );
  }

  private checks?: PolicyChecks;

  useChecks(checks: PolicyChecks): void {
    this.checks = checks;
  }

  private get check(): PolicyChecks {
    if (!this.checks) throw new Error('No policy checks registered: the data module is not loaded');
    return this.checks;
  }

  async create(dto: CreatePolicyDto, actor?: AuditActor): Promise<PolicyResponse> {
    const objects = await this.validateObjects(dto.objects);
    try {
      return await this.em.fork().transactional(async (em) => {
        const now = new Date();
        const row = em.create(AccessPolicyEntity, {
          id: randomUUID(),
          name: dto.name,
          description: dto.description ?? null,
          objects,
          createdAt: now,
          updatedAt: now,
        });
        await em.persist(row).flush();
        await this.audit.admin(em, actor, 'policy.create', row.name);
        return toPolicyResponse(row);
      });
    } catch (error) {
      if (error instanceof UniqueConstraintViolationException) {
        throw new DomainError('policy_exists', `Policy "${dto.name}" already exists`);
      }
      throw error;
    }
  }

  async list(): Promise<PolicyListResponse> {
    const rows = await this.em.fork().find(AccessPolicyEntity, {}, { orderBy: { name: 'asc' } });
    return { policies: rows.map(toPolicyResponse) };
  }

  async get(name: string): Promise<PolicyResponse> {
    return toPolicyResponse(await this.find(this.em.fork(), name));
  }

  async replace(name: string, dto: ReplacePolicyDto, actor?: AuditActor): Promise<PolicyResponse> {
    const objects = await this.validateObjects(dto.objects);
    const response = await this.em.fork().transactional(async (em) => {
      const row = await this.find(em, name);
      row.description = dto.description ?? null;
      row.objects = objects;
      row.updatedAt = new Date();
      await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
      await this.audit.admin(em, actor, 'policy.update', row.name);
      return toPolicyResponse(row);
    });
    // This replica applies it at once; the others when the notification arrives.
    this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
    return response;
  }

  /** Refused while a key runs under the policy: without it that key could silently get every member right. */
  async delete(name: string, actor?: AuditActor): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const row = await this.find(em, name);
      const count = await this.apiKeys.countActiveWithPolicy(em, row.name);
      if (count > 0) {
        throw new DomainError('policy_in_use', `Policy "${row.name}" is given to ${count} API key(s); take it from them first`, {
          keys: count,
        });
      }
      em.remove(row);
      await this.pubsub.publish({ type: ACCESS_CHANGED }, em);
      await this.audit.admin(em, actor, 'policy.delete', row.name);
    });
    this.pubsub.deliverLocally({ type: ACCESS_CHANGED });
  }

  private async find(em: EntityManager, name: string): Promise<InstanceType<typeof AccessPolicyEntity.class>> {
    const row = typeof name === 'string' && name.length <= 63 ? await em.findOne(AccessPolicyEntity, { name }) : null;
    if (!row) throw new DomainError('policy_not_found', `Policy "${String(name).slice(0, 100)}" not found`);
    return row;
  }

  /** Objects and fields must exist; row filters must compile (their placeholders are resolved per key later). */
  private async validateObjects(input: unknown): Promise<PolicyObjects> {
    if (!isPlainObject(input)) throw invalid('objects must be an object of object name → grant');
    const entries = Object.entries(input);
    if (entries.length > MAX_POLICY_OBJECTS) throw invalid(`A policy names at most ${MAX_POLICY_OBJECTS} objects`);
    const grants: [string, PolicyObjectGrant][] = [];
    for (const [name, grant] of entries) grants.push([name, await this.validateGrant(name, grant)]);
    // fromEntries defines own properties: a name like __proto__ cannot reach the prototype.
    return Object.fromEntries(grants);
  }

  private async validateGrant(objectName: string, input: unknown): Promise<PolicyObjectGrant> {
    const path = `objects.${objectName.slice(0, 100)}`;
    if (!isPlainObject(input)) throw invalid(`${path} must be an object like {"read": true}`);
    for (const key of Object.keys(input)) {
      if (!GRANT_KEYS.has(key))
        throw invalid(`${path} has an unknown key "${key.slice(0, 100)}"; use ${[...GRANT_KEYS].join(', ')}`);
    }
    const grant: PolicyObjectGrant = {};
    for (const action of ACCESS_ACTIONS) {
      const value = input[action];
      if (value === undefined) continue;
      if (typeof value !== 'boolean') throw invalid(`${path}.${action} must be true or false`);
      grant[action] = value;
    }
    const object =
      objectName === ALL_OBJECTS
        ? undefined
        : await this.metadata.getObject(objectName).catch((error: unknown) => {
            if (error instanceof DomainError && error.code === 'object_not_found') {
              throw invalid(`Unknown object "${objectName.slice(0, 100)}" in objects`, { object: objectName.slice(0, 100) });
            }
            throw error;
          });
    if (input.rowFilter !== undefined) {
      if (!isPlainObject(input.rowFilter)) throw invalid(`${path}.rowFilter must be a where object`);
      // Under "*", fields differ per object: a filter that does not fit an object matches none of its rows.
      if (object) this.check.rowFilter(object, input.rowFilter);
      grant.rowFilter = input.rowFilter;
    }
    if (input.hiddenFields !== undefined) {
      const hidden = input.hiddenFields;
      if (!Array.isArray(hidden) || hidden.some((f) => typeof f !== 'string') || hidden.length > MAX_HIDDEN_FIELDS) {
        throw invalid(`${path}.hiddenFields must be an array of at most ${MAX_HIDDEN_FIELDS} field names`);
      }
      for (const field of hidden as string[]) {
        if (field === 'id') throw invalid(`${path}.hiddenFields cannot hide "id"`);
        if (object) this.check.field(object, field);
      }
      grant.hiddenFields = [...new Set(hidden as string[])];
    }
    return grant;
  }
}

function invalid(message: string, details?: Record<string, unknown>): DomainError {
  return new DomainError('invalid_policy', message, details);
}
