import { Module } from '@nestjs/common';
import { DataModule } from '../data/data.module';
import { ViewsModule } from '../views/views.module';
import { RecordsController } from './records.controller';
import { RecordsService } from './records.service';

/** The records API: the data engine over HTTP, with saved views resolved into its queries. */
@Module({
  imports: [DataModule, ViewsModule],
  controllers: [RecordsController],
  providers: [RecordsService],
})
export class RecordsModule {}
