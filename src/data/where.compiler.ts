import { typeName } from '../metadata/links-fields';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { quoteIdent, searchFold } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { FIELD_OPERATORS, type FieldOperator, fieldTypeOf } from '../metadata/field-types';
import { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import { describeValue } from '../metadata/field-values';
import { bindCast, encodeFieldValue } from './field-value.codec';
import { fieldSql, useFilterCompiler } from './formula.compiler';
import { definitionView, registerFilterCheck } from '../metadata/computed-fields';

/**
 * Compiles the `where` JSON language into one parameterized SQL boolean expression.
 *
 *   { "stage": "won" }                          equality ($eq); null means IS NULL
 *   { "amount": { "$gt": 100, "$lte": 500 } }   operators on one field are ANDed
 *   { "$or": [ {...}, {...} ] }, "$and": [...]  non-empty arrays of where objects
 *   { "$not": { ... } }                         complement of a where object
 * Several keys in one object are ANDed.
 *
 * Semantics worth knowing:
 *   - $ne, $nin, $notContains and $not keep rows whose value is NULL ("not won" includes "no stage").
 *     $not is `NOT COALESCE(expr, FALSE)` so it is the exact complement of its operand.
 *   - $in / $nin bind one array parameter (`= ANY($1::text[])`); a null item also matches/excludes NULL.
 *   - $contains/$notContains/$startsWith/$endsWith are case-insensitive ILIKE on text-like fields,
 *     with %, _ and \ in the operand matched literally.
 *   - Ordering operators ($gt $gte $lt $lte $between) work on numbers, dates and date-times, and on
 *     text-like fields as alphabetical ranges in the database collation. $between is inclusive; a low
 *     bound above the high bound matches nothing.
 *   - The operators each type accepts are its registry entry's (metadata/field-types.ts); the SQL is
 *     chosen by the entry's shape. A set of options (multiselect): $contains = has the option(s) (`@>`),
 *     $in = has any of them (`&&`), $eq = exactly this set, regardless of order (`@>` and `<@`).
 *     A document (json): $eq/$ne (jsonb equality, key order insensitive; an array is one value) and $null.
 * Every bound value carries a cast from `bindCast` (`$1::numeric`, `$2::timestamptz`, `$3::uuid[]`, ...).
 *
 * Access policies' row filters (and only they, through `placeholders`) may use `"$subject"` (the
 * caller's subject) and `"$attr.<name>"` (one of the caller's attributes) as an operand or an item of
 * one. They are resolved from the caller and bound like any other value, never spliced into the SQL.
 */

export const LOGICAL_OPERATORS = ['$and', '$or', '$not'] as const;

/** Deepest nesting of where objects ($and/$or/$not each add a level; the top object is level 1). */
export const MAX_WHERE_DEPTH = 8;
/** Most field conditions (operator applications) in one where. */
export const MAX_WHERE_CONDITIONS = 200;
/** Most items in one $in / $nin list. */
export const MAX_IN_VALUES = 1000;

const COMPARISON_SQL: Partial<Record<FieldOperator, string>> = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' };

/** ESCAPE clause for ILIKE; E'' syntax so it means one backslash whatever standard_conforming_strings says. */
export const LIKE_ESCAPE = "ESCAPE E'\\\\'";

/** Operators a where condition may use on this field, in canonical order (shown to callers in errors). */
export function operatorsForField(field: Pick<FieldMeta, 'type'>): FieldOperator[] {
  const allowed = fieldTypeOf(field.type).operators;
  return FIELD_OPERATORS.filter((operator) => allowed.includes(operator));
}

/** `"col"` or `"alias"."col"`, both through quoteIdent. */
export function columnRef(name: string, tableAlias?: string): string {
  return tableAlias === undefined ? quoteIdent(name) : `${quoteIdent(tableAlias)}.${quoteIdent(name)}`;
}

/** The field called `name`, or an unknown_field error listing every field of the object. */
export function requireField(object: ObjectMeta, name: string): FieldMeta {
  const field = object.fields.find((candidate) => candidate.name === name);
  if (field) return field;
  throw new DomainError('unknown_field', `Unknown field "${clip(name)}" on object "${object.name}"`, {
    field: clip(name),
    object: object.name,
    availableFields: object.fields.map((candidate) => candidate.name),
  });
}

/** Caller-supplied names are echoed in errors, but never at unbounded length. */
export function clip(text: string, max = 100): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** The values a row filter's placeholders stand for, or `validate`: check a filter without a caller. */
export type Placeholders = { subject: string; attributes: Readonly<Record<string, string | number>> } | 'validate';

/**
 * A placeholder the caller has no value for (or one its field cannot hold): the filter it is in
 * matches nothing. Thrown up to whoever compiles the row filter, never to the caller.
 */
export class UnresolvedPlaceholder extends Error {
  constructor(readonly placeholder: string) {
    super(`Unresolved placeholder ${placeholder}`);
  }
}

const SUBJECT_PLACEHOLDER = '$subject';
const ATTRIBUTE_PLACEHOLDER = '$attr.';

function isPlaceholder(value: unknown): value is string {
  return typeof value === 'string' && (value === SUBJECT_PLACEHOLDER || value.startsWith(ATTRIBUTE_PLACEHOLDER));
}

interface CompileState {
  object: ObjectMeta;
  params: SqlParams;
  tableAlias?: string;
  conditions: number;
  placeholders?: Placeholders;
}

/**
 * Returns a SQL boolean expression for `where` (`TRUE` when it is undefined, null or {}), adding every
 * value to `params`. Throws DomainError: invalid_where, unknown_field (unknown fields and operators), invalid_operator,
 * invalid_value, too_many_values.
 */
export function compileWhere(
  object: ObjectMeta,
  where: unknown,
  params: SqlParams,
  options: { tableAlias?: string; placeholders?: Placeholders } = {},
): string {
  if (where === undefined || where === null) return 'TRUE';
  const state: CompileState = {
    object,
    params,
    tableAlias: options.tableAlias,
    conditions: 0,
    placeholders: options.placeholders,
  };
  return compileNode(where, 1, state, 'where');
}

function compileNode(node: unknown, depth: number, state: CompileState, path: string): string {
  if (!isPlainObject(node)) {
    const hint = Array.isArray(node) ? ' (combine conditions with {"$and": [...]} or {"$or": [...]})' : '';
    throw invalidWhere(`${path} must be an object like {"status": "won"}, got ${describeValue(node)}${hint}`, path);
  }
  if (depth > MAX_WHERE_DEPTH) {
    throw invalidWhere(`where is nested deeper than ${MAX_WHERE_DEPTH} levels`, path, { maxDepth: MAX_WHERE_DEPTH });
  }
  const parts = Object.keys(node).map((key) =>
    key.startsWith('$')
      ? compileLogical(key, node[key], depth, state, path)
      : compileField(requireField(state.object, key), node[key], state),
  );
  return parts.length === 0 ? 'TRUE' : join(parts, 'AND');
}

function compileLogical(key: string, value: unknown, depth: number, state: CompileState, path: string): string {
  if (key === '$and' || key === '$or') {
    if (!Array.isArray(value) || value.length === 0) {
      throw invalidWhere(`${key} expects a non-empty array of where objects, got ${describeValue(value)}`, `${path}.${key}`);
    }
    if (value.length > MAX_WHERE_CONDITIONS) {
      throw invalidWhere(`${key} has more than ${MAX_WHERE_CONDITIONS} items`, `${path}.${key}`, {
        maxConditions: MAX_WHERE_CONDITIONS,
      });
    }
    const parts = value.map((item, index) => compileNode(item, depth + 1, state, `${path}.${key}[${index}]`));
    return join(parts, key === '$and' ? 'AND' : 'OR');
  }
  if (key === '$not') {
    if (!isPlainObject(value) || Object.keys(value).length === 0) {
      throw invalidWhere(`$not expects a non-empty where object, got ${describeValue(value)}`, `${path}.$not`);
    }
    return `NOT COALESCE(${compileNode(value, depth + 1, state, `${path}.$not`)}, FALSE)`;
  }
  const isFieldOperator = (FIELD_OPERATORS as readonly string[]).includes(key);
  const message = isFieldOperator
    ? `Operator "${key}" must be used inside a field condition, e.g. {"amount": {"${key}": ...}}`
    : `Unknown operator "${clip(key)}"; at this level use a field name or one of $and, $or, $not`;
  // An unknown field and an unknown operator are both `unknown_field`, with the available fields.
  throw new DomainError('unknown_field', message, {
    operator: clip(key),
    field: null,
    availableOperators: [...LOGICAL_OPERATORS],
    availableFields: state.object.fields.map((f) => f.name),
  });
}

/** A field's condition: an operator object, or any other value as shorthand for $eq. */
function compileField(field: FieldMeta, spec: unknown, state: CompileState): string {
  if (!isPlainObject(spec)) return compileOperator(field, '$eq', spec, state);
  const operators = Object.keys(spec);
  if (operators.length === 0) {
    throw invalidWhere(`Condition for field "${field.name}" is empty; use e.g. {"$eq": ...}`, field.name);
  }
  const parts = operators.map((operator) =>
    compileOperator(field, checkOperator(field, operator, state.object), spec[operator], state),
  );
  return join(parts, 'AND');
}

/** Refuses names outside the language (unknown_field, like an unknown field) and operators the field type forbids (invalid_operator). */
function checkOperator(field: FieldMeta, operator: string, object: ObjectMeta): FieldOperator {
  const availableOperators = operatorsForField(field);
  if (!(FIELD_OPERATORS as readonly string[]).includes(operator)) {
    const hint =
      fieldTypeOf(field.type).shape === 'document' && !operator.startsWith('$')
        ? `; to compare a json field with an object use {"${field.name}": {"$eq": {...}}}`
        : `; use one of ${availableOperators.join(', ')}`;
    throw new DomainError('unknown_field', `Unknown operator "${clip(operator)}" on field "${field.name}"${hint}`, {
      operator: clip(operator),
      field: field.name,
      availableOperators,
      availableFields: object.fields.map((f) => f.name),
    });
  }
  if (!availableOperators.includes(operator as FieldOperator)) {
    throw new DomainError(
      'invalid_operator',
      `Operator "${operator}" is not allowed on ${typeName(field)} field "${field.name}"; use one of ${availableOperators.join(', ')}`,
      { operator, field: field.name, type: typeName(field), availableOperators },
    );
  }
  return operator as FieldOperator;
}

function compileOperator(field: FieldMeta, operator: FieldOperator, operand: unknown, state: CompileState): string {
  state.conditions += 1;
  if (state.conditions > MAX_WHERE_CONDITIONS) {
    throw invalidWhere(`where has more than ${MAX_WHERE_CONDITIONS} conditions`, field.name, {
      maxConditions: MAX_WHERE_CONDITIONS,
    });
  }
  const column = fieldSql(field, state.params, state.tableAlias);
  const usesPlaceholder = isPlaceholder(operand) || (Array.isArray(operand) && operand.some(isPlaceholder));
  if (state.placeholders && usesPlaceholder) {
    // Checking a policy: the field and operator are known to be valid; the values come with a caller.
    if (state.placeholders === 'validate') return 'TRUE';
    const resolved = Array.isArray(operand)
      ? operand.map((item) => resolvePlaceholder(item, state.placeholders as Exclude<Placeholders, 'validate'>))
      : resolvePlaceholder(operand, state.placeholders);
    try {
      return compileResolved(field, operator, resolved, column, state);
    } catch (error) {
      if (error instanceof DomainError) throw new UnresolvedPlaceholder(String(operand));
      throw error;
    }
  }
  return compileResolved(field, operator, operand, column, state);
}

function resolvePlaceholder(value: unknown, placeholders: Exclude<Placeholders, 'validate'>): unknown {
  if (!isPlaceholder(value)) return value;
  if (value === SUBJECT_PLACEHOLDER) return placeholders.subject;
  const name = value.slice(ATTRIBUTE_PLACEHOLDER.length);
  if (!Object.hasOwn(placeholders.attributes, name)) throw new UnresolvedPlaceholder(value);
  return placeholders.attributes[name];
}

function compileResolved(
  field: FieldMeta,
  operator: FieldOperator,
  operand: unknown,
  column: string,
  state: CompileState,
): string {
  switch (operator) {
    case '$eq':
    case '$ne':
      return compileEquality(field, operator, operand, column, state);
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      return `${column} ${COMPARISON_SQL[operator]} ${bind(field, operator, operand, state)}`;
    case '$between':
      return compileBetween(field, operand, column, state);
    case '$in':
    case '$nin':
      return compileIn(field, operator, operand, column, state);
    case '$contains':
    case '$notContains':
    case '$startsWith':
    case '$endsWith':
      return fieldTypeOf(field.type).shape === 'set'
        ? compileHasOptions(field, operator, operand, column, state)
        : compileLike(field, operator, operand, column, state);
    case '$null':
      if (typeof operand !== 'boolean') {
        throw invalidOperand(field, operator, 'true (value is empty) or false (value is set)', operand);
      }
      // A links value is never null: no links is the empty array.
      if (field.related?.kind === 'links') return `cardinality(${column}) ${operand ? '=' : '>'} 0`;
      return `${column} ${operand ? 'IS NULL' : 'IS NOT NULL'}`;
  }
}

/** Encodes a non-null operand with the field codec and binds it with its cast. */
function bind(field: FieldMeta, operator: FieldOperator, operand: unknown, state: CompileState): string {
  if (operand === null || operand === undefined) {
    throw invalidOperand(field, operator, 'a non-null value (use {"$null": true} to match empty values)', operand);
  }
  return `${state.params.add(encodeFieldValue(field, operand, { operator }))}::${bindCast(field)}`;
}

function compileEquality(
  field: FieldMeta,
  operator: '$eq' | '$ne',
  operand: unknown,
  column: string,
  state: CompileState,
): string {
  if (operand === null) return `${column} ${operator === '$eq' ? 'IS NULL' : 'IS NOT NULL'}`;
  const shape = fieldTypeOf(field.type).shape;
  if (Array.isArray(operand) && shape === 'scalar') {
    throw invalidOperand(field, operator, 'a single value (use $in / $nin to match any of several values)', operand);
  }
  const value = bind(field, operator, operand, state);
  if (shape === 'set') {
    // Same set of options in any order; COALESCE makes $ne keep rows whose value is NULL.
    const sameSet = `(${column} @> ${value} AND ${column} <@ ${value})`;
    return operator === '$eq' ? sameSet : `NOT COALESCE(${sameSet}, FALSE)`;
  }
  return operator === '$eq' ? `${column} = ${value}` : `${column} IS DISTINCT FROM ${value}`;
}

function compileBetween(field: FieldMeta, operand: unknown, column: string, state: CompileState): string {
  if (!Array.isArray(operand) || operand.length !== 2) {
    throw invalidOperand(field, '$between', 'an array of exactly two values [low, high]', operand);
  }
  const low = bind(field, '$between', operand[0], state);
  const high = bind(field, '$between', operand[1], state);
  return `${column} BETWEEN ${low} AND ${high}`;
}

/**
 * One array parameter instead of one parameter per item: a stable SQL shape whatever the list length.
 * Null items are pulled out and turned into IS NULL / IS NOT NULL, which `= ANY` cannot express.
 */
function compileIn(field: FieldMeta, operator: '$in' | '$nin', operand: unknown, column: string, state: CompileState): string {
  if (!Array.isArray(operand) || operand.length === 0) {
    throw invalidOperand(field, operator, 'a non-empty array of values', operand);
  }
  if (operand.length > MAX_IN_VALUES) {
    throw new DomainError(
      'too_many_values',
      `${operator} on field "${field.name}" has ${operand.length} values; at most ${MAX_IN_VALUES} are allowed`,
      { operator, field: field.name, count: operand.length, max: MAX_IN_VALUES },
    );
  }
  const values = operand.filter((item) => item !== null).map((item) => encodeFieldValue(field, item, { operator }));
  const withNull = values.length < operand.length;
  if (values.length === 0) return `${column} ${operator === '$in' ? 'IS NULL' : 'IS NOT NULL'}`;

  const set = fieldTypeOf(field.type).shape === 'set';
  const list = `${state.params.add(values)}::${bindCast(field)}${set ? '' : '[]'}`;
  // A set of options: the record has any of them (overlap), not "equals one of them".
  const matches = set ? `${column} && ${list}` : `${column} = ANY(${list})`;
  if (operator === '$in') return withNull ? `(${matches} OR ${column} IS NULL)` : matches;
  return withNull ? `(${column} IS NOT NULL AND NOT (${matches}))` : `(${column} IS NULL OR NOT (${matches}))`;
}

/** Case-insensitive substring/prefix/suffix match; the operand's own %, _ and \ are matched literally. */
function compileLike(
  field: FieldMeta,
  operator: '$contains' | '$notContains' | '$startsWith' | '$endsWith',
  operand: unknown,
  column: string,
  state: CompileState,
): string {
  if (typeof operand !== 'string') throw invalidOperand(field, operator, 'a string', operand);
  const text = encodeFieldValue(field, operand, { operator }) as string;
  const escaped = text.replace(/[\\%_]/g, (char) => `\\${char}`);
  const pattern = operator === '$startsWith' ? `${escaped}%` : operator === '$endsWith' ? `%${escaped}` : `%${escaped}%`;
  const value = `${state.params.add(pattern)}::text`;
  if (operator === '$notContains') return `(${column} IS NULL OR ${column} NOT ILIKE ${value} ${LIKE_ESCAPE})`;
  return `${column} ILIKE ${value} ${LIKE_ESCAPE}`;
}

/** multiselect $contains / $notContains: the value holds every given option (`@>`). */
function compileHasOptions(
  field: FieldMeta,
  operator: '$contains' | '$notContains' | '$startsWith' | '$endsWith',
  operand: unknown,
  column: string,
  state: CompileState,
): string {
  const contains = `${column} @> ${bind(field, operator, operand, state)}`;
  return operator === '$contains' ? contains : `(${column} IS NULL OR NOT (${contains}))`;
}

function join(parts: string[], connective: 'AND' | 'OR'): string {
  return parts.length === 1 ? parts[0] : `(${parts.join(` ${connective} `)})`;
}

function invalidWhere(message: string, path: string, extra: Record<string, unknown> = {}): DomainError {
  return new DomainError('invalid_where', message, { path: clip(path, 200), ...extra });
}

function invalidOperand(field: FieldMeta, operator: FieldOperator, expected: string, received: unknown): DomainError {
  return new DomainError(
    'invalid_value',
    `Field "${field.name}" expects ${expected} for ${operator}, got ${describeValue(received)}`,
    { field: field.name, type: typeName(field), operator, expected },
  );
}

/**
 * The caller's row filter of a scoped object (ObjectMeta.rowFilter) as one SQL boolean, or undefined
 * when the caller sees every row. Each policy's filter is compiled against the whole object with the
 * caller's subject and attributes bound as parameters; a filter that cannot be resolved for this
 * caller (a missing attribute, a field deleted since) matches nothing: access fails closed.
 */
export function compileRowFilter(
  object: ObjectMeta,
  params: SqlParams,
  options: { tableAlias?: string; asValue?: boolean } = {},
): string | undefined {
  const scope = object.rowFilter;
  if (!scope) return undefined;
  const placeholders = { subject: scope.subject, attributes: scope.attributes };
  const parts = scope.filters.map((filter) => {
    const mark = params.values.length;
    try {
      return compileWhere(scope.object, filter, params, { tableAlias: options.tableAlias, placeholders });
    } catch (error) {
      if (!(error instanceof UnresolvedPlaceholder) && !(error instanceof DomainError)) throw error;
      params.values.length = mark; // the values of a discarded filter must not stay bound
      return 'FALSE';
    }
  });
  if (!parts.length) return 'FALSE';
  // In a WHERE, NULL already drops the row; a COALESCE there would hide the filter from the planner
  // (no index, no selectivity estimate). A selected value must be true or false.
  return options.asValue ? `COALESCE(${join(parts, 'OR')}, FALSE)` : join(parts, 'OR');
}

/**
 * The caller's `where` ANDed with its row filter: what every query, count and aggregate runs with;
 * with `search`, also ANDed with compileSearch.
 */
export function compileScopedWhere(object: ObjectMeta, where: unknown, params: SqlParams, search?: string): string {
  const scope = compileRowFilter(object, params);
  const own = compileWhere(object, where, params);
  const found = search === undefined ? undefined : compileSearch(object, search, params);
  return join(
    [scope, own, found].filter((part): part is string => part !== undefined),
    'AND',
  );
}

/** An ILIKE pattern (with LIKE_ESCAPE) matching text that contains `text` literally; Postgres text holds no NUL. */
export function containsPattern(text: string): string {
  if (text.includes('\u0000')) throw new DomainError('invalid_value', 'Search text cannot contain NUL characters');
  return `%${text.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

/** The longest `?q=` search text. */
export const MAX_SEARCH_LENGTH = 200;

/**
 * `?q=`: the records where any searchable field of the caller's view of the object contains `text`,
 * ignoring case and accents. Both sides are folded by searchFold, the expression the fields' trigram
 * indexes are built over. Throws search_not_available when no visible field is searchable.
 */
export function compileSearch(object: ObjectMeta, text: string, params: SqlParams): string {
  const fields = object.fields.filter((field) => field.searchable);
  if (!fields.length) {
    throw new DomainError(
      'search_not_available',
      `"${object.name}" has no searchable field; an admin marks text fields searchable`,
      {
        object: object.name,
      },
    );
  }
  if (text.length > MAX_SEARCH_LENGTH) {
    throw new DomainError('invalid_value', `q is at most ${MAX_SEARCH_LENGTH} characters`, { max: MAX_SEARCH_LENGTH });
  }
  const value = searchFold(`${params.add(containsPattern(text))}::text`);
  // A computed text field (a concatenation, a value through a lookup) is searched through its SQL.
  return `(${fields.map((field) => `${searchFold(fieldSql(field, params))} ILIKE ${value} ${LIKE_ESCAPE}`).join(' OR ')})`;
}

/** ` and <row filter>` for statements that select one record by id (get, update, delete), or ''. */
export function rowFilterCondition(object: ObjectMeta, params: SqlParams): string {
  const scope = compileRowFilter(object, params);
  return scope === undefined ? '' : ` and ${scope}`;
}

// Related fields compile their row filter and filter here; their definitions are checked here too.
useFilterCompiler({ where: compileWhere, rowFilter: compileRowFilter });
registerFilterCheck((object, filter) => {
  compileWhere(definitionView(object), filter, new SqlParams());
});
