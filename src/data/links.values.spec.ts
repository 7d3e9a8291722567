import { DomainError } from '../common/domain-error';
import type { FieldMeta } from '../metadata/object-metadata.types';
import { encodeLinkOperand, linkIds, MAX_LINK_IDS } from './links.values';

const members: FieldMeta = {
  name: 'members',
  label: 'Members',
  type: 'multiselect',
  required: false,
  unique: false,
  indexed: false,
  related: { kind: 'links', self: 'proj', target: 'person', via: 'members' },
};
const A = '3F2B8C1E-6A4D-4F7E-9B21-0C5D8E7A9F10';
const B = '0c5d8e7a-9f10-4f7e-9b21-3f2b8c1e6a4d';

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    return error instanceof DomainError ? error.code : 'not a domain error';
  }
}

describe('links values', () => {
  it('takes arrays of ids, lower-cased and without duplicates, in the order given', () => {
    expect(linkIds(members, [A, B, A.toLowerCase()])).toEqual([A.toLowerCase(), B]);
    expect(linkIds(members, [])).toEqual([]);
  });

  it('refuses anything but an array of UUIDs, and more than the cap', () => {
    expect(codeOf(() => linkIds(members, A))).toBe('invalid_value');
    expect(codeOf(() => linkIds(members, ['x']))).toBe('invalid_value');
    expect(codeOf(() => linkIds(members, [null]))).toBe('invalid_value');
    expect(codeOf(() => linkIds(members, Array(MAX_LINK_IDS + 1).fill(B)))).toBe('invalid_value');
  });

  it('encodes where operands: one id for $in items, an array for $contains (one id or many) and $eq', () => {
    expect(encodeLinkOperand(members, A, '$in')).toBe(A.toLowerCase());
    expect(encodeLinkOperand(members, A, '$contains')).toEqual([A.toLowerCase()]);
    expect(encodeLinkOperand(members, [A, B], '$notContains')).toEqual([A.toLowerCase(), B]);
    expect(encodeLinkOperand(members, [B], '$eq')).toEqual([B]);
    expect(codeOf(() => encodeLinkOperand(members, B, '$eq'))).toBe('invalid_value');
  });
});
