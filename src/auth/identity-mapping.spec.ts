import { DomainError } from '../common/domain-error';
import { claimAt, DEFAULT_IDENTITY_MAPPING, mapClaims, mappedPolicies, parseIdentityMapping } from './identity-mapping';

describe('identity mapping', () => {
  const mapping = parseIdentityMapping({
    subject: 'sub',
    attributes: { region: 'https://example.com/region', level: 'profile.level' },
    role: { admin: ['admins'] },
    policies: { sales: ['regional'], emea: ['regional', 'emea_extra'] },
    claim: 'realm_access.roles',
  });

  it('reads a claim by its whole name first (namespaced claims hold dots), then as a path', () => {
    const claims = { 'https://example.com/region': 'emea', a: { b: { c: 1 } }, 'a.b': 'whole' };
    expect(claimAt(claims, 'https://example.com/region')).toBe('emea');
    expect(claimAt(claims, 'a.b')).toBe('whole');
    expect(claimAt(claims, 'a.b.c')).toBe(1);
    expect(claimAt(claims, 'a.x.c')).toBeUndefined();
    expect(claimAt(claims, 'constructor')).toBeUndefined();
  });

  it('maps subject, role, the union of policies and attributes', () => {
    const claims = {
      sub: 'u1',
      realm_access: { roles: ['sales', 'emea', 'other'] },
      'https://example.com/region': 'emea',
      profile: { level: 3 },
    };
    expect(mapClaims(mapping, claims)).toEqual({
      subject: 'u1',
      role: 'member',
      policies: ['emea_extra', 'regional'],
      attributes: { region: 'emea', level: 3 },
    });
    expect(mapClaims(mapping, { sub: 'u2', realm_access: { roles: 'admins' } })).toEqual({
      subject: 'u2',
      role: 'admin',
      policies: [],
      attributes: {},
    });
  });

  it('names no user without a usable subject claim', () => {
    for (const sub of [undefined, '', null, { id: 1 }, ['a'], 'x'.repeat(256)]) {
      expect(mapClaims(DEFAULT_IDENTITY_MAPPING, { sub })).toBeUndefined();
    }
    expect(mapClaims(DEFAULT_IDENTITY_MAPPING, { sub: 42 })?.subject).toBe('42');
  });

  it('leaves out attributes that are not a short string or a finite number, and group values that are not strings', () => {
    const loose = parseIdentityMapping({ attributes: { a: 'a', b: 'b', c: 'c' }, policies: { '1': ['p'] } });
    expect(mapClaims(loose, { sub: 's', a: ['x'], b: 'y'.repeat(300), c: true, groups: [1, '1'] })).toEqual({
      subject: 's',
      role: 'member',
      policies: ['p'],
      attributes: {},
    });
  });

  it('fills in the defaults and lists the policies it names', () => {
    expect(parseIdentityMapping({})).toEqual(DEFAULT_IDENTITY_MAPPING);
    expect(mappedPolicies(mapping).sort()).toEqual(['emea_extra', 'regional']);
  });

  it.each([
    ['an unknown property', { groups: 'x' }],
    ['a bad attribute name', { attributes: { 'a-b': 'x' } }],
    ['an attribute without a claim', { attributes: { a: '' } }],
    ['a role other than admin', { role: { owner: ['x'] } }],
    ['admin values that are not a list', { role: { admin: 'x' } }],
    ['a policy name that cannot be one', { policies: { sales: ['Not A Name'] } }],
    ['policies that are not a list', { policies: { sales: 'regional' } }],
    ['an empty subject', { subject: ' ' }],
  ])('refuses %s', (_case, input) => {
    expect(() => parseIdentityMapping(input)).toThrow(DomainError);
  });
});
