import { Injectable } from '@nestjs/common';
import type { Caller } from '../../auth/caller';
import { DomainError } from '../../common/domain-error';

/** A person's decision on a write proposal of a chat, with the proposal's token. */
export interface ApprovalDecision {
  toolCallId: string;
  decision: 'approve' | 'reject';
  token: string;
  reason?: string;
}

export type ApprovalHandler = (caller: Caller, chatId: string, decision: ApprovalDecision) => Promise<void>;

/**
 * Where a chat front door hands a decision on a write proposal (the AI SDK's approval responses). The
 * approvals module, which depends on chats and not the other way round, registers the one handler at start.
 */
@Injectable()
export class ApprovalGateway {
  private handler?: ApprovalHandler;

  register(handler: ApprovalHandler): void {
    this.handler = handler;
  }

  decide(caller: Caller, chatId: string, decision: ApprovalDecision): Promise<void> {
    if (!this.handler) throw new DomainError('approval_invalid', 'This server takes no approvals');
    return this.handler(caller, chatId, decision);
  }
}
