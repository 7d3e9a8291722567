import { MikroOrmModule } from '@mikro-orm/nestjs';
import { Module } from '@nestjs/common';
import { GovernanceModule } from '../governance/governance.module';
import { ViewController } from './view.controller';
import { ViewEntity } from './view.entity';
import { MetadataModule } from '../metadata/metadata.module';
import { ViewRepository } from './view.repository';
import { ViewService } from './view.service';

/** Saved views: definitions in metadata, resolved into a where/orderBy/fields for the records API and the tools. */
@Module({
  imports: [MikroOrmModule.forFeature([ViewEntity]), MetadataModule, GovernanceModule],
  controllers: [ViewController],
  providers: [ViewRepository, ViewService],
  exports: [ViewService],
})
export class ViewsModule {}
