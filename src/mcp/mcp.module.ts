import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { ToolsModule } from '../tools/tools.module';
import { WritesModule } from '../writes/writes.module';
import { McpConfirmations } from './mcp-confirmations.service';
import { McpServerFactory } from './mcp-server.factory';
import { McpSessions } from './mcp-sessions';
import { McpWriteCalls } from './mcp-write-calls.service';
import { McpOriginGuard } from './mcp-origin.guard';
import { McpController } from './mcp.controller';
import { McpService } from './mcp.service';
import { ProtectedResourceController } from './protected-resource.controller';

/**
 * The MCP server: data tools, object resources and agent prompts over Streamable HTTP, on the same registry as
 * REST; an agent's write tools where the client can confirm each write (sessions with elicitation).
 */
@Module({
  imports: [ToolsModule, MetadataModule, AgentsModule, GovernanceModule, WritesModule],
  controllers: [McpController, ProtectedResourceController],
  providers: [McpService, McpServerFactory, McpOriginGuard, McpSessions, McpConfirmations, McpWriteCalls],
})
export class McpModule {}
