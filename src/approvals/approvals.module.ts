import { Module, OnModuleInit } from '@nestjs/common';
import { ApprovalGateway } from '../chats/durable/approval-gateway';
import { DurableChatsModule } from '../chats/durable/durable-chats.module';
import { GovernanceModule } from '../governance/governance.module';
import { WritesModule } from '../writes/writes.module';
import { ApprovalExpiry } from './approval-expiry.service';
import { ApprovalService } from './approval.service';
import { ApprovalsController } from './approvals.controller';

/**
 * Approvals in durable chats: the decision route (and useChat's approval responses) on a chat's pending
 * proposals, and the expiry of proposals nobody decided on. The write itself is WritesModule's.
 */
@Module({
  imports: [WritesModule, GovernanceModule, DurableChatsModule],
  controllers: [ApprovalsController],
  providers: [ApprovalService, ApprovalExpiry],
})
export class ApprovalsModule implements OnModuleInit {
  constructor(
    private readonly approvals: ApprovalService,
    private readonly gateway: ApprovalGateway,
  ) {}

  onModuleInit(): void {
    // The AI SDK's approval responses (useChat) reach the same decisions as POST /chats/:id/approvals.
    this.gateway.register((caller, chatId, decision) => this.approvals.decide(caller, chatId, decision));
  }
}
