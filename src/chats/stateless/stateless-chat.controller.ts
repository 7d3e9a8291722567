import { Body, Controller, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Caller, Roles } from '../../auth/auth.decorators';
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
  async chat(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Body() dto: StatelessChatDto,
    // Not `passthrough`: Nest would then send the handler's result, also after a hijacked stream,
    // and Fastify warns "Reply was already sent". The handler sends both kinds of answer itself.
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // Listening before the first await: a client that leaves during the checks still cancels the turn.
    const signal = abortWhenClientLeaves(reply);
    const prepared = await this.chats.prepare(caller, agentName, dto);
    if (!dto.stream) {
      const response: StatelessChatResponse = await this.chats.complete(prepared, signal);
      void reply.status(200).send(response);
      return;
    }
    reply.hijack();
    await this.chats.stream(prepared, reply.raw, signal);
  }
}

/** Aborts the turn (model call and tools) when the client disconnects before the response is done. */
function abortWhenClientLeaves(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  if (reply.raw.destroyed) controller.abort();
  return controller.signal;
}
