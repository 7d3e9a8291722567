import type { KeptChange } from './history.compiler';
import { rebuildAt, recordDeltas } from './record-deltas';

let next = 1;
function change(op: KeptChange['op'], record: Record<string, unknown>, extra: Partial<KeptChange> = {}): KeptChange {
  return {
    id: String(next++),
    op,
    record_id: 'r1',
    changed_fields: op === 'update' ? Object.keys(record) : [],
    record,
    before: null,
    compacted: false,
    ...extra,
  };
}

describe('recordDeltas', () => {
  it('folds a record changed twice in one set into its values before the first change and after the last', () => {
    const first = change('update', { qty: 2, note: 'a' }, { before: { qty: 1, note: null } });
    const second = change('update', { qty: 3 }, { before: { qty: 2 } });
    const [delta] = recordDeltas([first, second]);
    expect(delta).toMatchObject({ created: false, deleted: false, before: { qty: 1, note: null }, after: { qty: 3, note: 'a' } });
    expect([...delta.fields].sort()).toEqual(['note', 'qty']);
    expect(delta.first).toBe(first);
    expect(delta.last).toBe(second);
  });

  it('keeps no before for a record the set created, and the whole row for one it deleted', () => {
    const created = change('create', { id: 'r2', qty: 1 }, { record_id: 'r2' });
    const updated = change('update', { qty: 5 }, { record_id: 'r2', before: { qty: 1 } });
    const deleted = change('delete', { id: 'r1', qty: 9, note: 'x' });
    const [made, gone] = recordDeltas([created, updated, deleted]);
    expect(made).toMatchObject({ id: 'r2', created: true, deleted: false, before: {}, after: { id: 'r2', qty: 5 } });
    expect(gone).toMatchObject({ id: 'r1', created: false, deleted: true, before: { id: 'r1', qty: 9, note: 'x' }, after: {} });
  });

  it('takes an update then a delete back to the values before the update', () => {
    const updated = change('update', { qty: 7 }, { before: { qty: 4 } });
    const deleted = change('delete', { id: 'r1', qty: 7, note: 'n' });
    const [delta] = recordDeltas([updated, deleted]);
    expect(delta).toMatchObject({ deleted: true, before: { qty: 4 } });
  });
});

describe('rebuildAt', () => {
  it('returns a version kept whole as it is', () => {
    const v = change('update', { id: 'r1', qty: 2, note: 'a' }, { before: { qty: 1 } });
    expect(rebuildAt([v], { id: 'r1', qty: 9 })).toEqual({ id: 'r1', qty: 2, note: 'a' });
  });

  it('rebuilds a compacted version from the row now, undoing every later change', () => {
    const v1 = change('update', { qty: 2 }, { before: { qty: 1 }, compacted: true });
    const v2 = change('update', { note: 'b' }, { before: { note: 'a' }, compacted: true });
    const v3 = change('update', { qty: 3 }, { before: { qty: 2 }, compacted: true });
    const live = { id: 'r1', qty: 3, note: 'b' };
    // Newest first, down to the version asked for.
    expect(rebuildAt([v3, v2, v1], live)).toEqual({ id: 'r1', qty: 2, note: 'a' });
    expect(rebuildAt([v3, v2], live)).toEqual({ id: 'r1', qty: 2, note: 'b' });
    expect(rebuildAt([v3], live)).toEqual(live);
  });

  it('starts from the nearest later whole row (a delete) rather than the row now', () => {
    const v1 = change('update', { qty: 2 }, { before: { qty: 1 }, compacted: true });
    const deleted = change('delete', { id: 'r1', qty: 2, note: 'z' });
    expect(rebuildAt([deleted, v1], undefined)).toEqual({ id: 'r1', qty: 2, note: 'z' });
  });

  it('says nothing when no whole row is left to start from (purged)', () => {
    const v1 = change('update', { qty: 2 }, { before: { qty: 1 }, compacted: true });
    expect(rebuildAt([v1], undefined)).toBeUndefined();
    expect(rebuildAt([], { id: 'r1' })).toBeUndefined();
  });
});
