import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { ApprovalGateway } from '../chats/durable/approval-gateway';
import { DurableChatsModule } from '../chats/durable/durable-chats.module';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataModule } from '../data/data.module';
import { DataService } from '../data/data.service';
import { AccessService } from '../governance/access.service';
import { GovernanceModule } from '../governance/governance.module';
import { ToolRegistry } from '../tools/tool.registry';
import { ToolsModule } from '../tools/tools.module';
import { ApprovalExpiry } from './approval-expiry.service';
import { ApprovalTokens } from './approval-tokens';
import { ApprovalService } from './approval.service';
import { ApprovalsController } from './approvals.controller';
import { createWriteTools } from './write-tools';

/**
 * Writes with approval: the write tools (proposals only), their signed single-use tokens, the decision
 * route and the write under If-Match, and the expiry of proposals nobody decided on.
 */
@Module({
  imports: [ToolsModule, DataModule, GovernanceModule, DurableChatsModule],
  controllers: [ApprovalsController],
  providers: [ApprovalTokens, ApprovalService, ApprovalExpiry],
})
export class ApprovalsModule implements OnModuleInit {
  constructor(
    private readonly registry: ToolRegistry,
    private readonly data: DataService,
    private readonly access: AccessService,
    private readonly tokens: ApprovalTokens,
    private readonly approvals: ApprovalService,
    private readonly gateway: ApprovalGateway,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Registered before the application starts serving: agents naming them are checked against a complete registry. */
  onModuleInit(): void {
    for (const tool of createWriteTools({
      data: this.data,
      access: this.access,
      tokens: this.tokens,
      ttlSeconds: this.config.approvalTtlS,
    })) {
      this.registry.register(tool);
    }
    // The AI SDK's approval responses (useChat) reach the same decisions as POST /chats/:id/approvals.
    this.gateway.register((caller, chatId, decision) => this.approvals.decide(caller, chatId, decision));
  }
}
