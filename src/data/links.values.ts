import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import type { FieldMeta } from '../metadata/object-metadata.types';

/** Most ids one links write or filter operand may hold. */
export const MAX_LINK_IDS = 1000;

/**
 * An operand of a where condition on a links field (its value reads as an array of ids, text): one id for
 * `$in`/`$nin` items, an id or an array of ids for `$contains`/`$notContains` (always returned as an array),
 * an array of ids for `$eq`/`$ne` (the exact set). Ids are lower-cased, as the value shows them.
 */
export function encodeLinkOperand(field: FieldMeta, value: unknown, operator: string | undefined): unknown {
  if (operator === '$in' || operator === '$nin') return linkId(field, value, operator);
  if ((operator === '$contains' || operator === '$notContains') && !Array.isArray(value)) return [linkId(field, value, operator)];
  return linkIds(field, value, operator);
}

/** A non-empty-or-empty array of distinct ids (invalid_value otherwise), in the order given. */
export function linkIds(field: FieldMeta, value: unknown, operator?: string): string[] {
  if (!Array.isArray(value)) throw invalidIds(field, value, operator, 'an array of record ids');
  if (value.length > MAX_LINK_IDS) throw invalidIds(field, value, operator, `at most ${MAX_LINK_IDS} record ids`);
  return [...new Set(value.map((item) => linkId(field, item, operator)))];
}

function linkId(field: FieldMeta, value: unknown, operator?: string): string {
  if (!isUuid(value)) throw invalidIds(field, value, operator, 'record ids (UUIDs)');
  return value.toLowerCase();
}

function invalidIds(field: FieldMeta, value: unknown, operator: string | undefined, expected: string): DomainError {
  const usage = operator ? ` for ${operator}` : '';
  const got = Array.isArray(value) ? `an array of ${value.length}` : (JSON.stringify(value)?.slice(0, 60) ?? String(value));
  return new DomainError('invalid_value', `Links field "${field.name}" expects ${expected}${usage}, got ${got}`, {
    field: field.name,
    type: 'links',
    ...(operator ? { operator } : {}),
    expected,
  });
}
