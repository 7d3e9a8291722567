import { computedKind } from '../metadata/computed-fields';
import type { CompiledQuery } from 'kysely';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import {
  FOREIGN_KEY_VIOLATION,
  PROGRAM_LIMIT_EXCEEDED,
  RESTRICT_VIOLATION,
  UNIQUE_VIOLATION,
  sqlState,
} from '../common/pg-errors';
import type { DataSession } from '../database/data-pool';
import { indexName } from '../metadata/metadata.naming';
import type { FieldMeta, ObjectMeta, ObjectReferrers } from '../metadata/object-metadata.types';
import { indexedValueLimitError } from '../metadata/field-values';
import type { VersionedRecord } from './data.types';
import { decodeRow, encodeFieldValue } from './field-value.codec';
import type { ChangeCapture } from './change-outbox';
import { compileClearReferences, compileDelete, compileFindOne, IN_SCOPE_ALIAS, VERSION_ALIAS } from './records.compiler';
import { clip, requireField } from './where.compiler';

// The checks and error translation a record write goes through, shared by single writes and batches.

/** Runs a write and turns constraint violations into errors that name the field. */
export async function write(
  object: ObjectMeta,
  session: DataSession,
  query: CompiledQuery<Record<string, unknown>>,
): Promise<Record<string, unknown>[]> {
  try {
    return await session.query(query);
  } catch (error) {
    throw translateWriteError(object, error) ?? error;
  }
}

/** A lookup value pointing to no record, or to one the caller may not read: the same error for both. */
export function invalidReference(field: FieldMeta): DomainError {
  return new DomainError(
    'invalid_reference',
    `Lookup "${field.name}" points to a "${field.reference}" record that does not exist`,
    { field: field.name },
  );
}

export function notFound(objectName: string, id: unknown): DomainError {
  return new DomainError('record_not_found', `No "${objectName}" record with id "${clip(String(id))}"`);
}

/**
 * Validates a write body: only known, writable fields; required fields present on insert and never
 * set to null; each value encoded for its column type. Returns column → bound value. System fields are
 * the server's, except an insert's id and, when `dated` (records the server loads with their history),
 * an insert's created_at.
 */
export function encodeWrite(object: ObjectMeta, input: unknown, mode: 'insert' | 'update', dated = false): Map<string, unknown> {
  if (!isPlainObject(input)) throw new DomainError('invalid_record', 'A record must be a JSON object of field values');
  const values = new Map<string, unknown>();
  for (const [name, value] of Object.entries(input)) {
    const field = requireField(object, name);
    const settable = mode === 'insert' && (field.name === 'id' || (dated && field.name === 'created_at'));
    if (field.system && !settable) {
      throw new DomainError('read_only_field', `Field "${name}" is set by the server`);
    }
    const kind = computedKind(field);
    if (kind === 'links') {
      // Links are written with one record (create, PATCH: data/links.write.ts), not in batches or imports.
      throw new DomainError('read_only_field', `Links field "${name}" is written by a record's create or PATCH, not here`, {
        field: name,
      });
    }
    if (kind) {
      throw new DomainError('read_only_field', `Field "${name}" is a ${kind}, computed when read: it cannot be written`, {
        field: name,
      });
    }
    if (value === undefined) continue;
    // Under a row filter, a chosen id would tell by its conflict that a record it may not read has it.
    if (field.name === 'id' && object.rowFilter) {
      throw new DomainError(
        'validation_failed',
        `The server chooses the id of new "${object.name}" records for this API key (its access policies filter the rows); leave "id" out`,
        { field: 'id' },
      );
    }
    if (value === null && field.required)
      throw new DomainError('missing_required_field', `Field "${name}" is required`, { fields: [name] });
    values.set(name, encodeFieldValue(field, value));
  }
  if (mode === 'insert') {
    const missing = object.fields.filter((f) => f.required && !f.system && !values.has(f.name)).map((f) => f.name);
    if (missing.length) {
      throw new DomainError(
        'missing_required_field',
        `Missing required field${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`,
        { fields: missing },
      );
    }
  } else if (!values.size) {
    throw new DomainError('invalid_record', 'Nothing to update: send at least one field');
  }
  return values;
}

function translateWriteError(object: ObjectMeta, error: unknown): DomainError | undefined {
  const code = sqlState(error);
  const pg = error as { constraint?: string };
  const fieldFor = (kind: 'key' | 'idx' | 'fk') =>
    object.fields.find((f) => indexName(object.name, f.name, kind) === pg.constraint)?.name;
  if (code === UNIQUE_VIOLATION) {
    const field = pg.constraint === `${object.name}_pkey` ? 'id' : fieldFor('key');
    return new DomainError(
      'unique_violation',
      `Another "${object.name}" record already has this ${field ?? 'value'}`,
      field ? { field } : undefined,
    );
  }
  // The codec refuses long values of indexed fields first; this is the backstop for anything it misses.
  // 54000 names the index that could not take the row.
  if (code === PROGRAM_LIMIT_EXCEEDED) {
    const field = object.fields.find((f) => f.name === (fieldFor('key') ?? fieldFor('idx')));
    if (field) return indexedValueLimitError(field);
    return new DomainError('invalid_value', `A value is too long for an index of "${object.name}"`);
  }
  // 23503: a lookup of this record points nowhere (insert/update). 23001: lookups are ON DELETE RESTRICT,
  // so deleting a record that other records still point to fails with restrict_violation, not 23503.
  if (code === FOREIGN_KEY_VIOLATION || code === RESTRICT_VIOLATION) {
    const field = code === FOREIGN_KEY_VIOLATION ? fieldFor('fk') : undefined;
    const lookup = object.fields.find((f) => f.name === field);
    if (lookup) return invalidReference(lookup);
    return new DomainError(
      'record_referenced',
      `This "${object.name}" record is referenced by other records; remove those references first`,
    );
  }
  return undefined;
}

/**
 * Why a conditional write changed no row: the record is gone (404, whatever If-Match said), or it
 * is at another version (412). Asked only after a miss, so a write that matches stays one statement.
 */
export async function missedWrite(
  object: ObjectMeta,
  id: string,
  versions: readonly string[] | undefined,
  session: DataSession,
): Promise<DomainError> {
  if (!versions) return notFound(object.name, id);
  const rows = await session.query(compileFindOne(object, id, ['id']));
  if (!rows.length) return notFound(object.name, id);
  return new DomainError(
    'precondition_failed',
    `The "${object.name}" record "${id}" is not at a version If-Match names (it changed since it was read); read it again and retry`,
  );
}

/** A write's rows, refused with `forbidden` when one falls outside the caller's row filter (like scopedWrite). */
export async function scopedRows(
  session: DataSession,
  object: ObjectMeta,
  query: CompiledQuery<Record<string, unknown>>,
): Promise<Record<string, unknown>[]> {
  const rows = await write(object, session, query);
  if (!object.rowFilter) return rows;
  if (rows.some((row) => row[IN_SCOPE_ALIAS] !== true)) throw outsideRowFilter(object);
  for (const row of rows) delete row[IN_SCOPE_ALIAS];
  return rows;
}

function outsideRowFilter(object: ObjectMeta): DomainError {
  return new DomainError('forbidden', `This API key may not write "${object.name}" records with these values`, {
    object: object.name,
  });
}

/**
 * Moves one record to the trash inside `session` (a transaction or a savepoint: a miss after the lookups
 * were cleared must roll them back): first the optional lookups that point to it are cleared, in the
 * delete's change set, then the record is deleted (under `versions` and the caller's row filter), its trash
 * entry keeping its links (`referrers.links`) for a restore. The rows written, none when it missed.
 */
export async function deleteRecord(
  session: DataSession,
  object: ObjectMeta,
  id: string,
  versions: readonly string[] | undefined,
  capture: ChangeCapture,
  referrers: ObjectReferrers,
): Promise<Record<string, unknown>[]> {
  const ofObject = { ...capture, changeSet: { ...capture.changeSet, object: object.name } };
  for (const { object: referrer, field } of referrers.lookups) {
    await session.query(compileClearReferences(referrer, field, [id], ofObject));
  }
  return write(object, session, compileDelete(object, id, versions, { ...capture, links: referrers.links }));
}

/**
 * The record `id` as it now is in `session`'s transaction, as the caller's view of `object` reads it, with its
 * version: the answer of a write whose later statements (links made, the stored values their triggers set)
 * changed it after the statement that returned it.
 */
export async function readWritten(session: DataSession, object: ObjectMeta, id: string): Promise<VersionedRecord> {
  const [row] = await session.query(compileFindOne({ ...object, rowFilter: undefined }, id, undefined));
  if (!row) throw notFound(object.name, id);
  return decodeVersioned(object, row);
}

/** A written or read row (its fields and VERSION_ALIAS) as the record and its version. */
export function decodeVersioned(object: ObjectMeta, row: Record<string, unknown>): VersionedRecord {
  const { [VERSION_ALIAS]: version, ...rest } = row;
  return { record: decodeRow(object, rest), version: String(version) };
}
