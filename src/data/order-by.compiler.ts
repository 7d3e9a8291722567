import { typeName } from '../metadata/links-fields';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { fieldTypeOf } from '../metadata/field-types';
import { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import { describeValue } from '../metadata/field-values';
import { SqlParams } from '../database/sql-params';
import { fieldSql, selectSql } from './formula.compiler';
import { clip, requireField } from './where.compiler';

/** Default cap on caller-chosen sort fields (the trailing id tiebreaker does not count). */
export const DEFAULT_MAX_ORDER_BY_FIELDS = 5;
/** Most names accepted in one `fields` selection (duplicates included), so parsing stays bounded. */
export const MAX_PROJECTION_ITEMS = 500;

const ORDER_BY_SHAPE = 'orderBy expects [{"field": "amount", "order": "desc"}] (order: "asc" or "desc", default "asc")';

/** One sort key: a field and its direction. Nulls always sort last. */
export interface OrderTerm {
  field: FieldMeta;
  descending: boolean;
}

/**
 * ORDER BY list (without the keywords), e.g. `"amount" DESC NULLS LAST, "id" ASC`.
 * Accepts undefined/null/[], one `{ field, order? }` or an array of them. Nulls always sort last (the
 * default for ASC, explicit for DESC on a field that may be empty). `"id" ASC` is appended unless id is
 * already ordered, so pages are stable. Throws unknown_field or invalid_order_by.
 */
export function compileOrderBy(
  object: ObjectMeta,
  orderBy: unknown,
  options: { tableAlias?: string; maxFields?: number; params?: SqlParams } = {},
): string {
  return orderBySql(orderTerms(object, orderBy, options.maxFields), options.tableAlias, options.params);
}

/** The ORDER BY list of sort keys (a formula's expression needs the statement's `params`). */
export function orderBySql(terms: readonly OrderTerm[], tableAlias?: string, params?: SqlParams): string {
  return terms.map((term) => `${fieldSql(term.field, params, tableAlias)} ${sortDirection(term)}`).join(', ');
}

/**
 * `ASC`, or `DESC NULLS LAST`; plain `DESC` for a field that is never empty (the same order), which a
 * backward scan of its ascending index gives, where `NULLS LAST` would make PostgreSQL sort every row.
 */
export function sortDirection({ field, descending }: OrderTerm): string {
  if (!descending) return 'ASC';
  return mayBeEmpty(field) ? 'DESC NULLS LAST' : 'DESC';
}

/** Whether the field's column may hold null: id, created_at, updated_at and required fields never do. */
export function mayBeEmpty(field: FieldMeta): boolean {
  return !field.required && !field.system;
}

/** The sort keys of `orderBy` (see compileOrderBy), ending with id unless it is already one. */
export function orderTerms(object: ObjectMeta, orderBy: unknown, maxFields = DEFAULT_MAX_ORDER_BY_FIELDS): OrderTerm[] {
  if (!Number.isInteger(maxFields) || maxFields < 1) throw new Error(`maxFields must be a positive integer`);

  const items = orderBy === undefined || orderBy === null ? [] : Array.isArray(orderBy) ? orderBy : [orderBy];
  if (items.length > maxFields) {
    throw invalidOrderBy(`orderBy accepts at most ${maxFields} fields, got ${items.length}`, { maxFields });
  }

  const seen = new Set<string>();
  const terms = items.map((item) => {
    const term = parseItem(object, item);
    if (seen.has(term.field.name))
      throw invalidOrderBy(`orderBy lists field "${term.field.name}" twice`, { field: term.field.name });
    seen.add(term.field.name);
    return term;
  });
  if (!seen.has('id')) terms.push({ field: requireField(object, 'id'), descending: false });
  return terms;
}

function parseItem(object: ObjectMeta, item: unknown): OrderTerm {
  if (!isPlainObject(item)) throw invalidOrderBy(`${ORDER_BY_SHAPE}; got ${describeValue(item)}`);
  const extra = Object.keys(item).filter((key) => key !== 'field' && key !== 'order');
  if (extra.length > 0) {
    // e.g. "direction": silently ignoring it would sort the wrong way.
    throw invalidOrderBy(`${ORDER_BY_SHAPE}; unexpected key "${clip(extra[0])}"`, { key: clip(extra[0]) });
  }
  if (typeof item.field !== 'string') throw invalidOrderBy(`${ORDER_BY_SHAPE}; "field" must be a field name`);
  const field = requireField(object, item.field);
  if (!fieldTypeOf(field.type).sorts) {
    throw invalidOrderBy(`Field "${field.name}" (${typeName(field)}) cannot be sorted`, {
      field: field.name,
      type: typeName(field),
      sortableFields: object.fields.filter((f) => fieldTypeOf(f.type).sorts).map((f) => f.name),
    });
  }
  const order = item.order === undefined || item.order === null ? 'asc' : item.order;
  if (typeof order !== 'string' || !['asc', 'desc'].includes(order.toLowerCase())) {
    throw invalidOrderBy(`${ORDER_BY_SHAPE}; got order ${describeValue(order)} for field "${field.name}"`, {
      field: field.name,
    });
  }
  return { field, descending: order.toLowerCase() === 'desc' };
}

function invalidOrderBy(message: string, details: Record<string, unknown> = {}): DomainError {
  return new DomainError('invalid_order_by', message, details);
}

/**
 * SELECT list for a `fields` selection: an array of names or a comma-separated string. `id` always comes
 * first; the rest keep the requested order, duplicates dropped. Undefined, null, [] or "" select every
 * field in metadata order. Throws unknown_field, or invalid_fields for a wrong shape.
 */
export function compileProjection(
  object: ObjectMeta,
  fields: unknown,
  options: { tableAlias?: string; params?: SqlParams } = {},
): { sql: string; fields: FieldMeta[] } {
  const names = projectionNames(fields);
  const selected = names.length === 0 ? object.fields : [...new Set(['id', ...names])].map((name) => requireField(object, name));
  // Compiled when read: a formula's SQL binds parameters, which a statement that does not use it must not hold.
  let sql: string | undefined;
  return {
    get sql() {
      sql ??= selected.map((field) => selectSql(field, options.params, options.tableAlias)).join(', ');
      return sql;
    },
    fields: selected,
  };
}

function projectionNames(fields: unknown): string[] {
  if (fields === undefined || fields === null) return [];
  const shape = 'fields expects an array of field names or a comma-separated string like "name,amount"';
  const names = typeof fields === 'string' ? fields.split(',') : fields;
  if (!Array.isArray(names) || names.some((name) => typeof name !== 'string')) {
    throw new DomainError('invalid_fields', `${shape}; got ${describeValue(fields)}`);
  }
  if (names.length > MAX_PROJECTION_ITEMS) {
    throw new DomainError('invalid_fields', `fields lists more than ${MAX_PROJECTION_ITEMS} names`, {
      max: MAX_PROJECTION_ITEMS,
    });
  }
  return (names as string[]).map((name) => name.trim()).filter((name) => name.length > 0);
}
