import { AuditModule } from '../audit/audit.module';
import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { MetadataCache } from './metadata.cache';
import { MetadataController } from './metadata.controller';
import { MetadataRepository } from './metadata.repository';
import { MetadataDependents } from './metadata-dependents';
import { MetadataService } from './metadata.service';
import { FieldDefinitionEntity, ObjectDefinitionEntity } from './object-definition.entity';

@Module({
  imports: [MikroOrmModule.forFeature([ObjectDefinitionEntity, FieldDefinitionEntity]), AuditModule],
  controllers: [MetadataController],
  providers: [MetadataCache, MetadataDependents, MetadataRepository, MetadataService],
  exports: [MetadataDependents, MetadataService],
})
export class MetadataModule {}
