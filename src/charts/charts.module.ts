import { Module } from '@nestjs/common';
import { DurableChatsModule } from '../chats/durable/durable-chats.module';
import { ChartService } from './chart.service';
import { ChartsController } from './charts.controller';

/**
 * Charts: the `visualize` tool (chart-spec.ts; ToolsModule registers it with the other tools, so the
 * registry is complete before agents are checked) and the SVG of a durable chat's chart, rendered on the server.
 */
@Module({
  imports: [DurableChatsModule],
  controllers: [ChartsController],
  providers: [ChartService],
})
export class ChartsModule {}
