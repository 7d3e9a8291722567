import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { isPlainObject } from '../common/plain-object';
import { ApprovalTokens } from '../writes/approval-tokens';

/** The signing purpose of session ids: a MAC of one never passes for an approval token's, or the reverse. */
const PURPOSE = 'mcp-session';
const VERSION = 's1';
/** Longer ids are not ours (a key id, an agent name, a nonce and a MAC stay far below). */
const MAX_SESSION_ID = 400;

/** What an MCP session id carries, signed: the server keeps nothing, so any replica reads it. */
export interface McpSession {
  /** The API key the session was opened by; any other key's request with it is refused. */
  keyId: string;
  /** The agent of the path it was opened on (`/mcp/agents/:agentName`), null for `/mcp`. */
  agent: string | null;
  /** Whether the client declared form elicitation in `initialize`: only then can a write be confirmed. */
  elicitation: boolean;
  /** Random: what the session's write proposals are bound to (`mcp:<nonce>`). */
  nonce: string;
}

/**
 * MCP sessions without server memory: the `Mcp-Session-Id` handed out at `initialize` is the session itself,
 * `s1.<base64url JSON>.<HMAC>` under the approval key (APPROVAL_SECRET), so every replica verifies it and none
 * stores it. A session id that is forged, or presented by another key or on another path, is unknown (404).
 */
@Injectable()
export class McpSessions {
  constructor(private readonly tokens: ApprovalTokens) {}

  issue(caller: Caller, agent: string | null, elicitation: boolean): string {
    const session: McpSession = { keyId: caller.keyId, agent, elicitation, nonce: randomBytes(16).toString('base64url') };
    const body = Buffer.from(JSON.stringify(session), 'utf8').toString('base64url');
    return `${VERSION}.${body}.${this.tokens.signText(PURPOSE, body)}`;
  }

  /** The session of `id` when this server issued it to this key on this path; undefined otherwise. */
  verify(id: string, caller: Caller, agent: string | null): McpSession | undefined {
    if (id.length > MAX_SESSION_ID) return undefined;
    const [version, body, mac, ...rest] = id.split('.');
    if (version !== VERSION || !body || !mac || rest.length || !this.tokens.verifyText(PURPOSE, body, mac)) return undefined;
    const session = parseSession(body);
    if (!session || session.keyId !== caller.keyId || session.agent !== agent) return undefined;
    return session;
  }
}

/** The approval scope of a session's write proposals: what their tokens bind and spent tokens are filed under. */
export function approvalScopeOf(session: McpSession): string {
  return `mcp:${session.nonce}`;
}

/**
 * Whether an `initialize` request's client capabilities declare form elicitation: `elicitation.form`, or an
 * empty `elicitation` object (which meant form before modes existed).
 */
export function declaresFormElicitation(capabilities: unknown): boolean {
  const elicitation = isPlainObject(capabilities) ? capabilities.elicitation : undefined;
  if (!isPlainObject(elicitation)) return false;
  return isPlainObject(elicitation.form) || Object.keys(elicitation).length === 0;
}

function parseSession(body: string): McpSession | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    if (!isPlainObject(value)) return undefined;
    const { keyId, agent, elicitation, nonce } = value;
    if (typeof keyId !== 'string' || typeof nonce !== 'string' || typeof elicitation !== 'boolean') return undefined;
    if (agent !== null && typeof agent !== 'string') return undefined;
    return { keyId, agent, elicitation, nonce };
  } catch {
    return undefined;
  }
}
