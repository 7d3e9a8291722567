import { DynamicModule, Module } from '@nestjs/common';
import { AgentsModule } from './agents/agents.module';
import { ApprovalsModule } from './approvals/approvals.module';
import { AuthModule } from './auth/auth.module';
import { ChartsModule } from './charts/charts.module';
import { DurableChatsModule } from './chats/durable/durable-chats.module';
import { StatelessChatModule } from './chats/stateless/stateless-chat.module';
import type { AppConfig } from './config/app-config';
import { ChangesModule } from './changes/changes.module';
import { HistoryModule } from './history/history.module';
import { ConfigModule } from './config/config.module';
import { DataModule } from './data/data.module';
import { DatabaseModule } from './database/database.module';
import { GovernanceModule } from './governance/governance.module';
import { HealthModule } from './health/health.module';
import { McpModule } from './mcp/mcp.module';
import { MetadataModule } from './metadata/metadata.module';
import { SemanticMetricsModule } from './metrics/metrics.module';
import type { PrometheusService } from './observability/prometheus.service';
import { ObservabilityModule } from './observability/observability.module';
import { OpenAiCompatModule } from './openai-compat/openai-compat.module';
import { PlaygroundModule } from './playground/playground.module';
import { RecordsModule } from './records/records.module';
import { RuntimeModule } from './runtime/runtime.module';
import { SeedModule } from './seed/seed.module';
import { ToolsModule } from './tools/tools.module';
import { TransferModule } from './transfer/transfer.module';
import { ViewsModule } from './views/views.module';
import { JobsModule } from './jobs/jobs.module';
import { WebhooksModule } from './webhooks/webhooks.module';
import { SchedulesModule } from './schedules/schedules.module';

@Module({})
export class AppModule {
  static forRoot(config: AppConfig, databaseUrl: string, metrics: PrometheusService): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot(databaseUrl),
        ObservabilityModule.forRoot(metrics),
        AuthModule,
        MetadataModule,
        GovernanceModule,
        DataModule,
        RecordsModule,
        TransferModule,
        ChangesModule,
        HistoryModule,
        JobsModule,
        WebhooksModule,
        SchedulesModule,
        ViewsModule,
        SemanticMetricsModule,
        SeedModule,
        ToolsModule,
        AgentsModule,
        RuntimeModule,
        StatelessChatModule,
        DurableChatsModule,
        ChartsModule,
        ApprovalsModule,
        OpenAiCompatModule,
        McpModule,
        HealthModule,
        PlaygroundModule,
      ],
    };
  }
}
