import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { AcceptsStreamToken, Caller, Roles } from '../../auth/auth.decorators';
import { hijack } from '../../common/fastify-reply';
import { PaginationQueryDto } from '../../common/pagination.dto';
import {
  ChatListResponse,
  ChatMessagesResponse,
  ChatResponse,
  ChatStreamQueryDto,
  CreateChatDto,
  MessagesQueryDto,
  PostMessageDto,
  ToolResultsDto,
} from './chat.dto';
import { ChatService } from './chat.service';
import { ChatStreamService } from './chat-stream.service';

@ApiTags('chats')
@ApiBearerAuth()
@Controller('api/v1/chats')
export class ChatController {
  constructor(
    private readonly chats: ChatService,
    private readonly streams: ChatStreamService,
  ) {}

  @Post()
  @Roles('admin', 'member')
  create(@Caller() caller: Caller, @Body() dto: CreateChatDto): Promise<ChatResponse> {
    return this.chats.create(caller, dto);
  }

  @Get()
  @Roles('admin', 'member')
  list(@Caller() caller: Caller, @Query() query: PaginationQueryDto): Promise<ChatListResponse> {
    return this.chats.list(caller, query);
  }

  /** SSE: created / status_change / action_required / deleted for the caller's chats. */
  @Get('watch')
  @Roles('admin', 'member')
  @AcceptsStreamToken()
  @ApiProduces('text/event-stream')
  watch(@Caller() caller: Caller, @Res() reply: FastifyReply): void {
    this.streams.watch(caller, () => hijack(reply));
  }

  @Get(':id')
  @Roles('admin', 'member')
  get(@Caller() caller: Caller, @Param('id') id: string): Promise<ChatResponse> {
    return this.chats.view(caller, id);
  }

  @Delete(':id')
  @Roles('admin', 'member')
  @HttpCode(204)
  async delete(@Caller() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.chats.delete(caller, id);
  }

  @Get(':id/messages')
  @Roles('admin', 'member')
  messages(@Caller() caller: Caller, @Param('id') id: string, @Query() query: MessagesQueryDto): Promise<ChatMessagesResponse> {
    return this.chats.messages(caller, id, query);
  }

  @Post(':id/messages')
  @Roles('admin', 'member')
  @HttpCode(202)
  async postMessage(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: PostMessageDto): Promise<void> {
    await this.chats.postMessage(caller, id, dto.message);
  }

  @Post(':id/tool-results')
  @Roles('admin', 'member')
  @HttpCode(204)
  async toolResults(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: ToolResultsDto): Promise<void> {
    await this.chats.postToolResults(caller, id, dto.results);
  }

  @Post(':id/interrupt')
  @Roles('admin', 'member')
  @HttpCode(202)
  async interrupt(@Caller() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.chats.interrupt(caller, id);
  }

  /**
   * SSE: status, message_part, message (id: = message id), action_required, retry, error, and `end`
   * with ?until=idle. Resumes from Last-Event-ID or ?afterId.
   */
  @Get(':id/stream')
  @Roles('admin', 'member')
  @AcceptsStreamToken({ chatParam: 'id' })
  @ApiProduces('text/event-stream')
  @ApiHeader({ name: 'Last-Event-ID', required: false })
  async stream(
    @Caller() caller: Caller,
    @Param('id') id: string,
    @Query() query: ChatStreamQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.streams.streamChat(caller, id, { lastEventId, afterId: query.afterId, until: query.until }, () => hijack(reply));
  }
}
