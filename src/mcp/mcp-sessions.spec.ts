import type { Caller } from '../auth/caller';
import type { AppConfig } from '../config/app-config';
import { ApprovalTokens } from '../writes/approval-tokens';
import { decisionOf } from './mcp-write-calls.service';
import { approvalScopeOf, declaresFormElicitation, McpSessions } from './mcp-sessions';

async function sessions(secret = 'x'.repeat(32)): Promise<McpSessions> {
  const tokens = new ApprovalTokens({ approvalSecret: secret, dataDir: '/nonexistent' } as AppConfig);
  await tokens.onModuleInit();
  return new McpSessions(tokens);
}

const ALICE: Caller = { keyId: '00000000-0000-4000-8000-00000000000a', role: 'member', subject: 'alice', owner: 'alice' };
const BOB: Caller = { keyId: '00000000-0000-4000-8000-00000000000b', role: 'member', subject: 'bob', owner: 'bob' };

describe('MCP sessions', () => {
  it('verify for the key and path they were issued on, with what the client declared', async () => {
    const signer = await sessions();
    const id = signer.issue(ALICE, 'writer', true);
    expect(id).toMatch(/^s1\.[\w-]+\.[\w-]+$/);
    const session = signer.verify(id, ALICE, 'writer');
    expect(session).toMatchObject({ keyId: ALICE.keyId, agent: 'writer', elicitation: true });
    expect(approvalScopeOf(session!)).toBe(`mcp:${session!.nonce}`);
    expect(signer.verify(signer.issue(ALICE, null, false), ALICE, null)).toMatchObject({ agent: null, elicitation: false });
  });

  it('are unknown to another key, on another path, under another secret, or altered', async () => {
    const signer = await sessions();
    const id = signer.issue(ALICE, 'writer', false);
    expect(signer.verify(id, BOB, 'writer')).toBeUndefined();
    expect(signer.verify(id, ALICE, 'other')).toBeUndefined();
    expect(signer.verify(id, ALICE, null)).toBeUndefined();
    expect((await sessions('y'.repeat(32))).verify(id, ALICE, 'writer')).toBeUndefined();
    const [version, body, mac] = id.split('.');
    const claimed = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), elicitation: true }),
    ).toString('base64url');
    expect(signer.verify(`${version}.${claimed}.${mac}`, ALICE, 'writer')).toBeUndefined();
    for (const forged of ['', 'forged', `${id}.x`, `s2.${body}.${mac}`, 'x'.repeat(1000)]) {
      expect(signer.verify(forged, ALICE, 'writer')).toBeUndefined();
    }
  });

  it('never verify an approval token, nor an approval token a session id', async () => {
    const tokens = new ApprovalTokens({ approvalSecret: 'x'.repeat(32), dataDir: '/nonexistent' } as AppConfig);
    await tokens.onModuleInit();
    const binding = {
      scope: 'mcp:n',
      toolCallId: 'c',
      tool: 'update_record',
      arguments: {},
      proposal: { objectName: 'deal', operation: 'update' as const, changes: [] },
    };
    const token = tokens.sign(binding, new Date(Date.now() + 60_000));
    expect(new McpSessions(tokens).verify(token, ALICE, null)).toBeUndefined();
    const id = new McpSessions(tokens).issue(ALICE, null, true);
    expect(tokens.verify(id, binding).valid).toBe(false);
  });

  it('read form elicitation from `elicitation.form` or an empty `elicitation`, not from url mode alone', () => {
    expect(declaresFormElicitation({ elicitation: { form: {} } })).toBe(true);
    expect(declaresFormElicitation({ elicitation: {} })).toBe(true);
    expect(declaresFormElicitation({ elicitation: { url: {} } })).toBe(false);
    expect(declaresFormElicitation({ sampling: {} })).toBe(false);
    expect(declaresFormElicitation(undefined)).toBe(false);
  });
});

describe('MCP write confirmation answers', () => {
  it('approve only an accepted form whose decision is approve', () => {
    expect(decisionOf({ result: { action: 'accept', content: { decision: 'approve' } } })).toEqual({ decision: 'approve' });
    expect(decisionOf({ result: { action: 'accept', content: { decision: 'reject', reason: 'no' } } })).toEqual({
      decision: 'reject',
      reason: 'no',
    });
    expect(decisionOf({ result: { action: 'accept', content: {} } })).toEqual({ decision: 'reject' });
    expect(decisionOf({ result: { action: 'decline' } })).toEqual({ decision: 'reject' });
    expect(decisionOf({ result: { action: 'cancel' } })).toEqual({ decision: 'reject' });
    expect(decisionOf({ result: { decision: 'approve' } })).toEqual({ decision: 'reject' });
    expect(decisionOf({ error: { code: -1, message: 'no' } })).toEqual({ decision: 'reject' });
  });
});
