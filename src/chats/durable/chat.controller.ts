import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import { ApiExtraModels, ApiHeader, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { AcceptsStreamToken, Roles } from '../../auth/auth.decorators';
import { Caller } from '../../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../../common/api-route.decorator';
import { ADMISSION_ERRORS } from '../../runtime/agent-runtime.service';
import { ClientSignal, hijack } from '../../common/fastify-reply';
import { PaginationQueryDto } from '../../common/pagination.dto';
import {
  CHAT_PART_MODELS,
  ChatListResponse,
  ChatMessagesResponse,
  ChatResponse,
  ChatStreamQueryDto,
  CreateChatDto,
  MessagesQueryDto,
  PostMessageDto,
  ReceiptReplayResponse,
  ReplayReceiptDto,
  ToolResultsDto,
} from './chat.dto';
import { ChatReceiptsService } from './chat-receipts.service';
import { ChatService } from './chat.service';
import { ChatStreamService } from './chat-stream.service';

/** The events of GET /chats/:id/stream. */
const CHAT_STREAM_EVENTS =
  'Server-Sent Events, each `data:` one JSON object: `message` (a persisted message as in GET /messages; its SSE ' +
  '`id:` is the message id, for Last-Event-ID), `message_part` `{ delta }` (text as the model writes it), `status` ' +
  '`{ status, lastError }` (`{ status: "deleted" }` ends the stream), `action_required` `{ pendingToolCalls }` ' +
  '(client tools) or `{ requiredAction }` (write proposals waiting for approval), ' +
  '`retry` `{ attempt, delayMs, error }` (the model endpoint failed; trying again), `error` `{ code, message }`, and ' +
  'with `?until=idle` a last `end` `{ status }` once the chat is waiting or in error. ' +
  'Comments (`: keep-alive`) keep idle streams open.';

/** The events of GET /chats/watch. */
const WATCH_EVENTS =
  "Server-Sent Events about the caller's chats, each `data:` one JSON object: `ready` `{ subject }` (once, first), " +
  '`created` `{ chatId, status }`, `status_change` `{ chatId, status }`, `action_required` `{ chatId }`, `deleted` ' +
  '`{ chatId }`. Comments (`: keep-alive`) keep idle streams open.';

@ApiTags('chats')
@ApiExtraModels(...CHAT_PART_MODELS)
@Controller('api/v1/chats')
export class ChatController {
  constructor(
    private readonly chats: ChatService,
    private readonly streams: ChatStreamService,
    private readonly receipts: ChatReceiptsService,
  ) {}

  @Post()
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Start a durable chat with its first message; a worker runs it',
    status: 201,
    type: ChatResponse,
    errors: [...BODY_ERRORS, ...ADMISSION_ERRORS, 'invalid_dynamic_tools', 'too_many_chats'],
  })
  create(@Caller() caller: Caller, @Body() dto: CreateChatDto): Promise<ChatResponse> {
    return this.chats.create(caller, dto);
  }

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({ summary: "List the caller's chats, newest first", type: ChatListResponse, errors: ['validation_failed'] })
  list(@Caller() caller: Caller, @Query() query: PaginationQueryDto): Promise<ChatListResponse> {
    return this.chats.list(caller, query);
  }

  /** SSE: created / status_change / action_required / deleted for the caller's chats. */
  @Get('watch')
  @Roles('admin', 'member')
  @AcceptsStreamToken()
  @ApiRoute({ summary: "Watch the caller's chats (SSE)", events: WATCH_EVENTS, errors: ['too_many_streams'] })
  watch(@Caller() caller: Caller, @Res() reply: FastifyReply): void {
    this.streams.watch(caller, () => hijack(reply));
  }

  @Get(':id')
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'Read a chat: its status and any pending tool calls', type: ChatResponse, errors: ['chat_not_found'] })
  get(@Caller() caller: Caller, @Param('id') id: string): Promise<ChatResponse> {
    return this.chats.view(caller, id);
  }

  @Delete(':id')
  @Roles('admin', 'member')
  @HttpCode(204)
  @ApiRoute({ summary: 'Delete a chat and its messages', status: 204, errors: ['chat_not_found'] })
  async delete(@Caller() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.chats.delete(caller, id);
  }

  @Post(':id/receipts/replay')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiRoute({
    summary: 'Run a stored data call again under your access as it is now, and see which referenced figures changed',
    description:
      "Compares each figure an answer of the chat filled in from that call's rows (its receipts) with the same cell " +
      'now. A call whose result was produced under other access than yours (another key, or this key before its ' +
      'policies changed), that failed, or that returned no rows is 404 `receipt_not_found`.',
    type: ReceiptReplayResponse,
    errors: [...BODY_ERRORS, 'chat_not_found', 'receipt_not_found'],
  })
  replayReceipt(
    @Caller() caller: Caller,
    @Param('id') id: string,
    @Body() dto: ReplayReceiptDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<ReceiptReplayResponse> {
    return this.receipts.replay(caller, id, dto.toolCallId, signal);
  }

  @Get(':id/messages')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "Read a chat's messages, oldest first, a page at a time",
    description:
      'A tool result produced under other access than the caller has (another key of the same owner, or this key ' +
      'before its policies changed) comes withheld: `{ "type": "tool-result", "withheld": true, "reason": ' +
      '"access_changed", ... }` without its output.',
    type: ChatMessagesResponse,
    errors: ['validation_failed', 'chat_not_found'],
  })
  messages(@Caller() caller: Caller, @Param('id') id: string, @Query() query: MessagesQueryDto): Promise<ChatMessagesResponse> {
    return this.chats.messages(caller, id, query);
  }

  @Post(':id/messages')
  @Roles('admin', 'member')
  @HttpCode(202)
  @ApiRoute({
    summary: 'Send the next user message to a waiting chat',
    status: 202,
    errors: [...BODY_ERRORS, ...ADMISSION_ERRORS, 'chat_not_found', 'chat_busy', 'too_many_chats'],
  })
  async postMessage(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: PostMessageDto): Promise<void> {
    await this.chats.postMessage(caller, id, dto.message);
  }

  @Post(':id/tool-results')
  @Roles('admin', 'member')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Post the results of all pending client tool calls at once',
    status: 204,
    errors: [
      ...BODY_ERRORS,
      ...ADMISSION_ERRORS,
      'invalid_tool_results',
      'chat_not_found',
      'chat_not_waiting_for_tools',
      'too_many_chats',
    ],
  })
  async toolResults(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: ToolResultsDto): Promise<void> {
    await this.chats.postToolResults(caller, id, dto.results);
  }

  @Post(':id/interrupt')
  @Roles('admin', 'member')
  @HttpCode(202)
  @ApiRoute({ summary: 'Stop the running turn of a chat', status: 202, errors: ['chat_not_found'] })
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
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description: 'The last message id received: resume after it (wins over ?afterId)',
    schema: { type: 'string', pattern: '^\\d{1,18}$' },
  })
  @ApiRoute({
    summary: "Follow a chat's messages and status (SSE), resumable",
    events: CHAT_STREAM_EVENTS,
    errors: ['validation_failed', 'chat_not_found', 'too_many_streams'],
  })
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
