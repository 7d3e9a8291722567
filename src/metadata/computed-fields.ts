import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { formulaInputs } from './formula';
import {
  type FieldMeta,
  type FieldType,
  NUMERIC_TYPES,
  type ObjectMeta,
  RELATED_KINDS,
  type RelatedKind,
  type RelatedMeta,
  ROLLUP_FUNCTIONS,
  type RollupFunction,
  TEMPORAL_TYPES,
  TEXT_TYPES,
} from './object-metadata.types';

/**
 * Computed fields, one entry per kind: `formula` (an expression over the record's fields), `rollup` and
 * `count` (over the records of another object whose lookup points here) and `lookup_value` (a field of
 * the record a lookup points at). None has a column; each is computed when read, as one SQL expression
 * wherever a field is used. Each entry holds what the rest of the engine asks of a kind:
 *
 * - `define`: the definition checked (400 with a code) and turned into its metadata;
 * - `inputs`: the fields it reads (`object.field`), for cycles and for `field_in_use`;
 * - `view`: the access rule: the caller's view of the field, or null when hidden;
 * - `sql`: its SQL, from the primitives the data engine passes (its one where compiler and field compiler);
 * - `describe`: what the admin API and the tools show of its definition.
 *
 * The formula language itself lives in formula.ts (parser, checker) and data/formula.compiler.ts (SQL).
 * A `links` relation (many to many) would be one more kind of `relation` here: a join table in `sql` and
 * the link's two lookups in `inputs`.
 */

export type ComputedKind = 'formula' | RelatedKind;

/** The definition's kind, or undefined for a stored field. */
export function computedKind(field: Pick<FieldMeta, 'formula' | 'related'>): ComputedKind | undefined {
  if (field.formula) return 'formula';
  return field.related?.kind;
}

/** A field with no column: never written, computed when read. */
export function isComputed(field: Pick<FieldMeta, 'formula' | 'related'>): boolean {
  return computedKind(field) !== undefined;
}

export function isRelatedKind(type: unknown): type is RelatedKind {
  return (RELATED_KINDS as readonly unknown[]).includes(type);
}

// ---------------------------------------------------------------- definitions

/** The definition of a rollup, count or lookup_value field as written (the create DTO's properties). */
export interface RelatedDefinition {
  name: string;
  type: RelatedKind;
  relation?: string;
  through?: string;
  field?: string;
  function?: string;
  filter?: unknown;
  stored?: boolean;
}

/** What is kept of a definition (field_definitions.computed): enough to rebuild RelatedMeta without other objects. */
export interface StoredRelated {
  relation?: string;
  through?: string;
  field?: string;
  function?: RollupFunction;
  filter?: Record<string, unknown>;
  target: string;
  via: string;
}

/** How a definition reads other objects while it is checked (the metadata write's own transaction). */
export interface DefinitionContext {
  self: ObjectMeta;
  load(objectName: string): Promise<ObjectMeta | undefined>;
}

/** A checked definition: its stored form and the type its value reads as. */
export interface DefinedRelated {
  stored: StoredRelated;
  type: FieldMeta['type'];
}

function invalid(message: string, details: Record<string, unknown> = {}): DomainError {
  return new DomainError('invalid_computed_field', message, details);
}

function expectString(def: RelatedDefinition, key: 'relation' | 'through' | 'field' | 'function'): string {
  const value = def[key];
  if (typeof value !== 'string' || !value) {
    throw invalid(`A ${def.type} field ("${def.name}") needs "${key}"`, { field: def.name, missing: key });
  }
  return value;
}

function refuseOthers(def: RelatedDefinition, allowed: readonly string[]): void {
  for (const key of ['relation', 'through', 'field', 'function', 'filter'] as const) {
    if (def[key] !== undefined && !allowed.includes(key)) {
      throw invalid(`A ${def.type} field ("${def.name}") has no "${key}"`, { field: def.name, unexpected: key });
    }
  }
}

/** `"<object>.<lookup field pointing here>"` resolved: the related object and its lookup. */
async function resolveRelation(def: RelatedDefinition, ctx: DefinitionContext): Promise<{ target: ObjectMeta; via: FieldMeta }> {
  const relation = expectString(def, 'relation');
  const [objectName, lookupName, ...rest] = relation.split('.');
  if (!objectName || !lookupName || rest.length) {
    throw invalid(`"relation" is written "<object>.<lookup field>" (e.g. "deal.account"); got "${relation}"`, {
      field: def.name,
      relation,
    });
  }
  const target = await ctx.load(objectName);
  if (!target) throw new DomainError('unknown_reference', `"relation" names object "${objectName}", which does not exist`);
  const via = target.fields.find((f) => f.name === lookupName);
  if (!via || via.type !== 'lookup' || via.reference !== ctx.self.name || isComputed(via)) {
    throw invalid(`"${relation}" is not a lookup field of "${objectName}" pointing at "${ctx.self.name}"`, {
      field: def.name,
      relation,
      lookups: target.fields
        .filter((f) => f.type === 'lookup' && f.reference === ctx.self.name)
        .map((f) => `${objectName}.${f.name}`),
    });
  }
  return { target, via };
}

function targetField(target: ObjectMeta, name: string, def: RelatedDefinition): FieldMeta {
  const field = target.fields.find((f) => f.name === name);
  if (!field) {
    throw new DomainError('unknown_field', `Unknown field "${name}" on object "${target.name}"`, {
      field: name,
      object: target.name,
      availableFields: target.fields.map((f) => f.name),
      definition: def.name,
    });
  }
  return field;
}

function checkedFilter(def: RelatedDefinition, target: ObjectMeta): Record<string, unknown> | undefined {
  if (def.filter === undefined || def.filter === null) return undefined;
  if (!isPlainObject(def.filter)) throw invalid(`"filter" of "${def.name}" is a where object`, { field: def.name });
  const filter = def.filter;
  checkRelatedFilter(target, filter, def.name);
  return filter;
}

/** The type a rollup's value reads as, or an invalid_computed_field error when the function does not fit the field. */
function rollupType(fn: RollupFunction, field: FieldMeta | undefined, def: RelatedDefinition): FieldMeta['type'] {
  if (fn === 'count' || fn === 'count_distinct') return 'integer';
  const type = field!.type;
  const numeric = NUMERIC_TYPES.includes(type as FieldType);
  const fits: Record<Exclude<RollupFunction, 'count' | 'count_distinct'>, boolean> = {
    sum: numeric,
    avg: numeric,
    min: numeric || TEMPORAL_TYPES.includes(type as FieldType) || TEXT_TYPES.includes(type as FieldType),
    max: numeric || TEMPORAL_TYPES.includes(type as FieldType) || TEXT_TYPES.includes(type as FieldType),
    concat: TEXT_TYPES.includes(type as FieldType),
  };
  if (!fits[fn]) {
    throw new DomainError(
      'invalid_rollup_function',
      `${fn} cannot roll up "${field!.name}" (${type}): sum and avg need a number, min and max a number, date or text, concat a text`,
      { field: def.name, function: fn, fieldType: type },
    );
  }
  if (fn === 'avg') return type === 'integer' || type === 'number' ? 'number' : type;
  if (TEXT_TYPES.includes(type as FieldType)) return 'text';
  return type;
}

const DEFINE: Record<RelatedKind, (def: RelatedDefinition, ctx: DefinitionContext) => Promise<DefinedRelated>> = {
  async rollup(def, ctx) {
    refuseOthers(def, ['relation', 'field', 'function', 'filter']);
    const { target, via } = await resolveRelation(def, ctx);
    const fn = expectString(def, 'function');
    if (!(ROLLUP_FUNCTIONS as readonly string[]).includes(fn)) {
      throw new DomainError('invalid_rollup_function', `Unknown rollup function "${fn}"`, {
        field: def.name,
        availableFunctions: ROLLUP_FUNCTIONS,
      });
    }
    const rollup = fn as RollupFunction;
    if (def.field === undefined && rollup !== 'count') {
      throw invalid(`A ${rollup} rollup ("${def.name}") needs "field"`, { field: def.name, missing: 'field' });
    }
    const field = def.field === undefined ? undefined : targetField(target, expectString(def, 'field'), def);
    const type = rollupType(rollup, field, def);
    const filter = checkedFilter(def, target);
    return {
      type,
      stored: { relation: def.relation, field: field?.name, function: rollup, filter, target: target.name, via: via.name },
    };
  },
  async count(def, ctx) {
    refuseOthers(def, ['relation', 'filter']);
    const { target, via } = await resolveRelation(def, ctx);
    const filter = checkedFilter(def, target);
    return { type: 'integer', stored: { relation: def.relation, filter, target: target.name, via: via.name } };
  },
  async lookup_value(def, ctx) {
    refuseOthers(def, ['through', 'field']);
    const through = expectString(def, 'through');
    const lookup = ctx.self.fields.find((f) => f.name === through);
    if (!lookup || lookup.type !== 'lookup' || !lookup.reference || isComputed(lookup)) {
      throw invalid(`"through" names a lookup field of "${ctx.self.name}"; "${through}" is not one`, {
        field: def.name,
        through,
        lookups: ctx.self.fields.filter((f) => f.type === 'lookup' && !isComputed(f)).map((f) => f.name),
      });
    }
    const target = lookup.reference === ctx.self.name ? ctx.self : await ctx.load(lookup.reference);
    if (!target) throw new DomainError('unknown_reference', `"${through}" points at "${lookup.reference}", which does not exist`);
    const field = targetField(target, expectString(def, 'field'), def);
    if (field.type === 'json' || field.type === 'lookup') {
      throw invalid(`A lookup_value cannot show a ${field.type} field ("${field.name}")`, { field: def.name });
    }
    // A select's value reads as text: its options belong to the other object's field.
    const type = TEXT_TYPES.includes(field.type as FieldType) ? 'text' : field.type;
    return { type, stored: { through, field: field.name, target: target.name, via: through } };
  },
};

/** Checks a rollup, count or lookup_value definition; `stored: true` is refused (computed when read only, for now). */
export async function defineRelated(def: RelatedDefinition, ctx: DefinitionContext): Promise<DefinedRelated> {
  if (def.stored) {
    throw new DomainError(
      'stored_not_supported',
      `"${def.name}": stored computed fields are not available yet; leave out "stored" to compute it when read`,
      { field: def.name },
    );
  }
  return DEFINE[def.type](def, ctx);
}

/** The RelatedMeta of a stored definition of a field of `self`. */
export function relatedMeta(kind: RelatedKind, self: string, stored: StoredRelated): RelatedMeta {
  const meta: RelatedMeta = { kind, self, target: stored.target, via: stored.via };
  if (stored.field !== undefined) meta.field = stored.field;
  if (stored.function !== undefined) meta.function = stored.function;
  if (stored.filter !== undefined) meta.filter = stored.filter;
  return meta;
}

// ---------------------------------------------------------------- inputs

/** The field names a `where` names (combinators walked). */
export function whereFieldNames(where: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(where)) {
    for (const item of where) whereFieldNames(item, into);
  } else if (isPlainObject(where)) {
    for (const [key, value] of Object.entries(where)) {
      if (key === '$and' || key === '$or' || key === '$not') whereFieldNames(value, into);
      else if (!key.startsWith('$')) into.add(key);
    }
  }
  return into;
}

/** A field another one reads. */
export interface FieldRef {
  object: string;
  field: string;
}

/** The fields a computed field of `objectName` reads directly (formulas: every field of its expression, at any depth). */
export function computedInputs(objectName: string, field: FieldMeta): FieldRef[] {
  if (field.formula) {
    const names = field.formula.node ? formulaInputs(field.formula.node) : new Set<string>();
    return [...names].map((name) => ({ object: objectName, field: name }));
  }
  const related = field.related;
  if (!related) return [];
  if (related.kind === 'lookup_value') {
    return [
      { object: related.self, field: related.via },
      { object: related.target, field: related.field! },
    ];
  }
  const names = new Set([related.via, ...(related.field ? [related.field] : []), ...whereFieldNames(related.filter)]);
  return [...names].map((name) => ({ object: related.target, field: name }));
}

// ---------------------------------------------------------------- access

/** How the access rule sees fields: the caller's view of each (null: hidden, or an object it may not read). */
export interface FieldLens {
  field(objectName: string, fieldName: string): FieldMeta | null;
  /** The caller's read view of an object with only `fields`, with its row filter; null when it may not read it. */
  scope(objectName: string, fields: FieldMeta[]): ObjectMeta | null;
}

/**
 * The access rule of every computed kind: the caller's view of `field` (of object `objectName`), or null
 * when hidden. A computed field that reads a field the caller may not see, at any depth and on any object,
 * is hidden; a rollup or count reads the related object through the caller's view of it (its row filter
 * included), and is hidden when the caller may not read that object.
 */
export function computedView(objectName: string, field: FieldMeta, lens: FieldLens): FieldMeta | null {
  if (field.formula) {
    const related: Record<string, FieldMeta> = {};
    for (const name of field.formula.inputs ?? []) {
      const input = lens.field(objectName, name);
      if (!input) return null;
      if (input.related) related[name] = input;
    }
    return Object.keys(related).length ? { ...field, formula: { ...field.formula, related } } : field;
  }
  const meta = field.related;
  if (!meta) return field;
  const inputs = computedInputs(objectName, field);
  const fields: FieldMeta[] = [];
  for (const input of inputs) {
    const seen = lens.field(input.object, input.field);
    if (!seen) return null;
    if (input.object === meta.target) fields.push(seen);
  }
  const id = lens.field(meta.target, 'id');
  if (!id) return null;
  const scope = lens.scope(meta.target, [id, ...fields.filter((f) => f.name !== 'id')]);
  if (!scope) return null;
  return { ...field, related: { ...meta, scope } };
}

// ---------------------------------------------------------------- SQL

/** The data engine's primitives a kind's SQL is built from (data/formula.compiler.ts). */
export interface RelatedSqlParts {
  /** The related table, under a fresh alias. */
  from: string;
  /** A column of the outer record (`id`, or this object's lookup). */
  outer(column: string): string;
  /** A field of the related record (a computed one compiled too), under the fresh alias. */
  value(fieldName: string): string;
  /** The caller's row filter on the related object and the definition's filter, under the fresh alias. */
  conditions: string[];
  /** A column of the related record under the fresh alias. */
  inner(column: string): string;
}

function aggregateSql(fn: RollupFunction, value: string, type: FieldMeta['type']): string {
  switch (fn) {
    case 'count':
      return `count(${value})`;
    case 'count_distinct':
      return `count(distinct ${value})`;
    case 'sum':
      // Nothing to add up is 0.
      return type === 'number' ? `coalesce(sum(${value}), 0)::double precision` : `coalesce(sum(${value}), 0)`;
    case 'avg':
      if (type === 'currency') return `round(avg(${value}), 2)`;
      if (type === 'percent') return `round(avg(${value}), 4)`;
      return `avg(${value})::double precision`;
    case 'min':
    case 'max':
      return `${fn}(${value})`;
    case 'concat':
      // The values in order, joined by ", "; nothing (no related record, or only empty values) is null.
      return `string_agg(${value}::text, ', ' order by ${value}::text)`;
  }
}

/** The SQL of a rollup, count or lookup_value field: a correlated subquery over the related table. */
export function relatedSql(field: FieldMeta, parts: RelatedSqlParts): string {
  const meta = field.related!;
  const where = (first: string) => [first, ...parts.conditions].join(' and ');
  switch (meta.kind) {
    case 'count':
      return `(select count(*) from ${parts.from} where ${where(`${parts.inner(meta.via)} = ${parts.outer('id')}`)})`;
    case 'rollup': {
      const value = meta.function === 'count' && !meta.field ? '*' : parts.value(meta.field!);
      const aggregate = aggregateSql(meta.function!, value, field.type);
      return `(select ${aggregate} from ${parts.from} where ${where(`${parts.inner(meta.via)} = ${parts.outer('id')}`)})`;
    }
    case 'lookup_value':
      return `(select ${parts.value(meta.field!)} from ${parts.from} where ${where(`${parts.inner('id')} = ${parts.outer(meta.via)}`)})`;
  }
}

// ---------------------------------------------------------------- description

/** A computed field's definition as the admin API and the tools show it (so the model can explain a value). */
export function describeComputed(field: FieldMeta): Record<string, unknown> {
  if (field.formula) return { expression: field.formula.expression, resultType: field.formula.resultType };
  const meta = field.related;
  if (!meta) return {};
  const out: Record<string, unknown> = {};
  if (meta.kind === 'lookup_value') {
    out.through = meta.via;
    out.field = meta.field;
  } else {
    out.relation = `${meta.target}.${meta.via}`;
    if (meta.function) out.function = meta.function;
    if (meta.field) out.field = meta.field;
    if (meta.filter) out.filter = meta.filter;
  }
  out.resultType = field.type;
  return out;
}

/** One sentence saying how the value is computed (describe_object). */
export function explainComputed(field: FieldMeta): string | undefined {
  const meta = field.related;
  if (field.formula) return `Computed when read: ${field.formula.expression}`;
  if (!meta) return undefined;
  const filtered = meta.filter ? ` matching ${JSON.stringify(meta.filter)}` : '';
  const related = `the ${meta.target} records whose ${meta.via} is this record${filtered} (only those the caller may read)`;
  switch (meta.kind) {
    case 'count':
      return `Computed when read: the number of ${related}`;
    case 'rollup':
      return `Computed when read: ${meta.function}${meta.field ? ` of ${meta.field}` : ''} over ${related}${
        meta.function === 'sum' || meta.function === 'count' || meta.function === 'count_distinct'
          ? '; 0 when there are none'
          : '; null when there are none'
      }`;
    case 'lookup_value':
      return `Computed when read: ${meta.field} of the ${meta.target} record that ${meta.via} points at (null without one)`;
  }
}

// ---------------------------------------------------------------- filter check

type FilterCheck = (object: ObjectMeta, filter: Record<string, unknown>) => void;
let filterCheck: FilterCheck | undefined;

/** The data engine registers its where compiler here (metadata sits below it): the one check of a filter. */
export function registerFilterCheck(check: FilterCheck): void {
  filterCheck = check;
}

/**
 * A rollup's or count's filter checked against the related object by the where compiler (400 as a `where`
 * would be). It may name stored fields and formulas of that object, not its rollup, count or lookup_value fields.
 */
export function checkRelatedFilter(object: ObjectMeta, filter: Record<string, unknown>, definition: string): void {
  const related = (name: string) => object.fields.find((f) => f.name === name)?.related !== undefined;
  for (const name of whereFieldNames(filter)) {
    const field = object.fields.find((f) => f.name === name);
    if (field && (field.related || (field.formula?.inputs ?? []).some(related))) {
      throw invalid(`"filter" of "${definition}" cannot name "${object.name}.${name}", itself computed from other records`, {
        field: definition,
        filterField: name,
      });
    }
  }
  if (!filterCheck) throw new Error('no filter compiler registered');
  filterCheck(object, filter);
}

// ---------------------------------------------------------------- definitions that name computed fields

/** Whether a field's value comes from other records (a rollup, count or lookup_value, or a formula over one). */
export function readsOtherRecords(object: ObjectMeta, field: FieldMeta): boolean {
  if (field.related) return true;
  return (field.formula?.inputs ?? []).some((name) => object.fields.find((f) => f.name === name)?.related !== undefined);
}

/**
 * The object as a definition check sees it (a metric's filter, a rollup's filter): each computed field as a
 * plain field of its result type, so names, operators and values are checked; no SQL of it is ever run.
 */
export function definitionView(object: ObjectMeta): ObjectMeta {
  if (!object.fields.some(isComputed)) return object;
  return { ...object, fields: object.fields.map((f) => (isComputed(f) ? { ...f, formula: undefined, related: undefined } : f)) };
}
