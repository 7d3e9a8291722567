import { Module } from '@nestjs/common';
import { RuntimeModule } from '../../runtime/runtime.module';
import { StatelessChatController } from './stateless-chat.controller';
import { StatelessChatService } from './stateless-chat.service';

/** `POST /api/v1/ai/agents/:agentName/chat`: the conversation travels in the request; JSON or a UI message stream. */
@Module({
  imports: [RuntimeModule],
  controllers: [StatelessChatController],
  providers: [StatelessChatService],
})
export class StatelessChatModule {}
