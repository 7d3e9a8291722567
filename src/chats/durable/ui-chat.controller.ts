import { Body, Controller, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiExtraModels, ApiParam, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { AcceptsStreamToken, Roles } from '../../auth/auth.decorators';
import { Caller } from '../../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../../common/api-route.decorator';
import { ADMISSION_ERRORS } from '../../runtime/agent-runtime.service';
import { ClientSignal, hijack } from '../../common/fastify-reply';
import { ReceiptReplayResponse, ReplayReceiptDto } from './chat.dto';
import { UI_PART_MODELS, UiChatMessagesResponse, UiChatRequestDto } from './ui-chat.dto';
import { UiChatService } from './ui-chat.service';

/** The stream of a turn, as both routes send it. */
const UI_TURN_STREAM_EVENTS =
  'The Vercel AI SDK UI message stream, protocol v1 (header `x-vercel-ai-ui-message-stream: v1`), which `useChat` ' +
  'reads: the turn as the worker of any replica runs it. Each `data:` is one JSON part, by `type`: `start` ' +
  '`{ messageId }` (the id of the answer, the same in GET .../messages); per model step `start-step`, `text-start`, ' +
  '`text-delta`, `text-end`, `tool-input-start`, then `tool-input-available` `{ toolCallId, toolName, input }` for a ' +
  'client tool call the client must answer, or `tool-input-delta` and `tool-output-available` / `tool-output-error` ' +
  'for a call with its result, or `tool-input-delta` and `tool-approval-request` `{ approvalId, toolCallId, ' +
  'approvalDescriptor: { objectName, operation, changes, expiresAt }, signature }` for a write proposal waiting for ' +
  'approval (`signature` is its token), `finish-step`; `reset-step` takes back text of a model call that was given up (a ' +
  'retry); then `finish` `{ finishReason, messageMetadata: { model, finishReason, usage } }` once the chat waits ' +
  '(for a message, or for client tool results), or `error` `{ errorText }`; last `data: [DONE]`. Comments ' +
  '(`: keep-alive`) keep it open.';

const CLIENT_CHAT_ID = {
  name: 'id',
  description: "The client's chat id (its AI SDK `Chat` id): 1 to 128 of A-Z, a-z, 0-9, _ and -",
  schema: { type: 'string' as const, pattern: '^[A-Za-z0-9_-]{1,128}$' },
};

/**
 * Durable chats for AI SDK `useChat`: a stock `new DefaultChatTransport({ api: '/api/v1/ai/agents/<agent>/chats' })`
 * posts messages here, resumes with GET .../chats/:id/stream, and a page restores a chat from GET .../messages.
 */
@ApiTags('chats')
@ApiExtraModels(...UI_PART_MODELS)
@Controller('api/v1/ai/agents')
export class UiChatController {
  constructor(private readonly chats: UiChatService) {}

  @Post(':agentName/chats')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiRoute({
    summary: 'Send a message, or the outputs of client tool calls, to a durable chat (useChat); streams the turn',
    description:
      'The body is what `DefaultChatTransport` posts, plus `dynamicTools` and `context` from its `body`. A new `id` ' +
      'starts a chat with the agent; the last message is the next user message, or the assistant message whose ' +
      'client tool parts now have outputs (the results of the pending calls), or whose write proposals carry approval ' +
      "responses (`addToolApprovalResponse`; the token travels as the approval request's `signature`). " +
      '`regenerate-message` is refused.',
    responseDescription: 'The UI message stream of the turn',
    events: UI_TURN_STREAM_EVENTS,
    errors: [
      ...BODY_ERRORS,
      ...ADMISSION_ERRORS,
      'invalid_message',
      'invalid_tool_results',
      'invalid_dynamic_tools',
      'unsupported_trigger',
      'chat_not_found',
      'chat_busy',
      'chat_not_waiting_for_tools',
      'chat_agent_mismatch',
      'approval_invalid',
      'too_many_chats',
      'too_many_streams',
    ],
  })
  async send(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Body() dto: UiChatRequestDto,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.chats.send(caller, agentName, dto, () => hijack(reply));
  }

  @Get(':agentName/chats/:id/stream')
  @Roles('admin', 'member')
  @AcceptsStreamToken({ chatParam: 'id', chatParamIs: 'clientId' })
  @ApiParam(CLIENT_CHAT_ID)
  @ApiRoute({
    summary: "Resume the running turn's UI message stream from its start (useChat resume)",
    description:
      'What `useChat({ resume: true })` calls after a reload: the running turn from its start (what was produced ' +
      'so far, then live), each text once. **204** with no body when no turn runs (the chat waits, needs client ' +
      'tool results, or failed).',
    responseDescription: 'The UI message stream of the running turn (or 204 when none runs)',
    events: UI_TURN_STREAM_EVENTS,
    errors: ['validation_failed', 'chat_not_found', 'too_many_streams'],
  })
  async stream(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Param('id') id: string,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const streaming = await this.chats.resume(caller, agentName, id, () => hijack(reply));
    if (!streaming) void reply.status(204).send();
  }

  @Post(':agentName/chats/:id/receipts/replay')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiParam(CLIENT_CHAT_ID)
  @ApiRoute({
    summary: 'Run a stored data call of a durable chat (useChat) again and see which referenced figures changed',
    description:
      "POST /api/v1/chats/{id}/receipts/replay for the chat named by the client's id: each figure an answer filled in " +
      "from that call's rows (its receipts) compared with the same cell now, under the caller's access as it is now. A " +
      'call whose result was produced under other access, that failed, or that returned no rows is 404 ' +
      '`receipt_not_found`.',
    type: ReceiptReplayResponse,
    errors: [...BODY_ERRORS, 'chat_not_found', 'receipt_not_found'],
  })
  replayReceipt(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Param('id') id: string,
    @Body() dto: ReplayReceiptDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<ReceiptReplayResponse> {
    return this.chats.replayReceipt(caller, agentName, id, dto.toolCallId, signal);
  }

  @Get(':agentName/chats/:id/messages')
  @Roles('admin', 'member')
  @ApiParam(CLIENT_CHAT_ID)
  @ApiRoute({
    summary: 'Read a durable chat as AI SDK UI messages, to restore it in useChat',
    type: UiChatMessagesResponse,
    errors: ['validation_failed', 'chat_not_found'],
  })
  messages(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Param('id') id: string,
  ): Promise<UiChatMessagesResponse> {
    return this.chats.messages(caller, agentName, id);
  }
}
