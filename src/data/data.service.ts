import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { isUuid } from '../common/uuid';
import { runSql } from '../database/sql';
import { IDENTIFIER_PATTERN, objectTable, quoteIdent } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { MetadataService } from '../metadata/metadata.service';
import { indexName } from '../metadata/metadata.naming';
import { FieldMeta, NUMERIC_TYPES, ObjectMeta, TEMPORAL_TYPES, TEXT_TYPES } from '../metadata/object-metadata.types';
import {
  AGGREGATE_FUNCTIONS, AggregateQuery, AggregationSpec, FindQuery, FindResult, MAX_AGGREGATIONS, MAX_ENGINE_LIMIT,
  MAX_GROUP_BY_FIELDS,
} from './data.types';
import { bindCast, decodeRow, encodeFieldValue } from './field-value.codec';
import { compileOrderBy, compileProjection } from './order-by.compiler';
import { clip, compileWhere, requireField } from './where.compiler';

/**
 * The data engine: find / count / findOne / aggregate / insert / update / delete over object
 * tables. Identifiers come from metadata only; every value is a bind parameter. Every method takes
 * an optional EntityManager so callers can run it inside their own (e.g. READ ONLY) transaction.
 */
@Injectable()
export class DataService {
  constructor(
    private readonly em: EntityManager,
    private readonly metadata: MetadataService,
  ) {}

  async find(objectName: string, query: FindQuery, em: EntityManager = this.em.fork()): Promise<FindResult> {
    return this.withObject(objectName, em, async (object) => {
      const params = new SqlParams();
      const projection = compileProjection(object, query.fields);
      const where = compileWhere(object, query.where, params);
      const orderBy = compileOrderBy(object, query.orderBy);
      const limit = params.add(Math.min(Math.max(1, Math.floor(query.limit)), MAX_ENGINE_LIMIT));
      const offset = params.add(Math.max(0, Math.floor(query.offset)));
      // One statement: the window count gives the total without a second scan of the filter.
      const rows = await runSql<Record<string, unknown>>(
        em,
        `select ${projection.sql}, count(*) over () as "__total" from ${objectTable(object.name)}
          where ${where} order by ${orderBy} limit ${limit} offset ${offset}`,
        params.values,
      );
      let total = rows.length ? Number(rows[0].__total) : 0;
      if (!rows.length && query.offset > 0) total = await this.count(objectName, query.where, em);
      return { records: rows.map((row) => decodeRow(object, stripTotal(row))), total };
    });
  }

  async count(objectName: string, where: unknown, em: EntityManager = this.em.fork()): Promise<number> {
    return this.withObject(objectName, em, async (object) => {
      const params = new SqlParams();
      const sql = `select count(*) as "count" from ${objectTable(object.name)} where ${compileWhere(object, where, params)}`;
      const [row] = await runSql<{ count: string }>(em, sql, params.values);
      return Number(row.count);
    });
  }

  /** One record by id, or `record_not_found` (a malformed id is not found too). */
  async findOne(objectName: string, id: unknown, fields?: unknown, em: EntityManager = this.em.fork()): Promise<Record<string, unknown>> {
    return this.withObject(objectName, em, async (object) => {
      const projection = compileProjection(object, fields);
      if (!isUuid(id)) throw notFound(object.name, id);
      const rows = await runSql(em, `select ${projection.sql} from ${objectTable(object.name)} where "id" = $1::uuid`, [id]);
      if (!rows.length) throw notFound(object.name, id);
      return decodeRow(object, rows[0]);
    });
  }

  /** Grouped aggregates. Functions, fields and aliases are checked before any SQL is built. */
  async aggregate(objectName: string, query: AggregateQuery, em: EntityManager = this.em.fork()): Promise<Record<string, unknown>[]> {
    return this.withObject(objectName, em, async (object) => {
      const aggregations = parseAggregations(object, query.aggregations);
      const groupBy = parseGroupBy(object, query.groupBy);
      const aliases = new Set(aggregations.map((a) => a.alias));
      for (const field of groupBy) {
        if (aliases.has(field.name)) throw new DomainError('invalid_aggregation', `Alias "${field.name}" collides with a group-by field`);
      }
      const params = new SqlParams();
      const where = compileWhere(object, query.where, params);
      const selects = [
        ...groupBy.map((f) => quoteIdent(f.name)),
        ...aggregations.map((a) => `${aggregateSql(object, a)} as ${quoteIdent(a.alias)}`),
      ];
      const orderBy = compileAggregateOrderBy(query.orderBy, groupBy, aggregations);
      const limit = params.add(Math.min(Math.max(1, Math.floor(query.limit)), MAX_ENGINE_LIMIT));
      const sql =
        `select ${selects.join(', ')} from ${objectTable(object.name)} where ${where}` +
        (groupBy.length ? ` group by ${groupBy.map((f) => quoteIdent(f.name)).join(', ')}` : '') +
        (orderBy ? ` order by ${orderBy}` : '') +
        ` limit ${limit}`;
      const rows = await runSql<Record<string, unknown>>(em, sql, params.values);
      // min/max keep their field's type (a date stays a date); counts, sums and averages are numbers.
      const typed = aggregations.filter((a) => a.field && (a.function === 'min' || a.function === 'max'));
      const resultObject: ObjectMeta = {
        ...object,
        fields: [...groupBy, ...typed.map((a) => ({ ...requireField(object, a.field!), name: a.alias }))],
      };
      return rows.map((row) => {
        const out = decodeRow(resultObject, pick(row, resultObject.fields.map((f) => f.name)));
        for (const a of aggregations) if (!typed.includes(a)) out[a.alias] = decodeAggregate(row[a.alias]);
        return out;
      });
    });
  }

  async insert(objectName: string, input: unknown, em: EntityManager = this.em.fork()): Promise<Record<string, unknown>> {
    const [record] = await this.insertMany(objectName, [input], em);
    return record;
  }

  /** Inserts records in one statement (all or nothing); each is validated like a single insert. */
  async insertMany(objectName: string, inputs: unknown[], em: EntityManager = this.em.fork()): Promise<Record<string, unknown>[]> {
    return this.withObject(objectName, em, async (object) => {
      if (!inputs.length) return [];
      const encoded = inputs.map((input) => encodeWrite(object, input, 'insert'));
      const columns = [...new Set(encoded.flatMap((values) => [...values.keys()]))];
      const fields = columns.map((name) => requireField(object, name));
      const params = new SqlParams();
      const rowsSql = encoded.map(
        (values) => `(${fields.map((f) => (values.has(f.name) ? `${params.add(values.get(f.name))}::${bindCast(f)}` : 'default')).join(', ')})`,
      );
      const sql = columns.length
        ? `insert into ${objectTable(object.name)} (${fields.map((f) => quoteIdent(f.name)).join(', ')}) values ${rowsSql.join(', ')} returning *`
        : `insert into ${objectTable(object.name)} default values returning *`;
      const rows = await this.writeSql(object, em, sql, params.values);
      return rows.map((row) => decodeRow(object, row));
    });
  }

  /** Partial update: only the given fields change; `updated_at` moves forward. */
  async update(objectName: string, id: unknown, input: unknown, em: EntityManager = this.em.fork()): Promise<Record<string, unknown>> {
    return this.withObject(objectName, em, async (object) => {
      const values = encodeWrite(object, input, 'update');
      if (!isUuid(id)) throw notFound(object.name, id);
      const params = new SqlParams();
      const sets = [...values.entries()].map(([name, value]) => {
        const field = requireField(object, name);
        return `${quoteIdent(name)} = ${params.add(value)}::${bindCast(field)}`;
      });
      sets.push(`"updated_at" = now()`);
      const sql = `update ${objectTable(object.name)} set ${sets.join(', ')} where "id" = ${params.add(id)}::uuid returning *`;
      const rows = await this.writeSql(object, em, sql, params.values);
      if (!rows.length) throw notFound(object.name, id);
      return decodeRow(object, rows[0]);
    });
  }

  async delete(objectName: string, id: unknown, em: EntityManager = this.em.fork()): Promise<void> {
    return this.withObject(objectName, em, async (object) => {
      if (!isUuid(id)) throw notFound(object.name, id);
      const rows = await this.writeSql(object, em, `delete from ${objectTable(object.name)} where "id" = $1::uuid returning "id"`, [id]);
      if (!rows.length) throw notFound(object.name, id);
    });
  }

  /**
   * Runs `work` with the object's (cached) definition. If the table no longer matches it (another
   * replica changed the object a moment ago), the cache is dropped and the call runs once more.
   */
  private async withObject<T>(objectName: string, em: EntityManager, work: (object: ObjectMeta) => Promise<T>): Promise<T> {
    const object = await this.metadata.getObject(objectName, em);
    try {
      return await work(object);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code !== '42703' && code !== '42P01') throw error;
      this.metadata.invalidate();
      if (em.isInTransaction()) {
        throw new DomainError('metadata_changed', `The definition of "${objectName}" changed while the query ran; try again`);
      }
      return work(await this.metadata.getObject(objectName, em));
    }
  }

  /** Runs a write and turns constraint violations into errors that name the field. */
  private async writeSql(object: ObjectMeta, em: EntityManager, sql: string, params: unknown[]): Promise<Record<string, unknown>[]> {
    try {
      return await runSql(em, sql, params);
    } catch (error) {
      throw translateWriteError(object, error) ?? error;
    }
  }
}

function stripTotal(row: Record<string, unknown>): Record<string, unknown> {
  const { __total: _ignored, ...rest } = row;
  return rest;
}

function pick(row: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, row[k]]));
}

function notFound(objectName: string, id: unknown): DomainError {
  return new DomainError('record_not_found', `No "${objectName}" record with id "${clip(String(id))}"`);
}

/**
 * Validates a write body: only known, writable fields; required fields present on insert and never
 * set to null; each value encoded for its column type. Returns column → bound value.
 */
function encodeWrite(object: ObjectMeta, input: unknown, mode: 'insert' | 'update'): Map<string, unknown> {
  if (!isPlainObject(input)) throw new DomainError('invalid_record', 'A record must be a JSON object of field values');
  const values = new Map<string, unknown>();
  for (const [name, value] of Object.entries(input)) {
    const field = requireField(object, name);
    if (field.system && !(field.name === 'id' && mode === 'insert')) {
      throw new DomainError('read_only_field', `Field "${name}" is set by the server`);
    }
    if (value === undefined) continue;
    if (value === null && field.required) throw new DomainError('missing_required_field', `Field "${name}" is required`, { fields: [name] });
    values.set(name, encodeFieldValue(field, value));
  }
  if (mode === 'insert') {
    const missing = object.fields.filter((f) => f.required && !f.system && !values.has(f.name)).map((f) => f.name);
    if (missing.length) {
      throw new DomainError('missing_required_field', `Missing required field${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`, { fields: missing });
    }
  } else if (!values.size) {
    throw new DomainError('invalid_record', 'Nothing to update: send at least one field');
  }
  return values;
}

function translateWriteError(object: ObjectMeta, error: unknown): DomainError | undefined {
  const pg = error as { code?: string; constraint?: string };
  const fieldFor = (kind: 'key' | 'fk') => object.fields.find((f) => indexName(object.name, f.name, kind) === pg.constraint)?.name;
  if (pg.code === '23505') {
    const field = pg.constraint === `${object.name}_pkey` ? 'id' : fieldFor('key');
    return new DomainError('unique_violation', `Another "${object.name}" record already has this ${field ?? 'value'}`, field ? { field } : undefined);
  }
  // 23503: a lookup of this record points nowhere (insert/update). 23001: lookups are ON DELETE RESTRICT,
  // so deleting a record that other records still point to fails with restrict_violation, not 23503.
  if (pg.code === '23503' || pg.code === '23001') {
    const field = pg.code === '23503' ? fieldFor('fk') : undefined;
    if (field) {
      const target = object.fields.find((f) => f.name === field)?.reference;
      return new DomainError('invalid_reference', `Lookup "${field}" points to a "${target}" record that does not exist`, { field });
    }
    return new DomainError('record_referenced', `This "${object.name}" record is referenced by other records; remove those references first`);
  }
  return undefined;
}

function parseAggregations(object: ObjectMeta, input: unknown): AggregationSpec[] {
  if (!Array.isArray(input) || input.length === 0) {
    throw new DomainError('invalid_aggregation', 'aggregations must be a non-empty array of { function, field?, alias }');
  }
  if (input.length > MAX_AGGREGATIONS) throw new DomainError('invalid_aggregation', `At most ${MAX_AGGREGATIONS} aggregations`);
  const aliases = new Set<string>();
  return input.map((item) => {
    if (!isPlainObject(item)) throw new DomainError('invalid_aggregation', 'Each aggregation is an object { function, field?, alias }');
    const fn = item.function;
    if (typeof fn !== 'string' || !(AGGREGATE_FUNCTIONS as readonly string[]).includes(fn)) {
      throw new DomainError('invalid_aggregate_function', `Unknown aggregate function "${clip(String(fn))}"`, {
        function: clip(String(fn)),
        availableFunctions: AGGREGATE_FUNCTIONS,
      });
    }
    const alias = item.alias;
    if (typeof alias !== 'string' || !IDENTIFIER_PATTERN.test(alias)) {
      throw new DomainError('invalid_aggregation', `Alias "${clip(String(alias))}" must be snake_case (a-z, 0-9, _), at most 63 characters`);
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
  return NUMERIC_TYPES.includes(field.type as never) || TEMPORAL_TYPES.includes(field.type as never) || TEXT_TYPES.includes(field.type as never);
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
  const column = quoteIdent(requireField(object, a.field).name);
  switch (a.function) {
    case 'count': return `count(${column})`;
    case 'count_distinct': return `count(distinct ${column})`;
    case 'sum': return `sum(${column})`;
    case 'avg': return `avg(${column})`;
    case 'min': return `min(${column})`;
    case 'max': return `max(${column})`;
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
      throw new DomainError('unknown_field', `Cannot order by "${clip(item.field)}": use an aggregation alias or a group-by field`, {
        field: clip(item.field),
        availableFields: available,
      });
    }
    const order = item.order === undefined ? 'asc' : String(item.order).toLowerCase();
    if (order !== 'asc' && order !== 'desc') throw new DomainError('invalid_order_by', 'order must be "asc" or "desc"');
    return `${quoteIdent(item.field)} ${order} nulls last`;
  });
  return [...parts, defaults].filter(Boolean).join(', ');
}

/** pg returns numeric/bigint aggregates as strings; JSON clients want numbers. */
function decodeAggregate(value: unknown): unknown {
  if (typeof value === 'string' && /^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(value)) return Number(value);
  return value;
}
