import { Logger, Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataModule } from '../data/data.module';
import { DataPool } from '../database/data-pool';
import { DataService } from '../data/data.service';
import { MetadataModule } from '../metadata/metadata.module';
import { MetadataService } from '../metadata/metadata.service';
import { createAskUserTool } from './ask-user.tool';
import { createDataTools } from './data-tools';
import {
  auditMiddleware,
  outputCapMiddleware,
  permissionMiddleware,
  rateLimitMiddleware,
  timeoutMiddleware,
} from './tool.middlewares';
import { ToolRegistry } from './tool.registry';
import { ToolsController } from './tools.controller';
import { ToolsService } from './tools.service';

/**
 * Builds the registry with its middleware chain and the five data tools before anyone can inject it,
 * so agents always see a complete registry. Order: audit (sees every attempt) → permission →
 * rate limit → output cap → timeout → validation + tool.
 */
function createToolRegistry(config: AppConfig, data: DataService, metadata: MetadataService, pool: DataPool): ToolRegistry {
  const registry = new ToolRegistry();
  registry.use(
    auditMiddleware(new Logger('ToolAudit')),
    permissionMiddleware(),
    rateLimitMiddleware(),
    outputCapMiddleware(),
    timeoutMiddleware(config.toolTimeoutMs),
  );
  for (const tool of createDataTools({ data, metadata, pool })) {
    registry.register(tool);
  }
  registry.register(createAskUserTool());
  return registry;
}

@Module({
  imports: [DataModule, MetadataModule],
  controllers: [ToolsController],
  providers: [
    { provide: ToolRegistry, useFactory: createToolRegistry, inject: [APP_CONFIG, DataService, MetadataService, DataPool] },
    ToolsService,
  ],
  exports: [ToolRegistry, ToolsService],
})
export class ToolsModule {}
