import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { AuthModule } from '../auth/auth.module';
import { DataModule } from '../data/data.module';
import { MetadataModule } from '../metadata/metadata.module';
import { SeedService } from './seed.service';

@Module({
  imports: [AuthModule, AgentsModule, MetadataModule, DataModule],
  providers: [SeedService],
})
export class SeedModule {}
