import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { MetadataCache } from './metadata.cache';
import { MetadataController } from './metadata.controller';
import { MetadataRepository } from './metadata.repository';
import { MetadataService } from './metadata.service';
import { ObjectCatalogService } from './object-catalog.service';
import { FieldDefinitionEntity, ObjectDefinitionEntity } from './object-definition.entity';

@Module({
  imports: [MikroOrmModule.forFeature([ObjectDefinitionEntity, FieldDefinitionEntity])],
  controllers: [MetadataController],
  providers: [MetadataCache, MetadataRepository, MetadataService, ObjectCatalogService],
  exports: [MetadataService],
})
export class MetadataModule {}
