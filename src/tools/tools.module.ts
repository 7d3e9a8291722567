import { AuditModule } from '../audit/audit.module';
import { Logger, Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DataModule } from '../data/data.module';
import { HistoryModule } from '../history/history.module';
import { HistoryService } from '../history/history.service';
import { DataPool } from '../database/data-pool';
import { DataService } from '../data/data.service';
import { AccessService } from '../governance/access.service';
import { AuditLog } from '../audit/audit-log.service';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { MetadataService } from '../metadata/metadata.service';
import { MetricService } from '../metrics/metric.service';
import { SemanticMetricsModule } from '../metrics/metrics.module';
import { PrometheusService } from '../observability/prometheus.service';
import { createAskUserTool } from './ask-user.tool';
import { createCalculateTool } from './calculate/calculate.tool';
import { createDataTools } from './data-tools';
import { createVisualizeTool } from './chart-tools/visualize.tool';
import { createMetricTools } from './metric-tools';
import {
  auditMiddleware,
  auditTrailMiddleware,
  prometheusMiddleware,
  outputCapMiddleware,
  permissionMiddleware,
  rateLimitMiddleware,
  timeoutMiddleware,
} from './tool.middlewares';
import { ReaderRoleCheck } from './reader-role.check';
import { ToolRegistry } from './tool.registry';
import { ToolsController } from './tools.controller';
import { ToolsService } from './tools.service';
import { ViewService } from '../views/view.service';
import { ViewsModule } from '../views/views.module';

/**
 * Builds the registry with its middleware chain, the data tools, the two metric tools, ask_user, calculate and visualize before anyone can
 * inject it, so agents always see a complete registry. Order: metrics, the audit log line and the audit trail (see every attempt) →
 * permission → rate limit → output cap → timeout → validation + tool.
 */
function createToolRegistry(
  config: AppConfig,
  data: DataService,
  metadata: MetadataService,
  pool: DataPool,
  metrics: PrometheusService,
  access: AccessService,
  audit: AuditLog,
  semantic: MetricService,
  views: ViewService,
  history: HistoryService,
): ToolRegistry {
  const registry = new ToolRegistry();
  registry.use(
    prometheusMiddleware(metrics),
    auditMiddleware(new Logger('ToolAudit')),
    auditTrailMiddleware(
      (entry) => audit.toolCall(entry),
      (caller, objectName) => access.hiddenFields(caller, objectName),
    ),
    permissionMiddleware(),
    rateLimitMiddleware(),
    outputCapMiddleware(),
    timeoutMiddleware(config.toolTimeoutMs),
  );
  for (const tool of [
    ...createDataTools({ data, metadata, pool, access, views, history }),
    ...createMetricTools({ data, metadata, pool, access, views, history, metrics: semantic }),
  ]) {
    registry.register(tool);
  }
  registry.register(createAskUserTool());
  registry.register(createCalculateTool());
  registry.register(createVisualizeTool());
  return registry;
}

@Module({
  imports: [AuditModule, DataModule, MetadataModule, GovernanceModule, SemanticMetricsModule, ViewsModule, HistoryModule],
  controllers: [ToolsController],
  providers: [
    {
      provide: ToolRegistry,
      useFactory: createToolRegistry,
      inject: [
        APP_CONFIG,
        DataService,
        MetadataService,
        DataPool,
        PrometheusService,
        AccessService,
        AuditLog,
        MetricService,
        ViewService,
        HistoryService,
      ],
    },
    ToolsService,
    ReaderRoleCheck,
  ],
  exports: [ToolRegistry, ToolsService],
})
export class ToolsModule {}
