/** What one policy grants on one object (or on every object, under `*`). */
export interface PolicyObjectGrant {
  read?: boolean;
  create?: boolean;
  update?: boolean;
  delete?: boolean;
  /** A `where` (see data/where.compiler.ts) with `$subject` and `$attr.<name>`; absent: every row. */
  rowFilter?: Record<string, unknown>;
  /** Fields the key neither reads nor writes: they behave as if the object did not have them. */
  hiddenFields?: string[];
}

/** Object name (or `*`) → grant. A named object's entry replaces `*` for it. */
export type PolicyObjects = Record<string, PolicyObjectGrant>;

export const ALL_OBJECTS = '*';

export const ACCESS_ACTIONS = ['read', 'create', 'update', 'delete'] as const;
export type AccessAction = (typeof ACCESS_ACTIONS)[number];

/** A policy as a key's access is compiled from it. */
export interface AccessPolicy {
  name: string;
  objects: PolicyObjects;
}

/** Event telling every replica to drop the access it compiled for keys (a policy or a key changed). */
export { ACCESS_CHANGED } from '../auth/access-changed';

/** Most objects one policy names; most hidden fields per object. */
export const MAX_POLICY_OBJECTS = 200;
export const MAX_HIDDEN_FIELDS = 500;
