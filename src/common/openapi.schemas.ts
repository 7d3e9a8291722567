import type { ReferenceObject, SchemaObject } from '@nestjs/swagger';

/**
 * Schemas the OpenAPI document names once and DTOs point at with {@link schemaRef}: values whose
 * shape comes from metadata (a record, a where filter) and so cannot be a DTO class. The types
 * of a `oneOf` never overlap (number, not integer beside it), so any value matches exactly one.
 */

/** Any JSON object, e.g. a tool's arguments or a JSON Schema. */
export const JSON_OBJECT: SchemaObject = { type: 'object', additionalProperties: true };

/**
 * The JSON types, one member each. OpenAPI 3.0 has no null type and wants `nullable` beside a
 * `type`, so null rides on the string member: it still matches exactly one member.
 */
const JSON_TYPES: SchemaObject[] = [
  { type: 'string', nullable: true },
  { type: 'number' },
  { type: 'boolean' },
  { type: 'array', items: {} },
  JSON_OBJECT,
];

/** Any JSON value, null included. */
export const JSON_VALUE = { oneOf: JSON_TYPES };

/** The operators of the where language and the value each takes. */
const WHERE_OPERATORS: Record<string, SchemaObject | ReferenceObject> = {
  $eq: { $ref: '#/components/schemas/FieldValue' },
  $ne: { $ref: '#/components/schemas/FieldValue' },
  $gt: { $ref: '#/components/schemas/FieldValue' },
  $gte: { $ref: '#/components/schemas/FieldValue' },
  $lt: { $ref: '#/components/schemas/FieldValue' },
  $lte: { $ref: '#/components/schemas/FieldValue' },
  $in: { type: 'array', items: { $ref: '#/components/schemas/FieldValue' } },
  $nin: { type: 'array', items: { $ref: '#/components/schemas/FieldValue' } },
  $between: { type: 'array', items: { $ref: '#/components/schemas/FieldValue' }, minItems: 2, maxItems: 2 },
  $contains: { type: 'string' },
  $notContains: { type: 'string' },
  $startsWith: { type: 'string' },
  $endsWith: { type: 'string' },
  $null: { type: 'boolean', description: 'true: the field is empty; false: it has a value' },
};

export const SHARED_SCHEMAS = {
  FieldValue: {
    description:
      'The value of one record field, by field type: text types, date (YYYY-MM-DD), datetime (ISO 8601) and ' +
      'integers beyond 2^53 as strings; number, currency, percent and integer as numbers; boolean; multiselect as ' +
      'an array of strings; json as any JSON; null when empty',
    oneOf: JSON_TYPES,
  },
  RecordResponse: {
    type: 'object',
    description: "One record: id, timestamps and the object's own fields (or those a `fields` projection kept)",
    required: ['id'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      created_at: { type: 'string', format: 'date-time' },
      updated_at: { type: 'string', format: 'date-time' },
    },
    additionalProperties: { $ref: '#/components/schemas/FieldValue' },
    example: { id: '0b5f4f0e-6a8e-4c1e-9a57-3f0c1f6f1d2a', name: 'Acme', stage: 'won', amount: 1200 },
  },
  RecordInput: {
    type: 'object',
    description: 'Field values by field name; system fields (id, created_at, updated_at) are read-only',
    additionalProperties: { $ref: '#/components/schemas/FieldValue' },
    example: { name: 'Acme', stage: 'won', amount: 1200 },
  },
  Where: {
    type: 'object',
    description:
      'A filter: `{ "field": value }` (equality) or `{ "field": { "$op": value } }`, combined with `$and`, `$or` and ' +
      '`$not`; several keys in one object must all hold',
    properties: {
      $and: { type: 'array', items: { $ref: '#/components/schemas/Where' }, minItems: 1 },
      $or: { type: 'array', items: { $ref: '#/components/schemas/Where' }, minItems: 1 },
      $not: { $ref: '#/components/schemas/Where' },
    },
    additionalProperties: { $ref: '#/components/schemas/WhereCondition' },
    example: { stage: 'won', amount: { $gt: 1000 } },
  },
  WhereCondition: {
    description: 'The condition on one field: a value (equality; null = empty), or operators and their values',
    oneOf: [
      { type: 'string', nullable: true },
      { type: 'number' },
      { type: 'boolean' },
      { type: 'array', items: { $ref: '#/components/schemas/FieldValue' }, description: 'multiselect: exactly these options' },
      { type: 'object', properties: WHERE_OPERATORS, additionalProperties: false, minProperties: 1 },
    ],
  },
} satisfies Record<string, SchemaObject>;

export type SharedSchemaName = keyof typeof SHARED_SCHEMAS;

/** A reference to one of {@link SHARED_SCHEMAS}, for `@ApiProperty({ ...schemaRef('Where') })` or a response. */
export function schemaRef(name: SharedSchemaName): ReferenceObject {
  return { $ref: `#/components/schemas/${name}` };
}
