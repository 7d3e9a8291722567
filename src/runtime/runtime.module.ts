import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { GovernanceModule } from '../governance/governance.module';
import { LlmModule } from '../llm/llm.module';
import { MetadataModule } from '../metadata/metadata.module';
import { SemanticMetricsModule } from '../metrics/metrics.module';
import { ToolsModule } from '../tools/tools.module';
import { ViewsModule } from '../views/views.module';
import { AgentLoop } from './agent-loop.service';
import { AgentRuntime } from './agent-runtime.service';
import { GroundingCatalog } from './grounding-catalog.service';

/** The one tool-call loop and the one way to prepare a turn for it; every chat front door depends on this. */
@Module({
  imports: [AgentsModule, LlmModule, ToolsModule, MetadataModule, SemanticMetricsModule, GovernanceModule, ViewsModule],
  providers: [AgentRuntime, AgentLoop, GroundingCatalog],
  exports: [AgentRuntime, AgentLoop],
})
export class RuntimeModule {}
