import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { LlmModule } from '../llm/llm.module';
import { MetadataModule } from '../metadata/metadata.module';
import { SeedModule } from '../seed/seed.module';
import { ToolsModule } from '../tools/tools.module';
import { AgentChatController } from './agent-chat.controller';
import { AgentChatService } from './agent-chat.service';
import { AgentController } from './agent.controller';
import { AgentEntity } from './agent.entity';
import { AgentLoop } from './agent-loop.service';
import { AgentRuntime } from './agent-runtime.service';
import { AgentService } from './agent.service';

@Module({
  imports: [MikroOrmModule.forFeature([AgentEntity]), LlmModule, ToolsModule, MetadataModule, SeedModule],
  controllers: [AgentController, AgentChatController],
  providers: [AgentService, AgentRuntime, AgentLoop, AgentChatService],
  exports: [AgentService, AgentRuntime, AgentLoop],
})
export class AgentsModule {}
