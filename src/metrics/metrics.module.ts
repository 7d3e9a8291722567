import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { DataModule } from '../data/data.module';
import { GovernanceModule } from '../governance/governance.module';
import { MetadataModule } from '../metadata/metadata.module';
import { MetricDefinitionEntity } from './metric-definition.entity';
import { MetricController } from './metric.controller';
import { MetricRepository } from './metric.repository';
import { MetricService } from './metric.service';

/** The semantic layer: metric definitions in metadata, compiled into the data engine's aggregates. */
@Module({
  imports: [MikroOrmModule.forFeature([MetricDefinitionEntity]), MetadataModule, GovernanceModule, DataModule],
  controllers: [MetricController],
  providers: [MetricRepository, MetricService],
  exports: [MetricService],
})
export class SemanticMetricsModule {}
