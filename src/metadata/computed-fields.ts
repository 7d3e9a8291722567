import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { decimalScale, fieldTypeOf, FLOAT_COLUMN } from './field-types';
import { formulaInputs } from './formula';
import { defineLinks, LINKS_VALUE_TYPE, linkedCondition, linksValueSql } from './links-fields';
import {
  type FieldMeta,
  type LinkTable,
  type ObjectMeta,
  RELATED_KINDS,
  type RelatedKind,
  type RelatedMeta,
  ROLLUP_FUNCTIONS,
  type RollupFunction,
} from './object-metadata.types';

/**
 * Computed fields, one entry per kind: `formula` (an expression over the record's fields), `rollup` and
 * `count` (over the records of another object whose lookup points here) and `lookup_value` (a field of
 * the record a lookup points at). Each is computed when read, as one SQL expression wherever a field is
 * used; a rollup or count defined with `stored: true` also has a column, kept up to date by triggers
 * (stored-fields.ts), which its `sql` reads for a caller whose view of the related object is the whole
 * object (servesStored). Each entry holds what the rest of the engine asks of a kind:
 *
 * - `define`: the definition checked (400 with a code) and turned into its metadata;
 * - `inputs`: the fields it reads (`object.field`), for cycles and for `field_in_use`;
 * - `view`: the access rule: the caller's view of the field, or null when hidden;
 * - `sql`: its SQL, from the primitives the data engine passes (its one where compiler and field compiler);
 * - `describe`: what the admin API and the tools show of its definition.
 *
 * The formula language itself lives in formula.ts (parser, checker) and data/formula.compiler.ts (SQL).
 * `links` (many to many, links-fields.ts) is a kind here too: its value (the linked ids) is a subquery over
 * its join table and the caller's view of the target; a rollup or count names one as its `relation`.
 */

export type ComputedKind = 'formula' | RelatedKind;

/** The definition's kind, or undefined for a stored field. */
export function computedKind(field: Pick<FieldMeta, 'formula' | 'related'>): ComputedKind | undefined {
  if (field.formula) return 'formula';
  return field.related?.kind;
}

/** A computed field: never written by a client; computed when read (or, stored, kept by triggers). */
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
  /** links only: the target object, and the name of the links field it gets pointing back. */
  reference?: string;
  inverse?: string;
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
  /** rollup and count: kept in a column (see RelatedMeta.stored), and whether every record's value is filled in. */
  stored?: boolean;
  filled?: boolean;
  /** Its fill job was cancelled: it stays computed when read, and no fill starts again by itself. */
  fillCancelled?: boolean;
  /** links, and a rollup or count through a links field: the join table (see RelatedMeta.link). */
  link?: LinkTable;
  /** links: the target's links field reading the same pairs. */
  inverse?: string;
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
async function resolveRelation(
  def: RelatedDefinition,
  ctx: DefinitionContext,
): Promise<{ target: ObjectMeta; via: FieldMeta; link?: LinkTable }> {
  const relation = expectString(def, 'relation');
  const links = ctx.self.fields.find((f) => f.name === relation && f.related?.kind === 'links');
  if (links) {
    const meta = links.related!;
    const target = meta.target === ctx.self.name ? ctx.self : await ctx.load(meta.target);
    if (!target) throw new DomainError('unknown_reference', `"${relation}" links to "${meta.target}", which does not exist`);
    return { target, via: links, link: meta.link };
  }
  const [objectName, lookupName, ...rest] = relation.split('.');
  if (!objectName || !lookupName || rest.length) {
    throw invalid(
      `"relation" is written "<object>.<lookup field>" (e.g. "deal.account") or names a links field; got "${relation}"`,
      {
        field: def.name,
        relation,
      },
    );
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
  const entry = fieldTypeOf(type);
  const measures: readonly string[] = entry.measures;
  const fits = fn === 'concat' ? entry.family === 'text' : measures.includes(fn);
  if (!fits) {
    throw new DomainError(
      'invalid_rollup_function',
      `${fn} cannot roll up "${field!.name}" (${type}): sum and avg need a number, min and max a number, date or text, concat a text`,
      { field: def.name, function: fn, fieldType: type },
    );
  }
  if (fn === 'avg') return entry.averageType ?? type;
  return entry.family === 'text' ? 'text' : type;
}

const DEFINE: Record<RelatedKind, (def: RelatedDefinition, ctx: DefinitionContext) => Promise<DefinedRelated>> = {
  async rollup(def, ctx) {
    refuseOthers(def, ['relation', 'field', 'function', 'filter']);
    const { target, via, link } = await resolveRelation(def, ctx);
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
      stored: { relation: def.relation, field: field?.name, function: rollup, filter, target: target.name, via: via.name, link },
    };
  },
  async count(def, ctx) {
    refuseOthers(def, ['relation', 'filter']);
    const { target, via, link } = await resolveRelation(def, ctx);
    const filter = checkedFilter(def, target);
    return { type: 'integer', stored: { relation: def.relation, filter, target: target.name, via: via.name, link } };
  },
  async lookup_value(def, ctx) {
    refuseOthers(def, ['through', 'field']);
    const through = expectString(def, 'through');
    const lookup = ctx.self.fields.find((f) => f.name === through);
    if (lookup?.related?.kind === 'links') {
      // Several values for one record: a concat rollup through the links field says how they are joined.
      throw invalid(
        `"${through}" is a links field (several records): a lookup_value reads one record; use a rollup with "relation": "${through}" (e.g. "function": "concat")`,
        { field: def.name, through },
      );
    }
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
    const type = fieldTypeOf(field.type).family === 'text' ? 'text' : field.type;
    return { type, stored: { through, field: field.name, target: target.name, via: through } };
  },
  async links(def, ctx) {
    refuseOthers(def, []);
    const { target, link, inverse } = await defineLinks(def, ctx.self, (name) => ctx.load(name));
    return { type: LINKS_VALUE_TYPE, stored: { target: target.name, via: def.name, link, inverse } };
  },
};

/**
 * Checks a rollup, count or lookup_value definition. `stored: true` (rollup and count over plain fields of the
 * related object) keeps the value in a column: see stored-fields.ts for how it is kept up to date.
 */
export async function defineRelated(def: RelatedDefinition, ctx: DefinitionContext): Promise<DefinedRelated> {
  const defined = await COMPUTED_KINDS[def.type].define!(def, ctx);
  if (!def.stored) return defined;
  if (def.type === 'links') {
    throw new DomainError('stored_not_supported', `"${def.name}": a links field has no value to store; leave out "stored"`, {
      field: def.name,
    });
  }
  if (def.type === 'lookup_value') {
    throw new DomainError(
      'stored_not_supported',
      `"${def.name}": only rollup and count fields can be stored; leave out "stored" to compute it when read`,
      { field: def.name, storable: ['rollup', 'count'] },
    );
  }
  const target = await ctx.load(defined.stored.target);
  const computedInput = [...relationInputs({ related: relatedMeta(def.type, ctx.self.name, defined.stored) } as FieldMeta)]
    // Through links, the links field itself is this object's (its join table has triggers of its own: links-stored.ts).
    .filter((ref) => !(defined.stored.link && ref.object === ctx.self.name && ref.field === defined.stored.via))
    .map((ref) => target?.fields.find((f) => f.name === ref.field))
    .find((f) => f !== undefined && isComputed(f));
  if (computedInput) {
    throw new DomainError(
      'stored_not_supported',
      `"${def.name}": a stored ${def.type} reads plain fields of "${defined.stored.target}" only; "${computedInput.name}" is computed. Leave out "stored" to compute it when read`,
      { field: def.name, input: computedInput.name },
    );
  }
  return { ...defined, stored: { ...defined.stored, stored: true, filled: false } };
}

/** The RelatedMeta of a stored definition of a field of `self`. */
export function relatedMeta(kind: RelatedKind, self: string, stored: StoredRelated): RelatedMeta {
  const meta: RelatedMeta = { kind, self, target: stored.target, via: stored.via };
  if (stored.field !== undefined) meta.field = stored.field;
  if (stored.function !== undefined) meta.function = stored.function;
  if (stored.filter !== undefined) meta.filter = stored.filter;
  if (stored.link !== undefined) meta.link = stored.link;
  if (stored.inverse !== undefined) meta.inverse = stored.inverse;
  if (stored.stored) {
    meta.stored = true;
    meta.filled = stored.filled === true;
  }
  return meta;
}

// ---------------------------------------------------------------- the kinds

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

/** How the access rule sees fields: the caller's view of each (null: hidden, or an object it may not read). */
export interface FieldLens {
  field(objectName: string, fieldName: string): FieldMeta | null;
  /** The caller's read view of an object with only `fields`, with its row filter; null when it may not read it. */
  scope(objectName: string, fields: FieldMeta[]): ObjectMeta | null;
}

/** The data engine's primitives of a subquery over the related object (data/formula.compiler.ts). */
export interface RelatedSqlParts {
  /** The related table, under a fresh alias. */
  from: string;
  /** The fresh alias (unquoted), for the subquery's own further aliases. */
  alias: string;
  /** A column of the outer record (`id`, or this object's lookup). */
  outer(column: string): string;
  /** A field of the related record (a computed one compiled too), under the fresh alias. */
  value(fieldName: string): string;
  /** The caller's row filter on the related object and the definition's filter, under the fresh alias. */
  conditions: string[];
  /** A column of the related record under the fresh alias. */
  inner(column: string): string;
}

/** What the data engine hands a kind to build its SQL from: the formula compiler, or a related subquery's parts. */
export interface ComputedSqlCompiler {
  /** A formula's checked expression as SQL (data/formula.compiler.ts). */
  expression(field: FieldMeta): string;
  /** The parts of a subquery over the caller's view of the related object. */
  related(field: FieldMeta): RelatedSqlParts;
  /** The field's own column (a stored rollup or count), under the outer record's alias. */
  column(field: FieldMeta): string;
}

/** One computed kind: everything the engine, access and the tools ask of it. */
export interface ComputedKindEntry {
  /** The definition checked (400 with a code) into what is stored; formulas are checked by formula.ts (metadata.service). */
  define?(def: RelatedDefinition, ctx: DefinitionContext): Promise<DefinedRelated>;
  /** The fields it reads directly (a formula: every field of its expression, at any depth). */
  inputs(objectName: string, field: FieldMeta): FieldRef[];
  /** The access rule: the caller's view of the field, or null when hidden. */
  view(objectName: string, field: FieldMeta, lens: FieldLens): FieldMeta | null;
  /** Its SQL: one expression usable in a select list, where, order by, group by or aggregate. */
  sql(field: FieldMeta, compiler: ComputedSqlCompiler): string;
  /** Its definition as the admin API and describe_object show it. */
  describe(field: FieldMeta): Record<string, unknown>;
  /** One sentence saying how the value is computed (describe_object). */
  explain(field: FieldMeta): string;
}

/** The fields a rollup or count reads: the relation's lookup, the rolled-up field, the filter's fields (all on the target). */
function relationInputs(field: FieldMeta): FieldRef[] {
  const meta = field.related!;
  // Through links: the links field of this object (hidden with it, and kept from being dropped), then the target's fields.
  const names = new Set([
    ...(meta.link ? ['id'] : [meta.via]),
    ...(meta.field ? [meta.field] : []),
    ...whereFieldNames(meta.filter),
  ]);
  const refs = [...names].map((name) => ({ object: meta.target, field: name }));
  return meta.link ? [{ object: meta.self, field: meta.via }, ...refs] : refs;
}

/**
 * The access rule of the kinds that read another object: hidden when any input (on either object) is hidden
 * from the caller or the caller may not read the related object; otherwise it reads the caller's view of the
 * related object (its row filter included) trimmed to the fields it needs.
 */
function relatedView(objectName: string, field: FieldMeta, lens: FieldLens): FieldMeta | null {
  const meta = field.related!;
  const fields: FieldMeta[] = [];
  for (const input of COMPUTED_KINDS[meta.kind].inputs(objectName, field)) {
    const seen = lens.field(input.object, input.field);
    if (!seen) return null;
    if (input.object === meta.target && seen.name !== 'id') fields.push(seen);
  }
  const id = lens.field(meta.target, 'id');
  const scope = id && lens.scope(meta.target, [id, ...fields]);
  return scope ? { ...field, related: { ...meta, scope } } : null;
}

/**
 * Whether a stored rollup or count reads its column: once filled, and only for a caller whose view of the
 * related object is the whole object (no row filter; a hidden input already hides the field, see relatedView).
 * Any other caller gets it computed under its own access, so a stored total never shows what a row filter hides.
 */
export function servesStored(field: FieldMeta): boolean {
  const meta = field.related;
  return meta?.stored === true && meta.filled === true && meta.scope !== undefined && meta.scope.rowFilter === undefined;
}

/** The rows of the related object that point here, and the caller's and the definition's conditions. */
function pointingHere(meta: RelatedMeta, parts: RelatedSqlParts): string {
  const related = meta.link ? linkedCondition(meta, parts) : `${parts.inner(meta.via)} = ${parts.outer('id')}`;
  return [related, ...parts.conditions].join(' and ');
}

function aggregateSql(fn: RollupFunction, value: string, type: FieldMeta['type']): string {
  switch (fn) {
    case 'count':
      return `count(${value})`;
    case 'count_distinct':
      return `count(distinct ${value})`;
    case 'sum':
      // Nothing to add up is 0.
      return fieldTypeOf(type).column === FLOAT_COLUMN
        ? `coalesce(sum(${value}), 0)::double precision`
        : `coalesce(sum(${value}), 0)`;
    case 'avg': {
      // An exact decimal keeps its scale; any other average is a float.
      const scale = decimalScale(type);
      return scale === undefined ? `avg(${value})::double precision` : `round(avg(${value}), ${scale})`;
    }
    case 'min':
    case 'max':
      return `${fn}(${value})`;
    case 'concat':
      // The values in order, joined by ", "; nothing (no related record, or only empty values) is null.
      return `string_agg(${value}::text, ', ' order by ${value}::text)`;
  }
}

/** How the value is kept, as describe_object says it (a stored one reads the same as computed). */
function howKept(meta: RelatedMeta): string {
  return meta.stored ? 'Stored, kept up to date as the related records change' : 'Computed when read';
}

function relationText(meta: RelatedMeta): string {
  const filtered = meta.filter ? ` matching ${JSON.stringify(meta.filter)}` : '';
  if (meta.link) return `the ${meta.target} records linked by ${meta.via}${filtered} (only those the caller may read)`;
  return `the ${meta.target} records whose ${meta.via} is this record${filtered} (only those the caller may read)`;
}

function describeRelation(field: FieldMeta): Record<string, unknown> {
  const meta = field.related!;
  const out: Record<string, unknown> = { relation: meta.link ? meta.via : `${meta.target}.${meta.via}` };
  if (meta.function) out.function = meta.function;
  if (meta.field) out.field = meta.field;
  if (meta.filter) out.filter = meta.filter;
  out.resultType = field.type;
  if (meta.stored) {
    out.stored = true;
    out.filled = meta.filled === true;
  }
  return out;
}

/** Every computed kind, in one place: adding one (a `links` rollup, an AI field) is adding an entry here. */
export const COMPUTED_KINDS: Record<ComputedKind, ComputedKindEntry> = {
  formula: {
    inputs: (objectName, field) =>
      [...(field.formula!.node ? formulaInputs(field.formula!.node) : [])].map((name) => ({ object: objectName, field: name })),
    // Hidden with any input it reads at any depth; the rollups, counts and values it reads go along as the caller sees them.
    view(objectName, field, lens) {
      const related: Record<string, FieldMeta> = {};
      for (const name of field.formula!.inputs ?? []) {
        const input = lens.field(objectName, name);
        if (!input) return null;
        if (input.related) related[name] = input;
      }
      return Object.keys(related).length ? { ...field, formula: { ...field.formula!, related } } : field;
    },
    // A stored formula reads only the record's own fields: its column is right for every caller who may see it.
    sql: (field, compiler) =>
      field.formula!.stored && field.formula!.filled ? compiler.column(field) : compiler.expression(field),
    describe: (field) => ({
      expression: field.formula!.expression,
      resultType: field.formula!.resultType,
      ...(field.formula!.stored ? { stored: true, filled: field.formula!.filled === true } : {}),
    }),
    explain: (field) =>
      `${field.formula!.stored ? 'Stored, kept up to date as the record changes' : 'Computed when read'}: ${field.formula!.expression}`,
  },
  rollup: {
    define: (def, ctx) => DEFINE.rollup(def, ctx),
    inputs: (_objectName, field) => relationInputs(field),
    view: relatedView,
    sql(field, compiler) {
      if (servesStored(field)) return compiler.column(field);
      const meta = field.related!;
      const parts = compiler.related(field);
      const value = meta.function === 'count' && !meta.field ? '*' : parts.value(meta.field!);
      return `(select ${aggregateSql(meta.function!, value, field.type)} from ${parts.from} where ${pointingHere(meta, parts)})`;
    },
    describe: describeRelation,
    explain(field) {
      const meta = field.related!;
      const none = ['sum', 'count', 'count_distinct'].includes(meta.function!) ? '0' : 'null';
      return `${howKept(meta)}: ${meta.function}${meta.field ? ` of ${meta.field}` : ''} over ${relationText(meta)}; ${none} when there are none`;
    },
  },
  count: {
    define: (def, ctx) => DEFINE.count(def, ctx),
    inputs: (_objectName, field) => relationInputs(field),
    view: relatedView,
    sql(field, compiler) {
      if (servesStored(field)) return compiler.column(field);
      const parts = compiler.related(field);
      return `(select count(*) from ${parts.from} where ${pointingHere(field.related!, parts)})`;
    },
    describe: describeRelation,
    explain: (field) => `${howKept(field.related!)}: the number of ${relationText(field.related!)}`,
  },
  lookup_value: {
    define: (def, ctx) => DEFINE.lookup_value(def, ctx),
    inputs(_objectName, field) {
      const meta = field.related!;
      return [
        { object: meta.self, field: meta.via },
        { object: meta.target, field: meta.field! },
      ];
    },
    view: relatedView,
    sql(field, compiler) {
      const meta = field.related!;
      const parts = compiler.related(field);
      const where = [`${parts.inner('id')} = ${parts.outer(meta.via)}`, ...parts.conditions].join(' and ');
      return `(select ${parts.value(meta.field!)} from ${parts.from} where ${where})`;
    },
    describe: (field) => ({ through: field.related!.via, field: field.related!.field, resultType: field.type }),
    explain: (field) =>
      `Computed when read: ${field.related!.field} of the ${field.related!.target} record that ${field.related!.via} points at (null without one, or when the caller may not read it)`,
  },
  links: {
    define: (def, ctx) => DEFINE.links(def, ctx),
    // Reads the target's records: hidden when the caller may not read the target object.
    inputs: (_objectName, field) => [{ object: field.related!.target, field: 'id' }],
    view: relatedView,
    sql: (field, compiler) => linksValueSql(field.related!, compiler.related(field)),
    describe: (field) => ({
      reference: field.related!.target,
      ...(field.related!.inverse ? { inverse: field.related!.inverse } : {}),
    }),
    explain: (field) =>
      `Links to ${field.related!.target} records (many to many): an array of their ids, only those the caller may read. ` +
      `Written as an array (replaces the set) or {"$add": [ids], "$remove": [ids]}; filter with $null (true: no links), ` +
      `$contains (linked to all the given ids) or $in (to any of them)`,
  },
};

/** The fields a computed field of `objectName` reads directly; none for a stored field. */
export function computedInputs(objectName: string, field: FieldMeta): FieldRef[] {
  const kind = computedKind(field);
  return kind ? COMPUTED_KINDS[kind].inputs(objectName, field) : [];
}

/**
 * The caller's view of a computed field of `objectName`, or null when hidden (COMPUTED_KINDS[kind].view): a
 * computed field that reads a field the caller may not see, at any depth and on any object, is hidden; one that
 * reads another object reads it through the caller's view of it.
 */
export function computedView(objectName: string, field: FieldMeta, lens: FieldLens): FieldMeta | null {
  const kind = computedKind(field);
  return kind ? COMPUTED_KINDS[kind].view(objectName, field, lens) : field;
}

/** A computed field's SQL (COMPUTED_KINDS[kind].sql). */
export function computedSql(field: FieldMeta, compiler: ComputedSqlCompiler): string {
  const kind = computedKind(field);
  if (!kind) throw new Error(`"${field.name}" is not computed`);
  return COMPUTED_KINDS[kind].sql(field, compiler);
}

/** A computed field's definition as the admin API and the tools show it (so the model can explain a value). */
export function describeComputed(field: FieldMeta): Record<string, unknown> {
  const kind = computedKind(field);
  return kind ? COMPUTED_KINDS[kind].describe(field) : {};
}

/** One sentence saying how the value is computed. */
export function explainComputed(field: FieldMeta): string | undefined {
  const kind = computedKind(field);
  return kind ? COMPUTED_KINDS[kind].explain(field) : undefined;
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

// ---------------------------------------------------------------- stored values

type StoredValueSql = (field: FieldMeta, target: ObjectMeta, outerAlias: string) => string;
let storedValue: StoredValueSql | undefined;

/** The data engine registers how a stored field's value is computed over the whole related object (formula.compiler.ts). */
export function registerStoredValueSql(compile: StoredValueSql): void {
  storedValue = compile;
}

/**
 * A stored rollup's or count's value recomputed for the record aliased `outerAlias` (an engine alias, `"__name"`)
 * over every related record (no caller, no row filter), its filter's values written inline: the body of a
 * trigger and the fill job's statement, which take no bind parameters.
 */
export function storedValueSql(field: FieldMeta, target: ObjectMeta, outerAlias: string): string {
  if (!storedValue) throw new Error('no stored value compiler registered');
  return storedValue(field, target, outerAlias);
}

type StoredFormulaSql = (field: FieldMeta, alias: string) => string;
let storedFormula: StoredFormulaSql | undefined;

/** The data engine registers how a formula compiles with its values written inline (formula.compiler.ts). */
export function registerStoredFormulaSql(compile: StoredFormulaSql): void {
  storedFormula = compile;
}

/**
 * A stored formula's expression over the record aliased `alias` (an engine alias, `"__name"`), its literals
 * written inline: the body of its trigger and the fill job's statement, which take no bind parameters.
 */
export function storedFormulaSql(field: FieldMeta, alias: string): string {
  if (!storedFormula) throw new Error('no formula compiler registered');
  return storedFormula(field, alias);
}
