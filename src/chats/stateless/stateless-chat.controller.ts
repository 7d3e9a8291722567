import { Body, Controller, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Caller, Roles } from '../../auth/auth.decorators';
import { abortWhenClientLeaves, hijack } from '../../common/fastify-reply';
import { StatelessChatDto, StatelessChatResponse } from './stateless-chat.dto';
import { StatelessChatService } from './stateless-chat.service';

@ApiTags('agents')
@ApiBearerAuth()
@Controller('api/v1/ai/agents')
export class StatelessChatController {
  constructor(private readonly chats: StatelessChatService) {}

  /** Runs one agent turn over the given conversation; JSON, or the AI SDK UI message stream with `stream: true`. */
  @Post(':agentName/chat')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiProduces('application/json', 'text/event-stream')
  chat(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Body() dto: StatelessChatDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<StatelessChatResponse | void> {
    // Listening before the service awaits anything: a client that leaves during the checks still cancels the turn.
    return this.chats.chat(caller, agentName, dto, abortWhenClientLeaves(reply), () => hijack(reply));
  }
}
