import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { ToolAuditEntry } from '../audit/audit-log.service';
import type { Caller } from '../auth/caller';
import { newChangeSet } from '../data/change-outbox';
import { ChangeSetService } from '../history/change-sets.service';
import { DomainError } from '../common/domain-error';
import { DataService } from '../data/data.service';
import { DataPool, type DataSession } from '../database/data-pool';
import { AccessService } from '../governance/access.service';
import { errorContent } from '../tools/tool.define';
import { capContent, DEFAULT_OUTPUT_CAP_BYTES } from '../tools/tool.middlewares';
import type { WriteProposal } from '../tools/tool.types';
import { ApprovalTokens, type ApprovalBinding } from './approval-tokens';
import { ApprovalStatements } from './approval.repository';

/** Record-level failures of an If-Match write: the record moved on (changed, deleted, or left the caller's rows). */
const VERSION_MISSES = new Set(['precondition_failed', 'record_not_found']);

/** A write proposal as its front door holds it: what the token was signed over, and what the audit rows name. */
export interface ProposalRef {
  /** The conversation the proposal was made in: a durable chat's id, or the front door's own scope. */
  scope: string;
  toolCallId: string;
  /** The write tool the model called. */
  tool: string;
  /** The call's arguments as the model made them. */
  arguments: unknown;
  proposal: WriteProposal;
  /** The agent whose turn proposed it (audit rows). */
  agent: string | null;
  /** The durable chat, when there is one (audit rows). */
  chatId?: string;
}

/** What a decision came to: the tool result the model reads. */
export interface WriteOutcome {
  content: unknown;
  isError: boolean;
  /** When the result holds record values: the access fingerprint they were read under. */
  access?: string | null;
}

export type Decision = 'approve' | 'reject';

/**
 * The one path from a person's decision to a write, for every front door (durable chats, MCP, the
 * OpenAI-compatible API). A decision counts only with the proposal's token (signed for this proposal,
 * unexpired, not spent) and from a key that may make the write itself; an approved write runs as that key,
 * under If-Match on every record's proposed version, in one transaction with the token's spending and the
 * audit rows of the decision and the write.
 */
@Injectable()
export class ApprovedWrites {
  constructor(
    private readonly data: DataService,
    private readonly pool: DataPool,
    private readonly access: AccessService,
    private readonly tokens: ApprovalTokens,
    private readonly changeSets: ChangeSetService,
  ) {}

  /** Whether the token was issued for this proposal (refused with approval_invalid if not), and whether it expired. */
  verify(ref: ProposalRef, token: unknown): { expired: boolean } {
    const check = this.tokens.verify(token, bindingOf(ref));
    // The proposal as it was shown carries its token: another one in it is another proposal.
    if (!check.valid || ref.proposal.token !== token) throw approvalInvalid('the token was not issued for this proposal');
    return { expired: check.expired };
  }

  /**
   * The approver may make this write itself: the operation granted on the object, and each record it
   * changes readable by it (inside its row filter). Otherwise nothing happens, and the token stays unspent.
   */
  async assertMayWrite(caller: Caller, proposal: WriteProposal): Promise<void> {
    try {
      await this.access.view(caller, proposal.objectName, proposal.operation);
    } catch (error) {
      if (error instanceof DomainError) {
        throw approvalInvalid(`this key may not ${proposal.operation} "${proposal.objectName}" records`);
      }
      throw error;
    }
    // A revert checks its records itself (some may be in the trash), under its locks.
    for (const change of proposal.revertOf ? [] : proposal.changes) {
      if (change.id === null) continue;
      const visible = await this.data.count(caller, proposal.objectName, { id: change.id }, { fresh: true });
      if (!visible) throw approvalInvalid(`this key may not write the "${proposal.objectName}" record ${change.id}`);
    }
  }

  /**
   * A whole decision for a front door without a chat to lock (MCP, the OpenAI-compatible API): the token
   * checked, the approver's right to write checked, then the rejection or the write. A token past its expiry
   * is spent as expired (once, audited) and the model reads `approval_expired`. Refusals throw approval_invalid
   * and write nothing.
   */
  async decide(caller: Caller, ref: ProposalRef, decision: Decision, token: string, reason?: string): Promise<WriteOutcome> {
    await this.access.assertCurrent(caller, { fresh: true });
    if (this.verify(ref, token).expired) return this.expire(caller, ref, token);
    await this.assertMayWrite(caller, ref.proposal);
    if (decision === 'approve') return this.approve(caller, ref, token);
    return this.pool.transaction((session) => this.reject(session, caller, ref, token, reason), { key: caller.keyId });
  }

  /**
   * A proposal nobody decided on in time (its expiry passed, or the person's client left first): nothing
   * written, the non-decision audited; the model reads approval_expired. With the token presented after its
   * expiry (a client that sends its answer again with every request), the token is spent as expired, so that
   * it is audited once however often it comes back.
   */
  async expire(caller: Caller, ref: ProposalRef, token?: string): Promise<WriteOutcome> {
    const outcome = expiredOutcome(ref.proposal);
    await this.pool.transaction(
      async (session) => {
        if (token && !(await ApprovalStatements.spend(session, spentBy(ref, token, 'expire', caller)))) return;
        await ApprovalStatements.audit(session, [decisionEntry(ref, caller, 'approval.expire', 'ok')]);
        if (token) await ApprovalStatements.recordOutcome(session, token, outcome);
      },
      { key: caller.keyId },
    );
    return outcome;
  }

  /** A rejection: the token spent and the decision audited in the runner's transaction; the model reads why. */
  async reject(
    runner: EntityManager | DataSession,
    caller: Caller,
    ref: ProposalRef,
    token: string,
    reason?: string,
  ): Promise<WriteOutcome> {
    if (!(await ApprovalStatements.spend(runner, spentBy(ref, token, 'reject', caller)))) {
      throw approvalInvalid('the token was already used');
    }
    const why = reason?.trim() || undefined;
    await ApprovalStatements.audit(runner, [decisionEntry(ref, caller, 'approval.reject', 'ok', why)]);
    const content = errorContent(
      'approval_rejected',
      `A person rejected this proposal; nothing was written.${why ? ` Their reason: ${why}` : ''}`,
      why ? { reason: why } : undefined,
    );
    const outcome = { content, isError: true };
    await ApprovalStatements.recordOutcome(runner, token, outcome);
    return outcome;
  }

  /**
   * The write, as the approver, in one data transaction with the token's spending and the audit rows of the
   * decision and the write: a token is spent exactly once, and whatever the outcome it is recorded with it.
   * A record changed since the proposal writes nothing; the model reads the records as they are now.
   */
  async approve(caller: Caller, ref: ProposalRef, token: string): Promise<WriteOutcome> {
    const { proposal } = ref;
    return this.pool.transaction(
      async (session) => {
        if (!(await ApprovalStatements.spend(session, spentBy(ref, token, 'approve', caller)))) {
          throw approvalInvalid('the token was already used');
        }
        await ApprovalStatements.audit(session, [decisionEntry(ref, caller, 'approval.approve', 'ok')]);
        let outcome: WriteOutcome;
        let rowCount = 0;
        try {
          const link = { chatId: ref.chatId ?? ref.scope, toolCallId: ref.toolCallId, approverKeyId: caller.keyId };
          if (proposal.revertOf) {
            // The revert checks, under its locks, that nothing changed since the set: its conflicts are the model's to read.
            const revert = await this.changeSets.revertIn(session, caller, proposal.revertOf, link);
            rowCount = proposal.changes.length;
            return await this.settle(
              session,
              ref,
              caller,
              token,
              {
                content: {
                  status: 'written',
                  operation: 'revert',
                  objectName: proposal.objectName,
                  reverted: proposal.revertOf,
                  changeSetId: revert.id,
                  records: proposal.changes.map((change) => ({ id: change.id })),
                  approvedBy: caller.subject,
                },
                isError: false,
              },
              rowCount,
            );
          }
          // One change set per approval, tied to its chat and tool call: reverted as one.
          const changeSet = newChangeSet('approval', link);
          const written = await this.data.batch(caller, proposal.objectName, operationsOf(proposal), true, {
            session,
            changeSet,
          });
          rowCount = written.length;
          outcome = {
            content: {
              status: 'written',
              operation: proposal.operation,
              objectName: proposal.objectName,
              changeSetId: changeSet.id,
              records: written.map((r) => ({ id: r.id, ...(r.etag ? { etag: r.etag } : {}) })),
              approvedBy: caller.subject,
            },
            isError: false,
          };
        } catch (error) {
          if (!(error instanceof DomainError)) throw error;
          if (VERSION_MISSES.has(error.code)) outcome = await this.versionChanged(caller, proposal, session);
          else {
            outcome = { content: errorContent(error.code, error.message, error.details), isError: true };
            // A revert's conflicts hold record values as the approver reads them.
            if (error.code === 'revert_conflict') outcome.access = await this.access.fingerprint(caller);
          }
        }
        return this.settle(session, ref, caller, token, outcome, rowCount);
      },
      { key: caller.keyId },
    );
  }

  /** The write's audit row and the token's recorded outcome, in the decision's transaction. */
  private async settle(
    session: DataSession,
    ref: ProposalRef,
    caller: Caller,
    token: string,
    outcome: WriteOutcome,
    rowCount: number,
  ): Promise<WriteOutcome> {
    const result = outcome.isError ? errorCodeOf(outcome.content) : 'ok';
    await ApprovalStatements.audit(session, [
      { ...decisionEntry(ref, caller, 'record.write', result), target: targetOf(ref.proposal), rowCount },
    ]);
    await ApprovalStatements.recordOutcome(session, token, { content: outcome.content, isError: outcome.isError });
    return outcome;
  }

  /**
   * What came of a token already spent, for the key that spent it: a front door whose client sends the whole
   * conversation again (the OpenAI-compatible API) shows the recorded outcome instead of deciding twice.
   * Undefined when the token is unspent, or was spent by another key, or its write has not committed.
   */
  async spentOutcome(caller: Caller, token: string): Promise<WriteOutcome | undefined> {
    const spent = await this.pool.transaction((session) => ApprovalStatements.spent(session, token), { key: caller.keyId });
    if (!spent?.outcome || spent.keyId !== caller.keyId) return undefined;
    return spent.outcome;
  }

  /** What the model reads when a record moved on: nothing written, and each record as it is now (read as the approver). */
  private async versionChanged(caller: Caller, proposal: WriteProposal, session: DataSession): Promise<WriteOutcome> {
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
    // What the model reads: within the tool output cap, like any tool result (the error's message left room).
    const content = errorContent(
      'version_changed',
      'Nothing was written: a record changed after you proposed this (someone else edited or deleted it). ' +
        '"records" holds them as they are now; propose again from these values if the change still makes sense.',
      capContent({ records }, DEFAULT_OUTPUT_CAP_BYTES - 1024),
    );
    // It holds record values as the approver reads them: shown to callers with the same access.
    return { content, isError: true, access: await this.access.fingerprint(caller) };
  }
}

/** The refusal of a decision: nothing was written. */
export function approvalInvalid(why: string): DomainError {
  return new DomainError('approval_invalid', `The approval was refused and nothing was written: ${why}`);
}

/** What the proposal's token was signed over. */
export function bindingOf(ref: ProposalRef): ApprovalBinding {
  return {
    scope: ref.scope,
    toolCallId: ref.toolCallId,
    tool: ref.tool,
    arguments: ref.arguments,
    proposal: ref.proposal,
    expiresAt: ref.proposal.expiresAt,
  };
}

/** What the model reads of a proposal nobody decided on in time. */
export function expiredOutcome(proposal: WriteProposal): WriteOutcome {
  return {
    content: errorContent(
      'approval_expired',
      'Nothing was written: nobody approved this proposal before it expired. Propose it again if it is still wanted.',
      { expiresAt: proposal.expiresAt },
    ),
    isError: true,
  };
}

/** An audit row of a proposal's life after the call: linked to it by the tool call id. */
export function decisionEntry(
  ref: ProposalRef,
  caller: Caller | undefined,
  action: string,
  outcome: string,
  reason?: string,
): ToolAuditEntry {
  return {
    at: new Date(),
    keyId: caller?.keyId,
    agent: ref.agent ?? undefined,
    chatId: ref.chatId,
    toolCallId: ref.toolCallId,
    tool: ref.tool,
    action,
    arguments: reason ? { reason } : null,
    rowCount: null,
    durationMs: 0,
    outcome,
  };
}

function spentBy(ref: ProposalRef, token: string, decision: Decision | 'expire', caller: Caller) {
  return { token, scope: ref.scope, toolCallId: ref.toolCallId, decision, keyId: caller.keyId };
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

function errorCodeOf(content: unknown): string {
  const code = (content as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === 'string' ? code : 'error';
}
