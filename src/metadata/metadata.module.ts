import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { MetadataController } from './metadata.controller';
import { MetadataService } from './metadata.service';
import { FieldDefinitionEntity, ObjectDefinitionEntity } from './object-definition.entity';

@Module({
  imports: [MikroOrmModule.forFeature([ObjectDefinitionEntity, FieldDefinitionEntity])],
  controllers: [MetadataController],
  providers: [MetadataService],
  exports: [MetadataService],
})
export class MetadataModule {}
