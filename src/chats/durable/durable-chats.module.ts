import { Module } from '@nestjs/common';
import { AuthModule } from '../../auth/auth.module';
import { GovernanceModule } from '../../governance/governance.module';
import { RuntimeModule } from '../../runtime/runtime.module';
import { ToolsModule } from '../../tools/tools.module';
import { ApprovalGateway } from './approval-gateway';
import { ChatController } from './chat.controller';
import { ChatEvents } from './chat-events.service';
import { ChatStatusGauge } from './chat-status.gauge';
import { ChatRunner } from './chat-runner.service';
import { ChatStreamService } from './chat-stream.service';
import { ChatClaimsRepository } from './chat-claims.repository';
import { ChatRepository } from './chat.repository';
import { ChatReceiptsService } from './chat-receipts.service';
import { ChatService } from './chat.service';
import { ChatWorker } from './chat.worker';
import { UiChatController } from './ui-chat.controller';
import { UiChatService } from './ui-chat.service';

@Module({
  imports: [AuthModule, GovernanceModule, RuntimeModule, ToolsModule],
  controllers: [ChatController, UiChatController],
  providers: [
    ChatRepository,
    ChatClaimsRepository,
    ChatEvents,
    ChatService,
    ChatReceiptsService,
    ChatRunner,
    ChatWorker,
    ChatStreamService,
    UiChatService,
    ChatStatusGauge,
    ApprovalGateway,
  ],
  exports: [ChatWorker, ChatService, ApprovalGateway],
})
/**
 * Durable chats: persisted conversations run by a worker on any replica, with client tools and SSE
 * streams, also as AI SDK `useChat` chats (UI message streams, resumable).
 */
export class DurableChatsModule {}
