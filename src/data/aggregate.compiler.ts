import { typeName } from '../metadata/links-fields';
import { isComputed } from '../metadata/computed-fields';
import { fieldSql } from './formula.compiler';
import { CompiledQuery } from 'kysely';
import { DomainError } from '../common/domain-error';
import { IDENTIFIER_PATTERN, objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { fieldTypeOf, FLOAT_COLUMN } from '../metadata/field-types';
import { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import {
  AGGREGATE_FUNCTIONS,
  AggregatePlan,
  AggregateQuery,
  AggregationSpec,
  LookupColumn,
  MAX_AGGREGATIONS,
  MAX_GROUP_BY_FIELDS,
  MeasureSpec,
  RatioSpec,
  TIME_GRAINS,
  TimeBucket,
} from './data.types';
import { isPlainObject } from '../common/plain-object';
import { decodeRow } from './field-value.codec';
import { engineLimit } from './records.compiler';
import { clip, columnRef, compileRowFilter, compileScopedWhere, compileWhere, requireField } from './where.compiler';

/** A checked aggregate query: the statement, and what its rows hold (for decoding them). */
export interface CompiledAggregate {
  query: CompiledQuery<Record<string, unknown>>;
  groupBy: FieldMeta[];
  aggregations: Array<MeasureSpec | RatioSpec>;
}

/** The base table's alias inside the derived source of joined and bucketed columns. */
const BASE_ALIAS = 't';

/**
 * Compiles grouped aggregates over one object's table:
 *   select <group fields>, <fn(field)> as <alias>, ... from <table> where <where>
 *   [group by <group fields>] [order by <aliases or group fields>] limit $n
 * Functions, fields and aliases are checked before any SQL is built (invalid_aggregate_function,
 * invalid_aggregation, invalid_group_by, unknown_field, invalid_order_by and the where errors).
 */
export function compileAggregate(object: ObjectMeta, query: AggregateQuery): CompiledAggregate {
  return compileAggregatePlan(object, {
    where: query.where,
    groupBy: parseGroupByNames(query.groupBy),
    measures: parseAggregations(object, query.aggregations),
    orderBy: query.orderBy,
    limit: query.limit,
  });
}

/**
 * The same engine for typed plans (the semantic layer's metrics). Beyond compileAggregate, a plan may
 * filter each aggregation on its own (`FILTER (WHERE ..)`), divide two aggregations (null when the
 * denominator is 0), group by a column of the record a lookup points to (a left join, under the target's
 * row filter, so records the caller may not read group as null) and by a time bucket in UTC. Joined and
 * bucketed columns come from a derived table over the object's table, so the where, group by and order by
 * treat them like fields. `targets`: the caller's view of each lookup's target object, by lookup field.
 */
export function compileAggregatePlan(
  object: ObjectMeta,
  plan: AggregatePlan,
  targets: Readonly<Record<string, ObjectMeta>> = {},
): CompiledAggregate {
  const measures = plan.measures.map((m) => checkMeasure(object, m));
  if (!measures.length) throw new DomainError('invalid_aggregation', 'At least one aggregation is needed');
  if (measures.length > MAX_AGGREGATIONS)
    throw new DomainError('invalid_aggregation', `At most ${MAX_AGGREGATIONS} aggregations`);
  const params = new SqlParams();
  const source = compileSource(object, plan, targets, params);
  // A time bucket is grouped by on top of the fields.
  const groupBy = parseGroupBy(source.object, plan.groupBy, plan.timeBucket ? 1 : 0);
  const aliases = new Set<string>();
  for (const m of measures) {
    if (aliases.has(m.alias)) throw new DomainError('invalid_aggregation', `Alias "${m.alias}" is used twice`);
    aliases.add(m.alias);
  }
  for (const field of groupBy) {
    if (aliases.has(field.name))
      throw new DomainError('invalid_aggregation', `Alias "${field.name}" collides with a group-by field`);
  }
  const selects = [
    ...groupBy.map((f) => quoteIdent(f.name)),
    ...measures.map((m) => `${measureSql(source.object, m, params)} as ${quoteIdent(m.alias)}`),
  ];
  const where = compileScopedWhere(source.object, plan.where, params);
  const orderBy = compileAggregateOrderBy(plan.orderBy, groupBy, measures);
  const limit = params.add(engineLimit(plan.limit));
  const sql =
    `select ${selects.join(', ')} from ${source.sql} where ${where}` +
    (groupBy.length ? ` group by ${groupBy.map((f) => quoteIdent(f.name)).join(', ')}` : '') +
    (orderBy ? ` order by ${orderBy}` : '') +
    ` limit ${limit}`;
  return { query: params.query(sql), groupBy, aggregations: measures };
}

/**
 * What the statement selects from: the object's table, or a derived table of it with joined lookup
 * columns and a time bucket, and the object as the rest of the compiler sees that source (its fields
 * plus one per extra column).
 */
function compileSource(
  object: ObjectMeta,
  plan: AggregatePlan,
  targets: Readonly<Record<string, ObjectMeta>>,
  params: SqlParams,
): { sql: string; object: ObjectMeta } {
  const lookups = plan.lookups ?? [];
  const formulas = object.fields.filter(isComputed);
  if (!lookups.length && !plan.timeBucket && !formulas.length) return { sql: objectTable(object.name), object };
  // Every column of the base table stays in the derived one (row filters may name hidden fields).
  const taken = new Set((object.rowFilter?.object ?? object).fields.map((f) => f.name));
  const extra: FieldMeta[] = [];
  const claim = (alias: string) => {
    if (!IDENTIFIER_PATTERN.test(alias) || taken.has(alias)) {
      throw new DomainError('invalid_group_by', `The column name "${clip(alias)}" is not free on "${object.name}"`);
    }
    taken.add(alias);
  };
  // Computed fields become columns of the derived table: grouped, filtered and aggregated by name like any other.
  const columns: string[] = formulas.map((f) => `${fieldSql(f, params, BASE_ALIAS)} as ${quoteIdent(f.name)}`);
  const joins: string[] = [];
  for (const [index, lookup] of lookups.entries()) {
    const { field, target, targetField } = resolveLookup(object, lookup, targets);
    claim(lookup.alias);
    const joined = `j${index}`;
    const scope = compileRowFilter(target, params, { tableAlias: joined });
    joins.push(
      ` left join ${objectTable(target.name)} as ${quoteIdent(joined)} on ${columnRef('id', joined)} = ${columnRef(field.name, BASE_ALIAS)}` +
        (scope === undefined ? '' : ` and ${scope}`),
    );
    // A computed field of the target reads through its own SQL (its view of what it reads) on the joined row.
    // Without a linked record the value is null, as a column of the missing row would be (a count over it is not 0).
    const value = isComputed(targetField)
      ? `case when ${columnRef('id', joined)} is not null then ${fieldSql(targetField, params, joined)} end`
      : columnRef(targetField.name, joined);
    columns.push(`${value} as ${quoteIdent(lookup.alias)}`);
    extra.push({
      ...targetField,
      formula: undefined,
      related: undefined,
      name: lookup.alias,
      label: `${field.label} ${targetField.label}`,
      unique: false,
      system: false,
    });
  }
  if (plan.timeBucket) {
    const bucket = plan.timeBucket;
    claim(bucket.alias);
    columns.push(`${timeBucketSql(object, bucket, params)} as ${quoteIdent(bucket.alias)}`);
    extra.push({ name: bucket.alias, label: 'Period', type: 'text', required: false, unique: false, indexed: false });
  }
  const sql =
    `(select ${[`${quoteIdent(BASE_ALIAS)}.*`, ...columns].join(', ')} from ${objectTable(object.name)} as ${quoteIdent(BASE_ALIAS)}` +
    `${joins.join('')}) as ${quoteIdent(BASE_ALIAS)}`;
  const fields = object.fields.map((f) => (isComputed(f) ? { ...f, formula: undefined, related: undefined } : f));
  return { sql, object: { ...object, fields: [...fields, ...extra] } };
}

function resolveLookup(
  object: ObjectMeta,
  lookup: LookupColumn,
  targets: Readonly<Record<string, ObjectMeta>>,
): { field: FieldMeta; target: ObjectMeta; targetField: FieldMeta } {
  const field = requireField(object, lookup.lookup);
  const target = targets[field.name];
  if (field.type !== 'lookup' || !target || target.name !== field.reference) {
    throw new DomainError('invalid_group_by', `"${field.name}" is not a lookup field of "${object.name}"`, { field: field.name });
  }
  const targetField = requireField(target, lookup.field);
  if (!fieldTypeOf(targetField.type).groups) {
    throw new DomainError('invalid_group_by', `Cannot group by ${targetField.type} field "${target.name}.${targetField.name}"`);
  }
  return { field, target, targetField };
}

/** The UTC start of the value's bucket as "YYYY-MM-DD"; weeks start on Monday (ISO weeks). */
function timeBucketSql(object: ObjectMeta, bucket: TimeBucket, params: SqlParams): string {
  if (!(TIME_GRAINS as readonly string[]).includes(bucket.grain)) {
    throw new DomainError('invalid_group_by', `Unknown time grain "${clip(String(bucket.grain))}"`, {
      availableGrains: TIME_GRAINS,
    });
  }
  const field = requireField(object, bucket.field);
  if (fieldTypeOf(field.type).family !== 'temporal') {
    throw new DomainError('invalid_group_by', `Time buckets need a date or datetime field; "${field.name}" is ${field.type}`);
  }
  const column = fieldSql(field, params, BASE_ALIAS);
  // A timestamptz is cut in UTC whatever the session's time zone; a date has no zone.
  const local = field.type === 'datetime' ? `(${column} at time zone 'UTC')` : `${column}::timestamp`;
  return `to_char(date_trunc('${bucket.grain}', ${local}), 'YYYY-MM-DD')`;
}

/**
 * Rows of a compiled aggregate as JSON: min/max keep their field's type (a date stays a date); counts,
 * sums and averages are numbers, or exact decimal strings beyond 2^53.
 */
export function decodeAggregateRows(
  object: ObjectMeta,
  compiled: CompiledAggregate,
  rows: Record<string, unknown>[],
): Record<string, unknown>[] {
  const { groupBy, aggregations } = compiled;
  const typed = aggregations.filter(
    (a): a is MeasureSpec => 'function' in a && a.field !== undefined && (a.function === 'min' || a.function === 'max'),
  );
  const resultObject: ObjectMeta = {
    ...object,
    fields: [...groupBy, ...typed.map((a) => ({ ...requireField(object, a.field!), name: a.alias }))],
  };
  return rows.map((row) => {
    const out = decodeRow(
      resultObject,
      pick(
        row,
        resultObject.fields.map((f) => f.name),
      ),
    );
    for (const a of aggregations) if (!typed.includes(a as MeasureSpec)) out[a.alias] = decodeAggregate(row[a.alias]);
    return out;
  });
}

function pick(row: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, row[k]]));
}

function parseAggregations(object: ObjectMeta, input: unknown): MeasureSpec[] {
  if (!Array.isArray(input) || input.length === 0) {
    throw new DomainError('invalid_aggregation', 'aggregations must be a non-empty array of { function, field?, alias }');
  }
  if (input.length > MAX_AGGREGATIONS) throw new DomainError('invalid_aggregation', `At most ${MAX_AGGREGATIONS} aggregations`);
  return input.map((item) => {
    if (!isPlainObject(item))
      throw new DomainError('invalid_aggregation', 'Each aggregation is an object { function, field?, alias }');
    if (item.field !== undefined && item.field !== null && typeof item.field !== 'string') {
      checkFunction(item.function);
      checkAlias(item.alias);
      throw new DomainError('invalid_aggregation', 'field must be a string');
    }
    return { function: item.function, alias: item.alias, field: item.field ?? undefined } as MeasureSpec;
  });
}

/** Checks one aggregation (or both sides of a ratio) against the object; returns it normalised. */
function checkMeasure(object: ObjectMeta, input: MeasureSpec | RatioSpec): MeasureSpec | RatioSpec {
  const alias = checkAlias(input.alias);
  if ('numerator' in input) {
    return {
      alias,
      numerator: checkMeasure(object, { ...input.numerator, alias }) as MeasureSpec,
      denominator: checkMeasure(object, { ...input.denominator, alias }) as MeasureSpec,
    };
  }
  const fn = checkFunction(input.function);
  const spec: MeasureSpec = { function: fn, alias };
  if (input.filter !== undefined) spec.filter = input.filter;
  if (input.emptyAsZero) spec.emptyAsZero = true;
  if (input.field === undefined) {
    if (fn !== 'count') throw new DomainError('invalid_aggregation', `${fn} needs a field`);
    return spec;
  }
  const field = requireField(object, input.field);
  const measures: readonly string[] = fieldTypeOf(field.type).measures;
  if ((fn === 'sum' || fn === 'avg') && !measures.includes(fn)) {
    throw new DomainError('invalid_aggregation', `${fn} needs a numeric field; "${field.name}" is ${typeName(field)}`);
  }
  if ((fn === 'min' || fn === 'max') && !measures.includes(fn)) {
    throw new DomainError('invalid_aggregation', `${fn} is not defined for ${typeName(field)} field "${field.name}"`);
  }
  spec.field = field.name;
  return spec;
}

function checkFunction(fn: unknown): AggregationSpec['function'] {
  if (typeof fn !== 'string' || !(AGGREGATE_FUNCTIONS as readonly string[]).includes(fn)) {
    throw new DomainError('invalid_aggregate_function', `Unknown aggregate function "${clip(String(fn))}"`, {
      function: clip(String(fn)),
      availableFunctions: AGGREGATE_FUNCTIONS,
    });
  }
  return fn as AggregationSpec['function'];
}

function checkAlias(alias: unknown): string {
  if (typeof alias !== 'string' || !IDENTIFIER_PATTERN.test(alias)) {
    throw new DomainError(
      'invalid_aggregation',
      `Alias "${clip(String(alias))}" must be snake_case (a-z, 0-9, _), at most 63 characters`,
    );
  }
  return alias;
}

function parseGroupByNames(input: unknown): string[] {
  if (input === undefined || input === null) return [];
  const names = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) {
    throw new DomainError('invalid_group_by', 'groupBy must be an array of field names');
  }
  return names as string[];
}

function parseGroupBy(object: ObjectMeta, names: string[], extra = 0): FieldMeta[] {
  if (names.length > MAX_GROUP_BY_FIELDS + extra) {
    throw new DomainError('invalid_group_by', `At most ${MAX_GROUP_BY_FIELDS} group-by fields`);
  }
  const fields = [...new Set(names)].map((name) => requireField(object, name));
  for (const field of fields) {
    if (!fieldTypeOf(field.type).groups) {
      throw new DomainError('invalid_group_by', `Cannot group by ${typeName(field)} field "${field.name}"`);
    }
  }
  return fields;
}

/**
 * One aggregation's SQL: its function, its own filter, and for a sum 0 for "no rows" when asked; or a
 * ratio of two. Averages and extremes of no rows stay null: there is no such value, and 0 would be a figure
 * the data does not hold (and no value at all for a date or a text).
 */
function measureSql(object: ObjectMeta, m: MeasureSpec | RatioSpec, params: SqlParams): string {
  if ('numerator' in m) {
    return `(${measureSql(object, m.numerator, params)})::numeric / nullif((${measureSql(object, m.denominator, params)})::numeric, 0)`;
  }
  const filter = m.filter === undefined ? '' : ` filter (where ${compileWhere(object, m.filter, params)})`;
  const sql = `${aggregateSql(object, m)}${filter}`;
  return m.emptyAsZero && m.function === 'sum' ? `coalesce(${sql}, 0)` : sql;
}

function aggregateSql(object: ObjectMeta, a: MeasureSpec): string {
  if (!a.field) return 'count(*)';
  const field = requireField(object, a.field);
  const column = quoteIdent(field.name);
  // A double precision sum fails past 1.8e308 and rounds; as numeric it is exact and cannot overflow.
  // Through text, because a direct float8 → numeric cast keeps only 15 significant digits of each value.
  const exact = fieldTypeOf(field.type).column === FLOAT_COLUMN ? `${column}::text::numeric` : column;
  switch (a.function) {
    case 'count':
      return `count(${column})`;
    case 'count_distinct':
      return `count(distinct ${column})`;
    case 'sum':
      return `sum(${exact})`;
    case 'avg':
      return `avg(${exact})`;
    case 'min':
      return `min(${column})`;
    case 'max':
      return `max(${column})`;
  }
}

/** Order groups by an alias or a group-by field; default: the group-by fields. */
function compileAggregateOrderBy(input: unknown, groupBy: FieldMeta[], aggregations: Array<{ alias: string }>): string {
  const available = [...groupBy.map((f) => f.name), ...aggregations.map((a) => a.alias)];
  const defaults = groupBy.map((f) => `${quoteIdent(f.name)} asc`).join(', ');
  if (input === undefined || input === null) return defaults;
  const items = Array.isArray(input) ? input : [input];
  const parts = items.map((item) => {
    if (!isPlainObject(item) || typeof item.field !== 'string') {
      throw new DomainError('invalid_order_by', 'orderBy items are { field, order } where field is an alias or a group-by field');
    }
    if (!available.includes(item.field)) {
      throw new DomainError(
        'unknown_field',
        `Cannot order by "${clip(item.field)}": use an aggregation alias or a group-by field`,
        {
          field: clip(item.field),
          availableFields: available,
        },
      );
    }
    const order = item.order === undefined ? 'asc' : typeof item.order === 'string' ? item.order.toLowerCase() : undefined;
    if (order !== 'asc' && order !== 'desc') throw new DomainError('invalid_order_by', 'order must be "asc" or "desc"');
    return `${quoteIdent(item.field)} ${order} nulls last`;
  });
  return [...parts, defaults].filter(Boolean).join(', ');
}

/**
 * pg returns numeric/bigint aggregates as strings. JSON clients get numbers, except past 2^53, where a
 * number would silently round: there the exact decimal string (sums of big integers, overflowing doubles).
 */
function decodeAggregate(value: unknown): unknown {
  if (typeof value !== 'string' || !/^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(value)) return value;
  const number = Number(value);
  if (Math.abs(number) <= Number.MAX_SAFE_INTEGER) return number;
  // numeric's text never has an exponent; trailing zeros of the fraction (avg's scale) say nothing.
  return value.includes('.') ? value.replace(/\.?0+$/, '') : value;
}
