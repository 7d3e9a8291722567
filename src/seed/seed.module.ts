import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { DataModule } from '../data/data.module';
import { MetadataModule } from '../metadata/metadata.module';
import { SeedService } from './seed.service';

@Module({
  imports: [AuthModule, MetadataModule, DataModule],
  providers: [SeedService],
  exports: [SeedService],
})
export class SeedModule {}
