import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import type { ApprovalDecision } from '../chats/durable/approval-gateway';
import { ChatService, type SettledProposal } from '../chats/durable/chat.service';
import type { ChatRow, PendingToolCall } from '../chats/durable/chat.types';
import { DomainError } from '../common/domain-error';
import { AccessService } from '../governance/access.service';
import type { WriteProposal } from '../tools/tool.types';
import { ApprovalStatements } from '../writes/approval.repository';
import {
  approvalInvalid,
  ApprovedWrites,
  decisionEntry,
  expiredOutcome,
  type ProposalRef,
  type WriteOutcome,
} from '../writes/approved-writes.service';

type Proposal = PendingToolCall & { proposal: WriteProposal };

/**
 * Decisions on a durable chat's write proposals. The chat's row stays locked from the check to the result,
 * so a decision and the expiry sweep (or two decisions) never both settle one proposal; the token, the
 * approver's rights and the write are ApprovedWrites'.
 */
@Injectable()
export class ApprovalService {
  constructor(
    private readonly em: EntityManager,
    private readonly chats: ChatService,
    private readonly access: AccessService,
    private readonly writes: ApprovedWrites,
  ) {}

  async decide(caller: Caller, chatId: string, dto: ApprovalDecision): Promise<void> {
    await this.access.assertCurrent(caller, { fresh: true });
    // An expired token still settles its proposal (the model reads that it expired) before the refusal.
    const refusal = await this.em.fork().transactional(async (em) => {
      const chat = await this.chats.lockAnyOwner(em, chatId);
      // Another person's chat is as unknown as a missing one (an admin may decide on any chat's proposals).
      if (!chat || (chat.owner !== caller.owner && caller.role !== 'admin')) {
        throw new DomainError('chat_not_found', `Chat "${chatId.slice(0, 100)}" not found`);
      }
      const call = pendingProposal(chat, dto.toolCallId);
      if (!call) {
        throw approvalInvalid('no proposal with this tool call id waits for a decision (decided, expired or never made)');
      }
      const ref = proposalRef(chat, call);
      if (this.writes.verify(ref, dto.token).expired) {
        await this.chats.settleProposals(em, chat, [settled(call, expiredOutcome(call.proposal), null)]);
        await ApprovalStatements.audit(em, [decisionEntry(ref, caller, 'approval.expire', 'ok')]);
        return approvalInvalid('the token has expired');
      }
      await this.writes.assertMayWrite(caller, call.proposal);
      const outcome =
        dto.decision === 'reject'
          ? await this.writes.reject(em, caller, ref, dto.token, dto.reason)
          : await this.writes.approve(caller, ref, dto.token);
      await this.chats.settleProposals(em, chat, [settled(call, outcome, caller.keyId)]);
      return undefined;
    });
    if (refusal) throw refusal;
  }
}

/** The proposal of this call id waiting in the chat, if any. */
export function pendingProposal(chat: ChatRow, toolCallId: string): Proposal | undefined {
  if (chat.status !== 'requires_approval') return undefined;
  const call = chat.pendingToolCalls?.find((c) => c.id === toolCallId);
  return call?.proposal ? (call as Proposal) : undefined;
}

/** A chat's proposal as ApprovedWrites takes it: its token binds the chat's id. */
export function proposalRef(chat: ChatRow, call: Proposal): ProposalRef {
  return {
    scope: chat.id,
    toolCallId: call.id,
    tool: call.name,
    arguments: call.arguments,
    proposal: call.proposal,
    agent: chat.agent,
    chatId: chat.id,
  };
}

/** The chat's record of a settled proposal: the outcome, and the key that decided it (null when it expired). */
export function settled(call: Proposal, outcome: WriteOutcome, keyId: string | null): SettledProposal {
  return { toolCallId: call.id, content: outcome.content, isError: outcome.isError, keyId, access: outcome.access };
}
