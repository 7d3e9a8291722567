import { defineEntity, InferEntity, p } from '@mikro-orm/core';
import type { PolicyObjects } from './access-policy.types';

/** An access policy: per object, the actions it grants, a row filter and hidden fields. */
export const AccessPolicyEntity = defineEntity({
  name: 'AccessPolicy',
  tableName: 'access_policies',
  properties: {
    id: p.uuid().primary(),
    name: p.string().unique(),
    description: p.text().nullable(),
    objects: p.json<PolicyObjects>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type AccessPolicyRow = InferEntity<typeof AccessPolicyEntity>;
