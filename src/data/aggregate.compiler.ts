import { CompiledQuery } from 'kysely';
import { DomainError } from '../common/domain-error';
import { IDENTIFIER_PATTERN, objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { FieldMeta, NUMERIC_TYPES, ObjectMeta, TEMPORAL_TYPES, TEXT_TYPES } from '../metadata/object-metadata.types';
import { AGGREGATE_FUNCTIONS, AggregateQuery, AggregationSpec, MAX_AGGREGATIONS, MAX_GROUP_BY_FIELDS } from './data.types';
import { isPlainObject } from '../common/plain-object';
import { decodeRow } from './field-value.codec';
import { engineLimit } from './records.compiler';
import { clip, compileScopedWhere, requireField } from './where.compiler';

/** A checked aggregate query: the statement, and what its rows hold (for decoding them). */
export interface CompiledAggregate {
  query: CompiledQuery<Record<string, unknown>>;
  groupBy: FieldMeta[];
  aggregations: AggregationSpec[];
}

/**
 * Compiles grouped aggregates over one object's table:
 *   select <group fields>, <fn(field)> as <alias>, ... from <table> where <where>
 *   [group by <group fields>] [order by <aliases or group fields>] limit $n
 * Functions, fields and aliases are checked before any SQL is built (invalid_aggregate_function,
 * invalid_aggregation, invalid_group_by, unknown_field, invalid_order_by and the where errors).
 */
export function compileAggregate(object: ObjectMeta, query: AggregateQuery): CompiledAggregate {
  const aggregations = parseAggregations(object, query.aggregations);
  const groupBy = parseGroupBy(object, query.groupBy);
  const aliases = new Set(aggregations.map((a) => a.alias));
  for (const field of groupBy) {
    if (aliases.has(field.name))
      throw new DomainError('invalid_aggregation', `Alias "${field.name}" collides with a group-by field`);
  }
  const params = new SqlParams();
  const where = compileScopedWhere(object, query.where, params);
  const selects = [
    ...groupBy.map((f) => quoteIdent(f.name)),
    ...aggregations.map((a) => `${aggregateSql(object, a)} as ${quoteIdent(a.alias)}`),
  ];
  const orderBy = compileAggregateOrderBy(query.orderBy, groupBy, aggregations);
  const limit = params.add(engineLimit(query.limit));
  const sql =
    `select ${selects.join(', ')} from ${objectTable(object.name)} where ${where}` +
    (groupBy.length ? ` group by ${groupBy.map((f) => quoteIdent(f.name)).join(', ')}` : '') +
    (orderBy ? ` order by ${orderBy}` : '') +
    ` limit ${limit}`;
  return { query: params.query(sql), groupBy, aggregations };
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
  const typed = aggregations.filter((a) => a.field && (a.function === 'min' || a.function === 'max'));
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
    for (const a of aggregations) if (!typed.includes(a)) out[a.alias] = decodeAggregate(row[a.alias]);
    return out;
  });
}

function pick(row: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, row[k]]));
}

function parseAggregations(object: ObjectMeta, input: unknown): AggregationSpec[] {
  if (!Array.isArray(input) || input.length === 0) {
    throw new DomainError('invalid_aggregation', 'aggregations must be a non-empty array of { function, field?, alias }');
  }
  if (input.length > MAX_AGGREGATIONS) throw new DomainError('invalid_aggregation', `At most ${MAX_AGGREGATIONS} aggregations`);
  const aliases = new Set<string>();
  return input.map((item) => {
    if (!isPlainObject(item))
      throw new DomainError('invalid_aggregation', 'Each aggregation is an object { function, field?, alias }');
    const fn = item.function;
    if (typeof fn !== 'string' || !(AGGREGATE_FUNCTIONS as readonly string[]).includes(fn)) {
      throw new DomainError('invalid_aggregate_function', `Unknown aggregate function "${clip(String(fn))}"`, {
        function: clip(String(fn)),
        availableFunctions: AGGREGATE_FUNCTIONS,
      });
    }
    const alias = item.alias;
    if (typeof alias !== 'string' || !IDENTIFIER_PATTERN.test(alias)) {
      throw new DomainError(
        'invalid_aggregation',
        `Alias "${clip(String(alias))}" must be snake_case (a-z, 0-9, _), at most 63 characters`,
      );
    }
    if (aliases.has(alias)) throw new DomainError('invalid_aggregation', `Alias "${alias}" is used twice`);
    aliases.add(alias);
    const spec: AggregationSpec = { function: fn as AggregationSpec['function'], alias };
    if (item.field === undefined || item.field === null) {
      if (fn !== 'count') throw new DomainError('invalid_aggregation', `${fn} needs a field`);
      return spec;
    }
    if (typeof item.field !== 'string') throw new DomainError('invalid_aggregation', 'field must be a string');
    const field = requireField(object, item.field);
    if ((fn === 'sum' || fn === 'avg') && !NUMERIC_TYPES.includes(field.type as never)) {
      throw new DomainError('invalid_aggregation', `${fn} needs a numeric field; "${field.name}" is ${field.type}`);
    }
    if ((fn === 'min' || fn === 'max') && !isOrderable(field)) {
      throw new DomainError('invalid_aggregation', `${fn} is not defined for ${field.type} field "${field.name}"`);
    }
    spec.field = field.name;
    return spec;
  });
}

function isOrderable(field: FieldMeta): boolean {
  return (
    NUMERIC_TYPES.includes(field.type as never) ||
    TEMPORAL_TYPES.includes(field.type as never) ||
    TEXT_TYPES.includes(field.type as never)
  );
}

function parseGroupBy(object: ObjectMeta, input: unknown): FieldMeta[] {
  if (input === undefined || input === null) return [];
  const names = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) {
    throw new DomainError('invalid_group_by', 'groupBy must be an array of field names');
  }
  if (names.length > MAX_GROUP_BY_FIELDS) {
    throw new DomainError('invalid_group_by', `At most ${MAX_GROUP_BY_FIELDS} group-by fields`);
  }
  const fields = [...new Set(names as string[])].map((name) => requireField(object, name));
  for (const field of fields) {
    if (field.type === 'json' || field.type === 'textarea') {
      throw new DomainError('invalid_group_by', `Cannot group by ${field.type} field "${field.name}"`);
    }
  }
  return fields;
}

function aggregateSql(object: ObjectMeta, a: AggregationSpec): string {
  if (!a.field) return 'count(*)';
  const field = requireField(object, a.field);
  const column = quoteIdent(field.name);
  // A double precision sum fails past 1.8e308 and rounds; as numeric it is exact and cannot overflow.
  // Through text, because a direct float8 → numeric cast keeps only 15 significant digits of each value.
  const exact = field.type === 'number' ? `${column}::text::numeric` : column;
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
function compileAggregateOrderBy(input: unknown, groupBy: FieldMeta[], aggregations: AggregationSpec[]): string {
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
