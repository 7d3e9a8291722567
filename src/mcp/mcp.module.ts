import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { ToolsModule } from '../tools/tools.module';
import { McpServerFactory } from './mcp-server.factory';
import { McpOriginGuard } from './mcp-origin.guard';
import { McpController } from './mcp.controller';
import { McpService } from './mcp.service';

/** The MCP server: data tools, object resources and agent prompts over Streamable HTTP, on the same registry as REST. */
@Module({
  imports: [ToolsModule, MetadataModule, AgentsModule, GovernanceModule],
  controllers: [McpController],
  providers: [McpService, McpServerFactory, McpOriginGuard],
})
export class McpModule {}
