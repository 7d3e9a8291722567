import { Module } from '@nestjs/common';
import { AgentsModule } from '../../agents/agents.module';
import { AuthModule } from '../../auth/auth.module';
import { LlmModule } from '../../llm/llm.module';
import { RuntimeModule } from '../../runtime/runtime.module';
import { ChatController } from './chat.controller';
import { ChatEvents } from './chat-events.service';
import { ChatMetrics } from './chat.metrics';
import { ChatRunner } from './chat-runner.service';
import { ChatStreamService } from './chat-stream.service';
import { ChatRepository } from './chat.repository';
import { ChatService } from './chat.service';
import { ChatWorker } from './chat.worker';

@Module({
  imports: [AgentsModule, AuthModule, RuntimeModule, LlmModule],
  controllers: [ChatController],
  providers: [ChatRepository, ChatEvents, ChatService, ChatRunner, ChatWorker, ChatStreamService, ChatMetrics],
  exports: [ChatWorker],
})
/** Durable chats: persisted conversations run by a worker on any replica, with client tools and SSE streams. */
export class DurableChatsModule {}
