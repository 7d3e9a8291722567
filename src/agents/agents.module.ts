import { AuditModule } from '../audit/audit.module';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { MetadataModule } from '../metadata/metadata.module';
import { ToolsModule } from '../tools/tools.module';
import { AgentController } from './agent.controller';
import { AgentEntity } from './agent.entity';
import { AgentRepository } from './agent.repository';
import { AgentService } from './agent.service';

/** Agent definitions: the entity, admin CRUD, loading for a run and the built-in agents. Running them is the runtime's. */
@Module({
  imports: [MikroOrmModule.forFeature([AgentEntity]), AuditModule, MetadataModule, ToolsModule],
  controllers: [AgentController],
  providers: [AgentRepository, AgentService],
  exports: [AgentService],
})
export class AgentsModule {}
