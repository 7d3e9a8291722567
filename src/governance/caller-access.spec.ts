import { DomainError } from '../common/domain-error';
import { SYSTEM_FIELDS, type ObjectMeta } from '../metadata/object-metadata.types';
import { field } from '../../test/support/metadata-fixtures';
import { CallerAccess } from './caller-access';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [...SYSTEM_FIELDS, field('owner', 'text'), field('amount', 'currency'), field('margin', 'percent')],
};
const names = (object: ObjectMeta) => object.fields.map((f) => f.name);

function errorOf(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError');
}

describe('CallerAccess', () => {
  it('leaves a key without policies every object, row and field', () => {
    const access = CallerAccess.unrestricted();
    expect(access.view(deal, 'delete')).toBe(deal);
    expect(access.mayRead('anything')).toBe(true);
  });

  it('answers an object no policy grants read on as object_not_found, and a write not granted as forbidden', () => {
    const access = CallerAccess.fromPolicies([{ name: 'p', objects: { deal: { read: true } } }], 's', {});
    expect(access.mayRead('activity')).toBe(false);
    expect(errorOf(() => access.view({ ...deal, name: 'activity' }, 'read')).code).toBe('object_not_found');
    expect(errorOf(() => access.view(deal, 'update')).code).toBe('forbidden');
    expect(access.view(deal, 'read').rowFilter).toBeUndefined();
  });

  it('lets a named object replace "*" within one policy', () => {
    const access = CallerAccess.fromPolicies(
      [{ name: 'p', objects: { '*': { read: true, update: true }, deal: { read: true } } }],
      's',
      {},
    );
    expect(access.mayRead('activity')).toBe(true);
    expect(errorOf(() => access.view(deal, 'update')).code).toBe('forbidden');
  });

  it('unions policies: any filter matches, a field is hidden only when every reading policy hides it', () => {
    const access = CallerAccess.fromPolicies(
      [
        { name: 'a', objects: { deal: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount', 'margin'] } } },
        { name: 'b', objects: { deal: { read: true, rowFilter: { owner: 'team' }, hiddenFields: ['amount'] } } },
        { name: 'c', objects: { deal: { update: true, hiddenFields: [] } } },
      ],
      'alice',
      { region: 'emea' },
    );
    const view = access.view(deal, 'read');
    expect(names(view)).toEqual(['id', 'created_at', 'updated_at', 'owner', 'margin']);
    expect(view.rowFilter).toEqual({
      object: deal,
      filters: [{ owner: '$subject' }, { owner: 'team' }],
      subject: 'alice',
      attributes: { region: 'emea' },
    });
    // c grants update without a filter of its own: still only on the rows the key may read.
    expect(access.view(deal, 'update').rowFilter?.filters).toEqual([{ owner: '$subject' }, { owner: 'team' }]);
  });

  it('drops the row filter when one granting policy has none', () => {
    const access = CallerAccess.fromPolicies(
      [
        { name: 'a', objects: { deal: { read: true, rowFilter: { owner: '$subject' } } } },
        { name: 'b', objects: { deal: { read: true } } },
      ],
      'alice',
      {},
    );
    expect(access.view(deal, 'read').rowFilter).toBeUndefined();
  });

  it('limits a write to the rows both its own grant and read allow', () => {
    const access = CallerAccess.fromPolicies(
      [
        { name: 'a', objects: { deal: { read: true, rowFilter: { owner: '$subject' } } } },
        { name: 'b', objects: { deal: { delete: true, rowFilter: { amount: { $lt: 10 } } } } },
      ],
      'alice',
      {},
    );
    expect(access.view(deal, 'delete').rowFilter?.filters).toEqual([{ $and: [{ owner: '$subject' }, { amount: { $lt: 10 } }] }]);
  });

  it('never hides id', () => {
    const access = CallerAccess.fromPolicies([{ name: 'a', objects: { deal: { read: true, hiddenFields: ['id'] } } }], 's', {});
    expect(names(access.view(deal, 'read'))).toContain('id');
  });

  describe('fingerprint', () => {
    const own = { name: 'own', objects: { deal: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['amount'] } } };
    const fingerprint = (
      policies: Parameters<typeof CallerAccess.fromPolicies>[0],
      subject = 'alice',
      role = 'member' as const,
    ) => CallerAccess.fromPolicies(policies, subject, { region: 'emea' }).fingerprint(role);

    it('is the same for the same effective grants, whatever the policy names, key order or duplicates', () => {
      const renamed = {
        name: 'other',
        objects: { deal: { hiddenFields: ['amount', 'amount'], rowFilter: { owner: '$subject' }, read: true } },
      };
      expect(fingerprint([own])).toBe(fingerprint([renamed]));
      expect(fingerprint([own, renamed])).toBe(fingerprint([own]));
      expect(fingerprint([own])).toMatch(/^[0-9a-f]{64}$/);
    });

    it('differs with the subject or attributes a row filter reads, the hidden fields, the grants and the role', () => {
      const base = fingerprint([own]);
      expect(fingerprint([own], 'bob')).not.toBe(base);
      expect(fingerprint([{ ...own, objects: { deal: { ...own.objects.deal, hiddenFields: [] } } }])).not.toBe(base);
      expect(fingerprint([{ ...own, objects: { deal: { ...own.objects.deal, update: true } } }])).not.toBe(base);
      expect(fingerprint([own], 'alice', 'admin' as never)).not.toBe(base);
      const regional = (region: string) =>
        CallerAccess.fromPolicies(
          [{ name: 'r', objects: { deal: { read: true, rowFilter: { region: '$attr.region' } } } }],
          's',
          {
            region,
          },
        ).fingerprint('member');
      expect(regional('emea')).not.toBe(regional('amer'));
    });

    it('tells a key without policies from a restricted one, and a member from an admin', () => {
      expect(CallerAccess.unrestricted().fingerprint('member')).toBe(CallerAccess.unrestricted().fingerprint('member'));
      expect(CallerAccess.unrestricted().fingerprint('member')).not.toBe(CallerAccess.unrestricted().fingerprint('admin'));
      expect(CallerAccess.unrestricted().fingerprint('member')).not.toBe(
        fingerprint([{ name: 'all', objects: { '*': { read: true } } }]),
      );
    });
  });
});
