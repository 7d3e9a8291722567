import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { AuthModule } from '../auth/auth.module';
import { DataModule } from '../data/data.module';
import { MetadataModule } from '../metadata/metadata.module';
import { SemanticMetricsModule } from '../metrics/metrics.module';
import { SeedService } from './seed.service';

@Module({
  imports: [AuthModule, AgentsModule, MetadataModule, DataModule, SemanticMetricsModule],
  providers: [SeedService],
})
export class SeedModule {}
