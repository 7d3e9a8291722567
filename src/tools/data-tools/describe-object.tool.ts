import { computedKind, describeComputed, explainComputed } from '../../metadata/computed-fields';
import { fieldTypeHints } from '../../metadata/field-types';
import type { FieldMeta, ObjectMeta } from '../../metadata/object-metadata.types';
import { defineTool } from '../tool.define';
import type { ToolDefinition } from '../tool.types';
import { accessOf, DataToolDeps, OBJECT_NAME_PARAM, shapeErrors } from './data-tool.support';

export interface DescribeObjectArgs {
  objectName: string;
}

export interface DescribedField {
  name: string;
  label: string;
  type: string;
  required: boolean;
  description?: string;
  options?: string[];
  reference?: string;
  /** Set by the server (id, created_at, updated_at): readable, filterable and sortable. */
  system?: true;
  /** A formula field (type `formula`): computed when read from this expression; read-only. */
  expression?: string;
  /** A computed field: the type of its value (how to filter, sort and aggregate it). */
  resultType?: string;
  /** rollup and count: the related records, "<object>.<its lookup pointing here>" or a links field of this object. */
  relation?: string;
  /** rollup: how the related values are combined. */
  function?: string;
  /** rollup: the related object's field; lookup_value: the linked record's field. */
  field?: string;
  /** rollup and count: only the related records this where matches. */
  filter?: Record<string, unknown>;
  /** lookup_value: the lookup field whose record's value it shows. */
  through?: string;
  /** links: the links field of the `reference` object holding the same pairs the other way. */
  inverse?: string;
  /** rollup, count, lookup_value and links: how the value is computed, in a sentence. */
  computed?: string;
}

export interface DescribeObjectResult {
  name: string;
  label: string;
  description: string | null;
  fields: DescribedField[];
}

export function createDescribeObjectTool(deps: DataToolDeps): ToolDefinition<DescribeObjectArgs> {
  return defineTool<DescribeObjectArgs>({
    name: 'describe_object',
    description:
      'Describe one object: every field with its name, label, type, ' +
      'whether it is required, the allowed options of select fields and the object a lookup field points to. ' +
      `Types and how their values are written: ${fieldTypeHints()}. ` +
      'A formula field (type formula) shows its expression and resultType: it is computed when read, read-only, and ' +
      'filtered, sorted and aggregated as a field of its resultType. ' +
      'A rollup (relation, function, field, filter), count (relation, filter) or lookup_value (through, field) is ' +
      'computed when read from the related records the caller may read (the computed text says how); read-only, ' +
      'used like a field of its resultType (e.g. sort accounts by a rollup). ' +
      'A links field (type links, with reference and maybe inverse) holds the ids of the linked reference records ' +
      '(many to many) the caller may read; filter it with $null, $contains or $in; a rollup or count may name it as relation. ' +
      'System fields id, created_at and updated_at are included (marked system) and can be filtered and sorted on. ' +
      'Call this before query_records, get_record or aggregate_data to use exact field names and option values.',
    parameters: {
      type: 'object',
      properties: { objectName: OBJECT_NAME_PARAM },
      required: ['objectName'],
      additionalProperties: false,
    },
    scope: 'agent',
    async execute(args, ctx): Promise<DescribeObjectResult> {
      // Definitions come from the metadata cache (or the ORM), never from the data pool.
      const access = await accessOf(deps, ctx);
      return describeObjectMeta(await shapeErrors(ctx, () => deps.access.describe(access, args.objectName)));
    },
  });
}

/** An object as describe_object returns it (and MCP hosts read it as a resource): no storage details. */
export function describeObjectMeta(object: ObjectMeta): DescribeObjectResult {
  return {
    name: object.name,
    label: object.label,
    description: object.description ?? null,
    fields: object.fields.map(describeField),
  };
}

function describeField(field: FieldMeta): DescribedField {
  const out: DescribedField = {
    name: field.name,
    label: field.label,
    type: computedKind(field) ?? field.type,
    required: field.required,
  };
  Object.assign(out, describeComputed(field));
  const explained = explainComputed(field);
  if (explained && field.related) out.computed = explained;
  if (field.description) out.description = field.description;
  if (field.options) out.options = field.options;
  if (field.reference) out.reference = field.reference;
  if (field.system) out.system = true;
  return out;
}
