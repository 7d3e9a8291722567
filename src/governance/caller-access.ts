import { createHash } from 'node:crypto';
import { DomainError } from '../common/domain-error';
import { canonicalJson } from '../common/canonical-json';
import { computedView, type FieldLens, isComputed } from '../metadata/computed-fields';
import type { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import type { ApiKeyRole, KeyAttributes } from '../auth/api-key.entity';
import { ALL_OBJECTS, type AccessAction, type AccessPolicy, type PolicyObjectGrant } from './access-policy.types';

type Filters = Record<string, unknown>[];

/** The definitions of the objects a view may need (those its computed fields read), by name. */
export type ObjectCatalog = (objectName: string) => ObjectMeta | undefined;

/** What a key's policies, taken together, allow on one object. */
interface ObjectGrants {
  /** Per action: `true` for every row, the filters of the granting policies, or absent (not granted). */
  actions: Partial<Record<AccessAction, true | Record<string, unknown>[]>>;
  /** Fields hidden by every policy that grants read. */
  hidden: Set<string>;
}

/**
 * A key's access, compiled once from its policies (see AccessService, which caches it per key): which
 * objects it may read and write, the rows (row filters, resolved with the key's subject and
 * attributes), and the fields it may see. `view()` gives the data engine the caller's view of an
 * object; everything above the engine sees only that view.
 *
 * Policies add up: an action is allowed when any policy grants it; a row is visible when any granting
 * policy's filter matches it; a field is hidden only when every policy granting read hides it.
 */
export class CallerAccess {
  private readonly grants = new Map<string, ObjectGrants | null>();
  private readonly fingerprints = new Map<ApiKeyRole, string>();

  private constructor(
    private readonly policies: readonly AccessPolicy[] | null,
    private readonly subject: string,
    private readonly attributes: KeyAttributes,
  ) {}

  /** A key without policies (or the server itself): every object, row and field. */
  static unrestricted(): CallerAccess {
    return new CallerAccess(null, '', {});
  }

  static fromPolicies(policies: readonly AccessPolicy[], subject: string, attributes: KeyAttributes): CallerAccess {
    return new CallerAccess(policies, subject, attributes);
  }

  get restricted(): boolean {
    return this.policies !== null;
  }

  /** Whether the object exists for this caller at all (lists, descriptions, `object_not_found`). */
  mayRead(objectName: string): boolean {
    return !this.policies || this.grantsFor(objectName)?.actions.read !== undefined;
  }

  /**
   * The caller's view of `object` for `action`: the fields it may see (hidden ones removed, so they
   * are `unknown_field` everywhere) and the rows it may touch (`rowFilter`, ANDed into every
   * statement by the compilers). An object it may not read is `object_not_found`; an action it is
   * not granted on a readable object is `forbidden`.
   */
  view(object: ObjectMeta, action: AccessAction, catalog?: ObjectCatalog): ObjectMeta {
    const lens = this.lens(object, catalog);
    if (!this.policies) {
      // Every field is visible; computed ones still get their view of the objects they read.
      if (!object.fields.some(isComputed)) return object;
      return { ...object, fields: object.fields.map((f) => lens.field(object.name, f.name)).filter((f) => f !== null) };
    }
    const grants = this.grantsFor(object.name);
    if (!grants?.actions.read) throw objectNotFound(object.name, []);
    const granted = grants.actions[action];
    if (!granted) {
      throw new DomainError('forbidden', `This API key may not ${action} "${object.name}" records`, {
        object: object.name,
        action,
      });
    }
    // A computed field that reads a hidden field (at any depth, on any object) is hidden too: its value would tell it.
    const fields = object.fields.map((f) => lens.field(object.name, f.name)).filter((f) => f !== null);
    const view: ObjectMeta = { ...object, fields };
    const filters = rowsFor(grants.actions.read, granted);
    if (filters !== true) {
      view.rowFilter = { object, filters, subject: this.subject, attributes: this.attributes };
    }
    return view;
  }

  /**
   * Every field as this caller reads it (null: hidden, or on an object it may not read), computed fields
   * through their kind's access rule (metadata/computed-fields.ts): one lens per view, fields memoised.
   * Objects come from `catalog`; one missing there reads as unreadable (fails closed).
   */
  private lens(object: ObjectMeta, catalog?: ObjectCatalog): FieldLens {
    const memo = new Map<string, FieldMeta | null>();
    const objectOf = (name: string) => (name === object.name ? object : catalog?.(name));
    const lens: FieldLens = {
      field: (objectName, fieldName) => {
        const key = `${objectName}.${fieldName}`;
        if (memo.has(key)) return memo.get(key)!;
        // Marked hidden while resolving: a cycle (refused at definition) can only end hidden.
        memo.set(key, null);
        const source = this.mayRead(objectName) ? objectOf(objectName) : undefined;
        const field = source?.fields.find((f) => f.name === fieldName);
        let seen: FieldMeta | null = null;
        if (field && !(this.policies && this.grantsFor(objectName)?.hidden.has(fieldName))) {
          seen = isComputed(field) ? computedView(objectName, field, lens) : field;
        }
        memo.set(key, seen);
        return seen;
      },
      scope: (objectName, fields) => {
        const source = this.mayRead(objectName) ? objectOf(objectName) : undefined;
        if (!source) return null;
        const scope: ObjectMeta = { name: source.name, label: source.label, fields };
        const read = this.policies ? this.grantsFor(objectName)?.actions.read : true;
        if (!read) return null;
        if (read !== true)
          scope.rowFilter = { object: source, filters: read, subject: this.subject, attributes: this.attributes };
        return scope;
      },
    };
    return lens;
  }

  /** The object's fields as this caller sees them (describe_object, MCP resources), or undefined when it may not read it. */
  describe(object: ObjectMeta, catalog?: ObjectCatalog): ObjectMeta | undefined {
    if (!this.mayRead(object.name)) return undefined;
    return this.view(object, 'read', catalog);
  }

  /**
   * `view` with the target of each lookup into an object this caller may not read left out: a
   * description names no object the caller could not learn of from the data.
   */
  withoutUnreadableReferences(view: ObjectMeta): ObjectMeta {
    if (!this.policies || !view.fields.some((f) => f.reference && !this.mayRead(f.reference))) return view;
    const fields = view.fields.map((field) => {
      if (!field.reference || this.mayRead(field.reference)) return field;
      const described = { ...field };
      delete described.reference;
      return described;
    });
    return { ...view, fields };
  }

  /**
   * A stable hash of what this access lets a key of `role` see: the role, and each policy's object grants
   * with their row filters as they apply to this key (`$subject` and `$attr.<name>` resolved) and hidden
   * fields, as canonical JSON (policy names, key order and duplicates do not count). Two keys with the
   * same fingerprint see the same rows and fields; stored tool results carry the fingerprint of the
   * access they were produced under, and are withheld from a caller with another one.
   */
  fingerprint(role: ApiKeyRole): string {
    let fingerprint = this.fingerprints.get(role);
    if (fingerprint === undefined) {
      const grants = this.policies
        ? [...new Set(this.policies.map((policy) => canonicalJson(this.resolvedGrants(policy))))].sort()
        : null;
      fingerprint = createHash('sha256').update(canonicalJson({ role, grants })).digest('hex');
      this.fingerprints.set(role, fingerprint);
    }
    return fingerprint;
  }

  /** A policy's grants as they apply to this key: every action explicit, placeholders resolved, hidden fields sorted. */
  private resolvedGrants(policy: AccessPolicy): Record<string, unknown> {
    return Object.fromEntries(
      Object.entries(policy.objects).map(([object, grant]) => [
        object,
        {
          read: grant.read === true,
          create: grant.create === true,
          update: grant.update === true,
          delete: grant.delete === true,
          rowFilter: grant.rowFilter ? resolvePlaceholders(grant.rowFilter, this.subject, this.attributes) : null,
          hiddenFields: [...new Set(grant.hiddenFields ?? [])].sort(),
        },
      ]),
    );
  }

  private grantsFor(objectName: string): ObjectGrants | null {
    if (this.grants.has(objectName)) return this.grants.get(objectName)!;
    const compiled = compileGrants(this.policies ?? [], objectName);
    this.grants.set(objectName, compiled);
    return compiled;
  }
}

/**
 * The rows an action may touch: those its granting policies' filters match, and only among the rows
 * the caller may read (a key never changes a record it could not read). `true`: every row.
 */
function rowsFor(read: true | Filters, action: true | Filters): true | Filters {
  if (read === true || JSON.stringify(read) === JSON.stringify(action)) return action;
  if (action === true) return read;
  return [{ $and: [anyOf(read), anyOf(action)] }];
}

function anyOf(filters: Filters): Record<string, unknown> {
  return filters.length === 1 ? filters[0] : { $or: filters };
}

function compileGrants(policies: readonly AccessPolicy[], objectName: string): ObjectGrants | null {
  const entries = policies
    .map((policy) => ({ policy: policy.name, grant: ownEntry(policy, objectName) ?? ownEntry(policy, ALL_OBJECTS) }))
    .filter((entry): entry is { policy: string; grant: PolicyObjectGrant } => entry.grant !== undefined);
  if (!entries.length) return null;
  const actions: ObjectGrants['actions'] = {};
  let hidden: Set<string> | undefined;
  for (const { grant } of entries) {
    for (const action of ['read', 'create', 'update', 'delete'] as const) {
      if (grant[action] !== true) continue;
      const current = actions[action];
      if (current === true) continue;
      actions[action] = grant.rowFilter ? [...(current ?? []), grant.rowFilter] : true;
    }
    if (grant.read === true) {
      const own = new Set(grant.hiddenFields ?? []);
      hidden = hidden ? new Set([...hidden].filter((name) => own.has(name))) : own;
    }
  }
  hidden?.delete('id');
  return { actions, hidden: hidden ?? new Set() };
}

/**
 * A row filter's values with `$subject` and `$attr.<name>` replaced by the key's (an attribute it lacks
 * stays a marker: such a filter matches nothing, whatever else the key has).
 */
function resolvePlaceholders(value: unknown, subject: string, attributes: KeyAttributes): unknown {
  if (typeof value === 'string') {
    if (value === '$subject') return subject;
    if (value.startsWith('$attr.')) {
      const name = value.slice('$attr.'.length);
      return Object.hasOwn(attributes, name) ? attributes[name] : { $unresolved: value };
    }
    return value;
  }
  if (Array.isArray(value)) return value.map((item) => resolvePlaceholders(item, subject, attributes));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolvePlaceholders(v, subject, attributes)]));
  }
  return value;
}

/** The policy's own entry for `name` (never one inherited from Object.prototype). */
function ownEntry(policy: AccessPolicy, name: string): PolicyObjectGrant | undefined {
  return Object.hasOwn(policy.objects, name) ? policy.objects[name] : undefined;
}

/** The same error as for an object that does not exist, so a forbidden one does not reveal that it does. */
export function objectNotFound(objectName: string, availableObjects: string[]): DomainError {
  return new DomainError('object_not_found', `Object "${String(objectName)}" not found`, { availableObjects });
}
