import type { EntityManager } from '@mikro-orm/postgresql';
import type { ApiKeyService } from '../auth/api-key.service';
import type { Caller } from '../auth/caller';
import type { DomainError } from '../common/domain-error';
import { fakePubSub } from '../../test/support/fake-pubsub';
import type { MetadataService } from '../metadata/metadata.service';
import { ACCESS_CHANGED } from './access-policy.types';
import { AccessService } from './access.service';

const KEY = '3f1c2a56-7a0e-4c1b-9a4e-2f5d8c9b0a11';
const MEMBER: Caller = { keyId: KEY, role: 'member', subject: 'ann', owner: 'ann' };

describe('AccessService: the check of a turn’s key', () => {
  let bus: ReturnType<typeof fakePubSub>;
  let active: Caller | null;
  let reads: number;
  let access: AccessService;

  beforeEach(() => {
    bus = fakePubSub();
    active = MEMBER;
    reads = 0;
    const apiKeys = {
      activeCaller: () => {
        reads++;
        return Promise.resolve(active);
      },
    } as unknown as ApiKeyService;
    access = new AccessService({} as EntityManager, bus.pubsub, {} as MetadataService, apiKeys);
  });

  it('reads the key once while no change is announced, and again after one', async () => {
    await access.assertCurrent(MEMBER);
    await access.assertCurrent(MEMBER);
    expect(reads).toBe(1);
    active = null;
    bus.deliver({ type: ACCESS_CHANGED });
    await expect(access.assertCurrent(MEMBER)).rejects.toMatchObject({ code: 'key_revoked' });
    expect(reads).toBe(2);
  });

  it('reads the key from the table at every check while its LISTEN connection is down (a revocation could go unheard)', async () => {
    await access.assertCurrent(MEMBER);
    bus.setListening(false);
    active = null;
    await expect(access.assertCurrent(MEMBER)).rejects.toMatchObject({ code: 'key_revoked' });
    active = MEMBER;
    await access.assertCurrent(MEMBER);
    expect(reads).toBe(3);
  });

  it('takes a key’s state read by a statement of the caller’s own (a claim): revoked or another subject is key_revoked', () => {
    const codeOf = (check: () => unknown) => {
      try {
        check();
        return 'ok';
      } catch (error) {
        return (error as DomainError).code;
      }
    };
    expect(access.callerOf(KEY, { role: 'member', subject: 'ann', owner: 'ann' }, { owner: 'ann' })).toEqual(MEMBER);
    expect(codeOf(() => access.callerOf(KEY, null))).toBe('key_revoked');
    expect(codeOf(() => access.callerOf(KEY, { role: 'member', subject: 'bob', owner: 'bob' }, { owner: 'ann' }))).toBe(
      'key_revoked',
    );
    expect(codeOf(() => access.callerOf(null, { role: 'member', subject: 'ann', owner: 'ann' }))).toBe('key_revoked');
    // A user of another issuer with the subject "ann" does not act for ann's chats.
    const otherIssuer = { role: 'member' as const, subject: 'ann', owner: 'oidc:https://other.example#ann' };
    expect(codeOf(() => access.callerOf(KEY, otherIssuer, { owner: 'ann' }))).toBe('key_revoked');
  });
});
