import type { Caller } from '../auth/caller';
import type { ObjectMeta } from './object-metadata.types';

/**
 * How a caller sees objects: which it may read and which of their fields. Provided by governance/
 * (its AccessService), which depends on metadata; metadata's own read routes take it through this
 * token instead of importing it back.
 */
export const OBJECT_LENS = Symbol('OBJECT_LENS');

export interface ObjectLens {
  /** The object as the caller may read it; `object_not_found` for one it may not (like a missing one). */
  viewFor(caller: Caller, objectName: string): Promise<ObjectMeta>;
  /** Whether the caller may read each of these objects, in order. */
  readableBy(caller: Caller, objectNames: string[]): Promise<boolean[]>;
}
