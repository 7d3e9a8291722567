import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { ChatService, type SettledProposal } from '../chats/durable/chat.service';
import type { ChatRow, PendingToolCall } from '../chats/durable/chat.types';
import { DomainError } from '../common/domain-error';
import { DataService } from '../data/data.service';
import { DataPool, type DataSession } from '../database/data-pool';
import { AccessService } from '../governance/access.service';
import type { ToolAuditEntry } from '../audit/audit-log.service';
import { errorContent } from '../tools/tool.define';
import type { WriteProposal } from '../tools/tool.types';
import { ApprovalTokens } from './approval-tokens';
import { ApprovalStatements } from './approval.repository';
import type { ApprovalDecision } from '../chats/durable/approval-gateway';

/** Record-level failures of an If-Match write: the record moved on (changed, deleted, or left the caller's rows). */
const VERSION_MISSES = new Set(['precondition_failed', 'record_not_found']);

type Proposal = PendingToolCall & { proposal: WriteProposal };

/**
 * Decisions on write proposals. A decision is accepted only with the proposal's token (signed, unexpired,
 * not spent) and from a key that may make the write itself; an approved write runs as that key, under
 * If-Match on every record's proposed version, in one transaction with the token's spending and its audit
 * rows. The chat's row stays locked from the check to the result, so a decision and the expiry sweep (or
 * two decisions) never both settle one proposal.
 */
@Injectable()
export class ApprovalService {
  constructor(
    private readonly em: EntityManager,
    private readonly chats: ChatService,
    private readonly data: DataService,
    private readonly pool: DataPool,
    private readonly access: AccessService,
    private readonly tokens: ApprovalTokens,
  ) {}

  async decide(caller: Caller, chatId: string, dto: ApprovalDecision): Promise<void> {
    await this.access.assertCurrent(caller, { fresh: true });
    // An expired token still settles its proposal (the model reads that it expired) before the refusal.
    const refusal = await this.em.fork().transactional(async (em) => {
      const chat = await this.chats.lockAnyOwner(em, chatId);
      if (!chat) throw new DomainError('chat_not_found', `Chat "${chatId.slice(0, 100)}" not found`);
      if (chat.owner !== caller.subject && caller.role !== 'admin') {
        throw invalid("only the chat's owner or an admin may decide on its proposals");
      }
      const call = pendingProposal(chat, dto.toolCallId);
      if (!call) throw invalid('no proposal with this tool call id waits for a decision (decided, expired or never made)');
      const check = this.tokens.verify(dto.token, bindingOf(chat, call));
      if (!check.valid) throw invalid('the token was not issued for this proposal');
      if (check.expired) {
        await this.chats.settleProposals(em, chat, [expiredResult(call)]);
        await this.auditDecision(em, chat, call, caller, 'approval.expire', 'ok');
        return invalid('the token has expired');
      }
      await this.assertMayWrite(caller, call.proposal);
      const result =
        dto.decision === 'reject' ? await this.reject(em, caller, chat, call, dto) : await this.approve(caller, chat, call, dto);
      await this.chats.settleProposals(em, chat, [result]);
      return undefined;
    });
    if (refusal) throw refusal;
  }

  /**
   * The approver may make this write itself: the operation granted on the object, and each record it
   * changes readable by it (inside its row filter). Otherwise nothing happens, and the token stays unspent.
   */
  private async assertMayWrite(caller: Caller, proposal: WriteProposal): Promise<void> {
    try {
      await this.access.view(caller, proposal.objectName, proposal.operation);
    } catch (error) {
      if (error instanceof DomainError) throw invalid(`this key may not ${proposal.operation} "${proposal.objectName}" records`);
      throw error;
    }
    for (const change of proposal.changes) {
      if (change.id === null) continue;
      const visible = await this.data.count(caller, proposal.objectName, { id: change.id }, { fresh: true });
      if (!visible) throw invalid(`this key may not write the "${proposal.objectName}" record ${change.id}`);
    }
  }

  private async reject(
    em: EntityManager,
    caller: Caller,
    chat: ChatRow,
    call: Proposal,
    dto: ApprovalDecision,
  ): Promise<SettledProposal> {
    if (!(await ApprovalStatements.spend(em, spentBy(dto, chat, call, caller)))) throw invalid('the token was already used');
    const reason = dto.reason?.trim() || undefined;
    await this.auditDecision(em, chat, call, caller, 'approval.reject', 'ok', reason);
    const content = errorContent(
      'approval_rejected',
      `A person rejected this proposal; nothing was written.${reason ? ` Their reason: ${reason}` : ''}`,
      reason ? { reason } : undefined,
    );
    return { toolCallId: call.id, content, isError: true, keyId: caller.keyId };
  }

  /**
   * The write, as the approver, in one data transaction with the token's spending and the audit rows of the
   * decision and the write: a token is spent exactly once, and whatever the outcome it is recorded with it.
   * A record changed since the proposal writes nothing; the model reads the records as they are now.
   */
  private async approve(caller: Caller, chat: ChatRow, call: Proposal, dto: ApprovalDecision): Promise<SettledProposal> {
    const { proposal } = call;
    return this.pool.transaction(
      async (session) => {
        if (!(await ApprovalStatements.spend(session, spentBy(dto, chat, call, caller)))) {
          throw invalid('the token was already used');
        }
        await ApprovalStatements.audit(session, [decisionEntry(chat, call, caller, 'approval.approve', 'ok')]);
        let result: SettledProposal;
        let rowCount = 0;
        try {
          const written = await this.data.batch(caller, proposal.objectName, operationsOf(proposal), true, { session });
          rowCount = written.length;
          result = {
            toolCallId: call.id,
            content: {
              status: 'written',
              operation: proposal.operation,
              objectName: proposal.objectName,
              records: written.map((r) => ({ id: r.id, ...(r.etag ? { etag: r.etag } : {}) })),
              approvedBy: caller.subject,
            },
            isError: false,
            keyId: caller.keyId,
          };
        } catch (error) {
          if (!(error instanceof DomainError)) throw error;
          result = VERSION_MISSES.has(error.code)
            ? await this.versionChanged(caller, call, session)
            : {
                toolCallId: call.id,
                content: errorContent(error.code, error.message, error.details),
                isError: true,
                keyId: caller.keyId,
              };
        }
        const outcome = result.isError ? errorCodeOf(result.content) : 'ok';
        await ApprovalStatements.audit(session, [
          { ...decisionEntry(chat, call, caller, 'record.write', outcome), target: targetOf(proposal), rowCount },
        ]);
        await ApprovalStatements.recordOutcome(session, dto.token, { content: result.content, isError: result.isError });
        return result;
      },
      { key: caller.keyId },
    );
  }

  /** What the model reads when a record moved on: nothing written, and each record as it is now (read as the approver). */
  private async versionChanged(caller: Caller, call: Proposal, session: DataSession): Promise<SettledProposal> {
    const { proposal } = call;
    const records: unknown[] = [];
    for (const change of proposal.changes) {
      if (change.id === null) continue;
      try {
        const { record, version } = await this.data.findOneVersioned(caller, proposal.objectName, change.id, undefined, {
          session,
        });
        const changed = `"${version}"` !== change.etag;
        const fields = change.after ? Object.keys(change.after) : Object.keys(record);
        records.push({
          id: change.id,
          changed,
          etag: `"${version}"`,
          current: Object.fromEntries(fields.map((name) => [name, record[name] ?? null])),
        });
      } catch (error) {
        if (!(error instanceof DomainError) || error.code !== 'record_not_found') throw error;
        records.push({ id: change.id, changed: true, deleted: true });
      }
    }
    const content = errorContent(
      'version_changed',
      'Nothing was written: a record changed after you proposed this (someone else edited or deleted it). ' +
        '"records" holds them as they are now; propose again from these values if the change still makes sense.',
      { records },
    );
    return {
      toolCallId: call.id,
      content,
      isError: true,
      keyId: caller.keyId,
      // It holds record values as the approver reads them: shown to callers with the same access.
      access: await this.access.fingerprint(caller),
    };
  }

  /** A decision's audit row, inside the ORM transaction `em`. */
  private async auditDecision(
    em: EntityManager,
    chat: ChatRow,
    call: Proposal,
    caller: Caller | undefined,
    action: string,
    outcome: string,
    reason?: string,
  ): Promise<void> {
    await ApprovalStatements.audit(em, [decisionEntry(chat, call, caller, action, outcome, reason)]);
  }
}

/** The row that spends a decision's token. */
function spentBy(dto: ApprovalDecision, chat: ChatRow, call: Proposal, caller: Caller) {
  return { token: dto.token, chatId: chat.id, toolCallId: call.id, decision: dto.decision, keyId: caller.keyId };
}

function invalid(why: string): DomainError {
  return new DomainError('approval_invalid', `The approval was refused and nothing was written: ${why}`);
}

/** The proposal of this call id waiting in the chat, if any. */
export function pendingProposal(chat: ChatRow, toolCallId: string): Proposal | undefined {
  if (chat.status !== 'requires_approval') return undefined;
  const call = chat.pendingToolCalls?.find((c) => c.id === toolCallId);
  return call?.proposal ? (call as Proposal) : undefined;
}

/** What the proposal's token was signed over, from the proposal as the chat stored it. */
export function bindingOf(chat: ChatRow, call: Proposal) {
  return {
    chatId: chat.id,
    toolCallId: call.id,
    arguments: call.arguments,
    versions: call.proposal.changes.map((change) => change.etag),
  };
}

/** What the model reads of a proposal nobody decided on in time. */
export function expiredResult(call: Proposal): SettledProposal {
  return {
    toolCallId: call.id,
    content: errorContent(
      'approval_expired',
      'Nothing was written: nobody approved this proposal before it expired. Propose it again if it is still wanted.',
      { expiresAt: call.proposal.expiresAt },
    ),
    isError: true,
    keyId: null,
  };
}

/** The batch operations of a proposal: each record under If-Match on its proposed version. */
function operationsOf(proposal: WriteProposal): unknown[] {
  return proposal.changes.map((change) => {
    if (proposal.operation === 'create') return { op: 'create', record: change.after };
    if (proposal.operation === 'delete') return { op: 'delete', id: change.id, ifMatch: change.etag };
    return { op: 'update', id: change.id, record: change.after, ifMatch: change.etag };
  });
}

/** The records of a write, for its audit row: `deal/<id>`, several ids comma-separated (the row cuts it at 300 characters). */
function targetOf(proposal: WriteProposal): string {
  const ids = proposal.changes.map((change) => change.id ?? 'new');
  return `${proposal.objectName}/${ids.join(',')}`;
}

/** An audit row of a proposal's life after the call: linked to it by the tool call id. */
export function decisionEntry(
  chat: ChatRow,
  call: Proposal,
  caller: Caller | undefined,
  action: string,
  outcome: string,
  reason?: string,
): ToolAuditEntry {
  return {
    at: new Date(),
    keyId: caller?.keyId,
    agent: chat.agent,
    chatId: chat.id,
    toolCallId: call.id,
    tool: call.name,
    action,
    arguments: reason ? { reason } : null,
    rowCount: null,
    durationMs: 0,
    outcome,
  };
}

function errorCodeOf(content: unknown): string {
  const code = (content as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === 'string' ? code : 'error';
}
