import type { AppConfig } from '../config/app-config';
import { ApprovalTokens, canonicalJson, type ApprovalBinding } from './approval-tokens';

async function tokens(secret = 'x'.repeat(32)): Promise<ApprovalTokens> {
  const signer = new ApprovalTokens({ approvalSecret: secret, dataDir: '/nonexistent' } as AppConfig);
  await signer.onModuleInit();
  return signer;
}

const BINDING: ApprovalBinding = {
  scope: '00000000-0000-4000-8000-000000000001',
  toolCallId: 'call_1',
  tool: 'update_record',
  arguments: { objectName: 'deal', recordId: 'r1', values: { stage: 'won', amount: 5 } },
  proposal: {
    objectName: 'deal',
    operation: 'update',
    changes: [{ id: 'r1', etag: '"123"', before: { stage: 'open' }, after: { stage: 'won' } }],
  },
};

/** BINDING with its one change altered. */
const changed = (change: Partial<ApprovalBinding['proposal']['changes'][number]>): Partial<ApprovalBinding> => ({
  proposal: { ...BINDING.proposal, changes: [{ ...BINDING.proposal.changes[0], ...change }] },
});

describe('approval tokens', () => {
  const later = new Date(Date.now() + 60_000);

  it('verify what they were signed for, whatever the order of the arguments’ keys', async () => {
    const signer = await tokens();
    const token = signer.sign(BINDING, later);
    const reordered = { ...BINDING, arguments: { values: { amount: 5, stage: 'won' }, recordId: 'r1', objectName: 'deal' } };
    expect(signer.verify(token, reordered)).toEqual({ valid: true, expired: false });
  });

  it.each<[string, Partial<ApprovalBinding>]>([
    ['another chat', { scope: '00000000-0000-4000-8000-000000000002' }],
    ['another call', { toolCallId: 'call_2' }],
    ['other arguments', { arguments: { ...(BINDING.arguments as object), values: { stage: 'lost', amount: 5 } } }],
    ['another tool', { tool: 'delete_record' }],
    ['another record version', changed({ etag: '"124"' })],
    ['another record', changed({ id: 'r2' })],
    ['other values written', changed({ after: { stage: 'lost' } })],
    ['other values shown', changed({ before: { stage: 'lost' } })],
    ['another operation', { proposal: { ...BINDING.proposal, operation: 'delete' } }],
    ['another object', { proposal: { ...BINDING.proposal, objectName: 'account' } }],
    ['more records', { proposal: { ...BINDING.proposal, changes: [...BINDING.proposal.changes, BINDING.proposal.changes[0]] } }],
  ])('do not verify for %s', async (_, change) => {
    const signer = await tokens();
    expect(signer.verify(signer.sign(BINDING, later), { ...BINDING, ...change }).valid).toBe(false);
  });

  it('bind their expiry: a token with another one, or signed with another key, is not valid', async () => {
    const signer = await tokens();
    const token = signer.sign(BINDING, later);
    const [version, expiry, mac] = token.split('.');
    expect(signer.verify(`${version}.${Number(expiry) + 1}.${mac}`, BINDING).valid).toBe(false);
    expect((await tokens('y'.repeat(32))).verify(token, BINDING).valid).toBe(false);
    for (const bad of ['', 'v2', 'v2..', `v1.${expiry}.${mac}`, `${token}.x`, 42, null]) {
      expect(signer.verify(bad, BINDING).valid).toBe(false);
    }
  });

  it('verify only with the expiry shown with the proposal, when there is one, exactly as it was signed', async () => {
    const signer = await tokens();
    const token = signer.sign(BINDING, later);
    expect(signer.verify(token, { ...BINDING, expiresAt: later.toISOString() }).valid).toBe(true);
    for (const shown of [new Date(later.getTime() + 86_400_000).toISOString(), new Date(later.getTime() - 1).toISOString(), '']) {
      expect(signer.verify(token, { ...BINDING, expiresAt: shown }).valid).toBe(false);
    }
  });

  it('report a valid token past its expiry as expired', async () => {
    const signer = await tokens();
    const token = signer.sign(BINDING, new Date(1_000));
    expect(signer.verify(token, BINDING)).toEqual({ valid: true, expired: true });
  });

  it('hash to what the spent-tokens table stores, never the token', () => {
    expect(ApprovalTokens.hash('v2.1.abc')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('canonical JSON sorts keys at every depth and keeps array order', () => {
    expect(canonicalJson({ b: [2, { d: 1, c: 2 }], a: null })).toBe('{"a":null,"b":[2,{"c":2,"d":1}]}');
  });
});
