import type { KeptChange } from './history.compiler';

/** A kept row: column → value as `to_jsonb` wrote it. */
export type RawRow = Record<string, unknown>;

/**
 * What one change set did to one record, folded from its changes in order: the record's values before
 * the set (`before`: only the fields the set changed; nothing for a record it created) and after it
 * (`after`: the whole row when the set created or deleted it, else the fields it changed).
 */
export interface RecordDelta {
  id: string;
  /** The set's first and last change of the record (versions). */
  first: KeptChange;
  last: KeptChange;
  /** The set created the record (its first change is a create). */
  created: boolean;
  /** The set left the record in the trash (its last change is a delete). */
  deleted: boolean;
  before: RawRow;
  after: RawRow;
  /** Fields the set changed (every field for a create or a delete). */
  fields: Set<string>;
}

/** The changes of a change set (in the order made) folded per record, in the order each record was first changed. */
export function recordDeltas(changes: readonly KeptChange[]): RecordDelta[] {
  const deltas = new Map<string, RecordDelta>();
  for (const change of changes) {
    let delta = deltas.get(change.record_id);
    if (!delta) {
      delta = {
        id: change.record_id,
        first: change,
        last: change,
        created: change.op === 'create',
        deleted: false,
        before: {},
        after: {},
        fields: new Set(),
      };
      deltas.set(change.record_id, delta);
    }
    delta.last = change;
    delta.deleted = change.op === 'delete';
    if (change.op === 'update') {
      for (const field of change.changed_fields) {
        // The earliest value a field had in the set is its value before the set.
        if (!delta.created && !delta.fields.has(field) && change.before && field in change.before) {
          delta.before[field] = change.before[field];
        }
        delta.fields.add(field);
        if (field in change.record) delta.after[field] = change.record[field];
      }
    } else {
      // A create or a delete keeps the whole row: as created, or as it was when deleted.
      if (change.op === 'delete' && delta.first === change) Object.assign(delta.before, change.record);
      delta.after = change.op === 'create' ? { ...change.record } : {};
      for (const field of Object.keys(change.record)) delta.fields.add(field);
    }
  }
  return [...deltas.values()];
}

/** Whether a kept change holds the whole row (creates, deletes and updates not yet compacted). */
export function isWhole(change: KeptChange): boolean {
  return change.op !== 'update' || !change.compacted;
}

/**
 * The record at the oldest of `changes` (a record's changes from that version on, newest first): that
 * change's row when kept whole, else the nearest newer whole row (or `live`, the row now) with the
 * `before` of every change in between undone, newest first. Undefined when nothing whole is left to
 * start from (a record purged from the trash).
 */
export function rebuildAt(changes: readonly KeptChange[], live: RawRow | undefined): RawRow | undefined {
  const target = changes[changes.length - 1];
  if (!target) return undefined;
  if (isWhole(target)) return { ...target.record };
  let start = -1;
  let state: RawRow | undefined;
  for (let i = changes.length - 2; i >= 0; i--) {
    if (isWhole(changes[i])) {
      start = i;
      state = { ...changes[i].record };
      break;
    }
  }
  if (!state) {
    if (!live) return undefined;
    state = { ...live };
    start = 0;
  }
  // state is the row after changes[start]; undoing it and each older one up to the target gives the row after the target.
  for (let i = start; i < changes.length - 1; i++) {
    if (changes[i].op === 'update' && changes[i].before) Object.assign(state, changes[i].before);
  }
  return state;
}
