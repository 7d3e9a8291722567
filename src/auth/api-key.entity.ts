import { defineEntity, InferEntity, type Opt, p } from '@mikro-orm/core';

/** An API key. Only a SHA-256 hash of the secret is stored; the secret is shown once, at creation. */
export const ApiKeyEntity = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.uuid().primary(),
    name: p.string(),
    /** First characters of the secret, so people can tell keys apart in listings. */
    prefix: p.string(),
    /** Null for a user: no secret authenticates as one. */
    secretHash: p.string().nullable().unique(),
    /** `key`: authenticates by its secret; `user`: a person of `issuer`, authenticated by that issuer's tokens. */
    kind: p.string().$type<PrincipalKind>().default('key'),
    /** The token issuer of a user; null for a key. */
    issuer: p.string().nullable(),
    role: p.string().$type<ApiKeyRole>(),
    /** Who the key acts for: what row filters read as `$subject`. */
    subject: p.string(),
    /**
     * What owns its chats: a key's subject, a user's issuer and subject (see Caller). Computed by the
     * database from kind, issuer and subject (a generated column), never written.
     */
    owner: p
      .string()
      .$type<Opt<string>>()
      .generated(`(case when "kind" = 'user' then 'oidc:' || "issuer" || '#' || "subject" else "subject" end) stored`),
    /** Names of the access policies the key runs under; none: every member right (see governance/). */
    policies: p.json<string[]>(),
    /** Values row filters read as `$attr.<name>`. */
    attributes: p.json<KeyAttributes>(),
    /** Model tokens the key may use per UTC day, overriding QUOTA_TOKENS_PER_KEY_DAY; null: that default. */
    tokensPerDay: p.integer().nullable(),
    revoked: p.boolean().default(false),
    createdAt: p.datetime(),
  },
});
export type ApiKey = InferEntity<typeof ApiKeyEntity>;

export type PrincipalKind = 'key' | 'user';

export const API_KEY_ROLES = ['admin', 'member'] as const;
export type ApiKeyRole = (typeof API_KEY_ROLES)[number];

/** Per-key values a policy's row filter can name (`$attr.region`). */
export type KeyAttributes = Record<string, string | number>;
