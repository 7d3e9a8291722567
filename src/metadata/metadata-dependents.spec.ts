import type { EntityManager } from '@mikro-orm/postgresql';
import { MetadataDependents } from './metadata-dependents';

const em = {} as EntityManager;

describe('MetadataDependents', () => {
  it('asks the dependent registered for a kind, in the metadata write’s transaction', async () => {
    const dependents = new MetadataDependents();
    const seen: unknown[] = [];
    dependents.register('metric', {
      usingObject: (tx, object) => (seen.push([tx, object]), Promise.resolve(['revenue'])),
      usingField: (_tx, object, field) => Promise.resolve([`${object}.${field}`]),
    });
    expect(await dependents.usingObject('metric', em, 'deal')).toEqual(['revenue']);
    expect(await dependents.usingField('metric', em, 'deal', 'amount')).toEqual(['deal.amount']);
    expect(seen).toEqual([[em, 'deal']]);
  });

  it('answers no users for a kind nobody registered, or a question its dependent does not answer', async () => {
    const dependents = new MetadataDependents();
    dependents.register('view', { droppingObject: () => Promise.resolve() });
    expect(await dependents.usingObject('agent', em, 'deal')).toEqual([]);
    expect(await dependents.usingField('view', em, 'deal', 'amount')).toEqual([]);
  });

  it('tells every dependent that an object is dropped', async () => {
    const dependents = new MetadataDependents();
    const dropped: string[] = [];
    dependents.register('view', { droppingObject: (_tx, object) => (dropped.push(`view:${object}`), Promise.resolve()) });
    dependents.register('agent', { usingObject: () => Promise.resolve([]) });
    dependents.register('metric', { droppingObject: (_tx, object) => (dropped.push(`metric:${object}`), Promise.resolve()) });
    await dependents.droppingObject(em, 'deal');
    expect(dropped).toEqual(['view:deal', 'metric:deal']);
  });
});
