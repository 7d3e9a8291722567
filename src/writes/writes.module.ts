import { Inject, Module, OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataModule } from '../data/data.module';
import { DataService } from '../data/data.service';
import { AccessService } from '../governance/access.service';
import { GovernanceModule } from '../governance/governance.module';
import { ChangeSetService } from '../history/change-sets.service';
import { HistoryModule } from '../history/history.module';
import { ToolRegistry } from '../tools/tool.registry';
import { ToolsModule } from '../tools/tools.module';
import { ApprovalTokens } from './approval-tokens';
import { ApprovedWrites } from './approved-writes.service';
import { createWriteTools } from './write-tools';

/**
 * Writes that only a person's approval performs: the write tools (proposals only), their signed single-use
 * tokens, and the write under If-Match. Front doors that can wait for a person (durable chats, MCP with
 * elicitation, the OpenAI-compatible API's approval calls) take decisions through ApprovedWrites.
 */
@Module({
  imports: [ToolsModule, DataModule, GovernanceModule, HistoryModule],
  providers: [ApprovalTokens, ApprovedWrites],
  exports: [ApprovalTokens, ApprovedWrites],
})
export class WritesModule implements OnModuleInit {
  constructor(
    private readonly registry: ToolRegistry,
    private readonly data: DataService,
    private readonly changeSets: ChangeSetService,
    private readonly access: AccessService,
    private readonly tokens: ApprovalTokens,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Registered before the application starts serving: agents naming them are checked against a complete registry. */
  onModuleInit(): void {
    for (const tool of createWriteTools({
      data: this.data,
      changeSets: this.changeSets,
      access: this.access,
      tokens: this.tokens,
      ttlSeconds: this.config.approvalTtlS,
    })) {
      this.registry.register(tool);
    }
  }
}
