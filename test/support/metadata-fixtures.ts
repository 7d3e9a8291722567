import { DomainError } from '../../src/common/domain-error';
import type { FieldMeta, FieldType } from '../../src/metadata/object-metadata.types';

/** A field definition for unit tests: optional, not unique, not indexed unless `extra` says so. */
export function field(name: string, type: FieldType | 'uuid', extra: Partial<FieldMeta> = {}): FieldMeta {
  return { name, label: name, type, required: false, unique: false, indexed: false, ...extra };
}

/** Runs `fn`, expects a DomainError and returns it for further assertions. */
export function domainError(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(DomainError);
    return error as DomainError;
  }
  throw new Error('expected a DomainError, nothing was thrown');
}
