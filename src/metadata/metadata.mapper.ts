import { computedKind, describeComputed } from './computed-fields';
import { FieldResponse, ObjectResponse } from './metadata.dto';
import { FieldMeta, FieldType, ObjectMeta } from './object-metadata.types';

export function toFieldResponse(field: FieldMeta): FieldResponse {
  const response: FieldResponse = {
    name: field.name,
    label: field.label,
    type: computedKind(field) ?? (field.type as FieldType),
    required: field.required,
    unique: field.unique,
    indexed: field.indexed,
    searchable: field.searchable === true,
  };
  if (field.description) response.description = field.description;
  if (field.options) response.options = field.options;
  if (field.reference) response.reference = field.reference;
  Object.assign(response, describeComputed(field));
  return response;
}

/** The admin view of an object: its own fields, without the system columns. */
export function toObjectResponse(object: ObjectMeta): ObjectResponse {
  return {
    name: object.name,
    label: object.label,
    description: object.description ?? null,
    fields: object.fields.filter((f) => !f.system).map(toFieldResponse),
  };
}
