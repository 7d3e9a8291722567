import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { GovernanceModule } from '../governance/governance.module';
import { LlmModule } from '../llm/llm.module';
import { MetadataModule } from '../metadata/metadata.module';
import { ToolsModule } from '../tools/tools.module';
import { ViewsModule } from '../views/views.module';
import { AgentLoop } from './agent-loop.service';
import { AgentRuntime } from './agent-runtime.service';

/** The one tool-call loop and the one way to prepare a turn for it; every chat front door depends on this. */
@Module({
  imports: [AgentsModule, LlmModule, ToolsModule, MetadataModule, GovernanceModule, ViewsModule],
  providers: [AgentRuntime, AgentLoop],
  exports: [AgentRuntime, AgentLoop],
})
export class RuntimeModule {}
