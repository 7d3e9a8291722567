import { Module } from '@nestjs/common';
import { AgentsModule } from '../agents/agents.module';
import { RuntimeModule } from '../runtime/runtime.module';
import { WritesModule } from '../writes/writes.module';
import { OpenAiCompatController } from './openai-compat.controller';
import { OpenAiCompatService } from './openai-compat.service';

/** `/v1/models` and `/v1/chat/completions`: every agent as an OpenAI model, for the `openai` SDKs and the tools built on them. */
@Module({
  imports: [AgentsModule, RuntimeModule, WritesModule],
  controllers: [OpenAiCompatController],
  providers: [OpenAiCompatService],
})
export class OpenAiCompatModule {}
