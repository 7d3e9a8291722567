import { Body, Controller, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiParam,
  ApiProduces,
  ApiTags,
} from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Caller, Roles } from '../../auth/auth.decorators';
import { hijack } from '../../common/fastify-reply';
import { UiChatMessagesResponse, UiChatRequestDto } from './ui-chat.dto';
import { UiChatService } from './ui-chat.service';

const UI_STREAM = 'The Vercel AI SDK UI message stream (v1, SSE) of the turn, ending with finish, or error, then [DONE]';
const CLIENT_ID = { name: 'id', description: "The client's chat id (1-128 of A-Z, a-z, 0-9, _ and -)" };

/** Durable chats for AI SDK `useChat`: `new DefaultChatTransport({ api: '/api/v1/ai/agents/<agent>/chats' })`. */
@ApiTags('chats')
@ApiBearerAuth()
@Controller('api/v1/ai/agents')
export class UiChatController {
  constructor(private readonly chats: UiChatService) {}

  @Post(':agentName/chats')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Send a message or client tool outputs to a durable chat (useChat transport); streams the turn',
  })
  @ApiProduces('text/event-stream')
  @ApiOkResponse({ description: UI_STREAM })
  async send(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Body() dto: UiChatRequestDto,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.chats.send(caller, agentName, dto, () => hijack(reply));
  }

  // Stream tokens: once `?token=` is accepted on SSE routes, this route takes it too (browsers reconnecting without headers).
  @Get(':agentName/chats/:id/stream')
  @Roles('admin', 'member')
  @ApiOperation({ summary: "Resume the running turn's UI message stream from its start (useChat resume); 204 when none runs" })
  @ApiParam(CLIENT_ID)
  @ApiProduces('text/event-stream')
  @ApiOkResponse({ description: UI_STREAM })
  @ApiNoContentResponse({ description: 'No turn is running (the chat waits, needs client tool results, or failed)' })
  async stream(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Param('id') id: string,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const streaming = await this.chats.resume(caller, agentName, id, () => hijack(reply));
    if (!streaming) void reply.status(204).send();
  }

  @Get(':agentName/chats/:id/messages')
  @Roles('admin', 'member')
  @ApiOperation({ summary: 'The conversation of a durable chat as AI SDK UI messages' })
  @ApiParam(CLIENT_ID)
  @ApiOkResponse({ type: UiChatMessagesResponse })
  messages(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Param('id') id: string,
  ): Promise<UiChatMessagesResponse> {
    return this.chats.messages(caller, agentName, id);
  }
}
