import { Body, Controller, Headers, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiProduces, ApiTags } from '@nestjs/swagger';
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

  /**
   * Runs one agent turn over the given conversation: JSON, or the AI SDK UI message stream with
   * `stream: true`, or when `stream` is absent and the caller is an AI SDK client (`trigger` in the body, or
   * `Accept: text/event-stream`).
   */
  @Post(':agentName/chat')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiProduces('application/json', 'text/event-stream')
  @ApiOkResponse({ type: StatelessChatResponse, description: 'The answer (JSON), or the UI message stream when streaming' })
  async chat(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Body() dto: StatelessChatDto,
    @Headers('accept') accept: string | undefined,
    // Not `passthrough`: Nest would then send the handler's result, also after a hijacked stream,
    // and Fastify warns "Reply was already sent". The handler sends the JSON answer itself.
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // Listening before the service awaits anything: a client that leaves during the checks still cancels the turn.
    const acceptsEventStream = accept?.toLowerCase().includes('text/event-stream') ?? false;
    const signal = abortWhenClientLeaves(reply);
    const response = await this.chats.chat(caller, agentName, dto, { acceptsEventStream, signal }, () => hijack(reply));
    if (response) void reply.status(200).send(response);
  }
}
