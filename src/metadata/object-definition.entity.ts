import { defineEntity, InferEntity, p } from '@mikro-orm/core';

/** Metadata of an object: one physical table `data.<name>`. */
export const ObjectDefinitionEntity = defineEntity({
  name: 'ObjectDefinition',
  tableName: 'object_definitions',
  properties: {
    id: p.uuid().primary(),
    name: p.string().unique(),
    label: p.string(),
    description: p.text().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type ObjectDefinition = InferEntity<typeof ObjectDefinitionEntity>;

/** Metadata of one field: one typed column of its object's table. */
export const FieldDefinitionEntity = defineEntity({
  name: 'FieldDefinition',
  tableName: 'field_definitions',
  properties: {
    id: p.uuid().primary(),
    objectId: p.uuid(),
    name: p.string(),
    label: p.string(),
    type: p.string(),
    required: p.boolean().default(false),
    unique: p.boolean().default(false),
    indexed: p.boolean().default(false),
    /** Searched by `?q=`, with a trigram index over its accent-folded text. */
    searchable: p.boolean().default(false),
    description: p.text().nullable(),
    options: p.json<string[]>().nullable(),
    /** Target object name of a lookup. */
    reference: p.string().nullable(),
    /** Formula fields: the expression as written, and the type of its value. */
    expression: p.text().nullable(),
    resultType: p.string().nullable(),
    /** Rollup, count and lookup_value fields: the definition (metadata/computed-fields.ts StoredRelated). */
    computed: p.json<Record<string, unknown>>().nullable(),
    position: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type FieldDefinition = InferEntity<typeof FieldDefinitionEntity>;
