import { DomainError } from '../common/domain-error';
import type { ApiKeyRole, KeyAttributes } from './api-key.entity';

/**
 * How the claims of an identity provider's token become a principal of this server: which claim names
 * the user, which claims fill `$attr.<name>`, which values of the group claim make an admin, and which
 * policies each group value brings.
 */
export interface IdentityMapping {
  /** The claim (path) naming the user: its value is the subject (`$subject`, chat ownership). */
  subject: string;
  /** Attribute name → claim path; claims that are absent or not a string or number are left out. */
  attributes: Record<string, string>;
  /** Group values that make the user an admin; everyone else is a member. */
  role: { admin: string[] };
  /** Group value → the access policies it brings (the user runs under the union). */
  policies: Record<string, string[]>;
  /** The claim (path) holding the user's group values: a list of strings, or one string. */
  claim: string;
}

/** What a user runs as, from one token's claims. */
export interface UserIdentity {
  subject: string;
  role: ApiKeyRole;
  policies: string[];
  attributes: KeyAttributes;
}

export const DEFAULT_IDENTITY_MAPPING: IdentityMapping = Object.freeze({
  subject: 'sub',
  attributes: {},
  role: { admin: [] },
  policies: {},
  claim: 'groups',
});

/** Longest subject (the column's width). */
const MAX_SUBJECT_LENGTH = 255;
const MAX_ATTRIBUTE_LENGTH = 255;
const ATTRIBUTE_NAME = /^[a-zA-Z][a-zA-Z0-9_]{0,62}$/;
const POLICY_NAME = /^[a-z][a-z0-9_-]{0,62}$/;
const MAX_ENTRIES = 200;

/**
 * The value at a claim path: the claim of exactly that name first (providers namespace custom claims as
 * URLs, dots included, e.g. `https://example.com/region`), else the path's dot-separated steps.
 */
export function claimAt(claims: Record<string, unknown>, path: string): unknown {
  if (Object.hasOwn(claims, path)) return claims[path];
  let value: unknown = claims;
  for (const step of path.split('.')) {
    if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, step)) return undefined;
    value = (value as Record<string, unknown>)[step];
  }
  return value;
}

/** The user a token names under the mapping; undefined when its subject claim is missing or unusable. */
export function mapClaims(mapping: IdentityMapping, claims: Record<string, unknown>): UserIdentity | undefined {
  const subject = claimAt(claims, mapping.subject);
  const text = typeof subject === 'number' && Number.isSafeInteger(subject) ? String(subject) : subject;
  if (typeof text !== 'string' || !text || text.length > MAX_SUBJECT_LENGTH) return undefined;
  const groups = groupValues(claimAt(claims, mapping.claim));
  const role: ApiKeyRole = mapping.role.admin.some((value) => groups.has(value)) ? 'admin' : 'member';
  const policies = new Set<string>();
  for (const group of groups)
    for (const policy of Object.hasOwn(mapping.policies, group) ? mapping.policies[group] : []) policies.add(policy);
  const attributes: KeyAttributes = {};
  for (const [name, path] of Object.entries(mapping.attributes)) {
    const value = claimAt(claims, path);
    if (
      (typeof value === 'string' && value.length <= MAX_ATTRIBUTE_LENGTH) ||
      (typeof value === 'number' && Number.isFinite(value))
    ) {
      attributes[name] = value;
    }
  }
  return { subject: text, role, policies: [...policies].sort(), attributes };
}

function groupValues(value: unknown): Set<string> {
  if (typeof value === 'string') return new Set([value]);
  if (Array.isArray(value)) return new Set(value.filter((item): item is string => typeof item === 'string'));
  return new Set();
}

/**
 * A mapping as an admin sent it, checked and completed with the defaults (`validation_failed` naming the
 * first bad part). Whether the policies exist is checked by the caller, which can see them.
 */
export function parseIdentityMapping(input: Record<string, unknown>): IdentityMapping {
  const invalid = (message: string) => new DomainError('validation_failed', `Identity mapping: ${message}`);
  const path = (value: unknown, what: string, fallback?: string): string => {
    if (value === undefined && fallback !== undefined) return fallback;
    if (typeof value !== 'string' || !value.trim() || value.length > 255) throw invalid(`${what} must be a claim name or path`);
    return value;
  };
  const record = (value: unknown, what: string): Record<string, unknown> => {
    if (value === undefined) return {};
    if (!value || typeof value !== 'object' || Array.isArray(value)) throw invalid(`${what} must be an object`);
    if (Object.keys(value).length > MAX_ENTRIES) throw invalid(`${what} has more than ${MAX_ENTRIES} entries`);
    return value as Record<string, unknown>;
  };
  const strings = (value: unknown, what: string, pattern?: RegExp): string[] => {
    if (!Array.isArray(value) || value.length > MAX_ENTRIES) throw invalid(`${what} must be a list of strings`);
    for (const item of value) {
      if (typeof item !== 'string' || !item || item.length > 255 || (pattern && !pattern.test(item))) {
        throw invalid(`${what} must be a list of ${pattern ? 'policy names' : 'strings'}`);
      }
    }
    return [...new Set(value as string[])];
  };
  const known = new Set(['subject', 'attributes', 'role', 'policies', 'claim']);
  const unknown = Object.keys(input).find((key) => !known.has(key));
  if (unknown !== undefined) throw invalid(`unknown property "${unknown.slice(0, 100)}"`);

  // Object.fromEntries defines own properties: a group value named "__proto__" stays a plain key.
  const attributes = Object.fromEntries(
    Object.entries(record(input.attributes, 'attributes')).map(([name, claim]) => {
      if (!ATTRIBUTE_NAME.test(name)) throw invalid(`attribute name "${name.slice(0, 100)}" must be letters, digits or _`);
      return [name, path(claim, `attributes.${name}`)];
    }),
  );
  const role = record(input.role, 'role');
  const roleKey = Object.keys(role).find((key) => key !== 'admin');
  if (roleKey !== undefined) throw invalid(`role maps only "admin" (everyone else is a member), not "${roleKey.slice(0, 100)}"`);
  const policies = Object.fromEntries(
    Object.entries(record(input.policies, 'policies')).map(([value, names]) => [
      value,
      strings(names, `policies["${value.slice(0, 100)}"]`, POLICY_NAME),
    ]),
  );
  return {
    subject: path(input.subject, 'subject', DEFAULT_IDENTITY_MAPPING.subject),
    attributes,
    role: { admin: role.admin === undefined ? [] : strings(role.admin, 'role.admin') },
    policies,
    claim: path(input.claim, 'claim', DEFAULT_IDENTITY_MAPPING.claim),
  };
}

/** Every policy a mapping names (to check they exist). */
export function mappedPolicies(mapping: IdentityMapping): string[] {
  return [...new Set(Object.values(mapping.policies).flat())];
}
