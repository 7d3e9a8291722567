import { Body, Controller, Headers, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Roles } from '../../auth/auth.decorators';
import { Caller } from '../../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../../common/api-route.decorator';
import { ADMISSION_ERRORS } from '../../runtime/agent-runtime.service';
import { abortWhenClientLeaves, hijack } from '../../common/fastify-reply';
import { StatelessChatDto, StatelessChatResponse } from './stateless-chat.dto';
import { StatelessChatService } from './stateless-chat.service';

/** The stream of `stream: true`, and of AI SDK clients when `stream` is absent. */
const UI_MESSAGE_STREAM_EVENTS =
  'With `stream: true`, or for AI SDK clients (`trigger` in the body, or `Accept: text/event-stream`) unless `stream: false`: the Vercel AI SDK UI message stream, protocol v1 (header `x-vercel-ai-ui-message-stream: v1`), ' +
  'which `useChat` reads. Each `data:` is one JSON part, by `type`: `start` `{ messageId }`; per model step ' +
  '`start-step`, `text-start` `{ id }`, `text-delta` `{ id, delta }`, `text-end` `{ id }`, `tool-input-start` ' +
  '`{ toolCallId, toolName }`, `tool-input-available` `{ toolCallId, toolName, input }`, `tool-output-available` ' +
  '`{ toolCallId, output }` or `tool-output-error` `{ toolCallId, errorText }`, `finish-step`; then `finish` ' +
  '`{ finishReason, messageMetadata: { finishReason, model, usage } }` or `error` `{ errorText }`; last `data: [DONE]`.';

@ApiTags('agents')
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
  @ApiRoute({
    summary: 'Chat with an agent: one turn over the given history (JSON, or a UI message stream)',
    type: StatelessChatResponse,
    responseDescription: 'The answer (JSON), or the UI message stream (`stream: true`, or an AI SDK client)',
    events: UI_MESSAGE_STREAM_EVENTS,
    errors: [
      ...BODY_ERRORS,
      ...ADMISSION_ERRORS,
      'invalid_message',
      'invalid_option',
      'llm_rate_limited',
      'llm_timeout',
      'llm_auth_failed',
      'llm_bad_request',
      'llm_context_length',
      'context_too_large',
      'llm_unavailable',
      'llm_invalid_response',
      'agent_timeout',
      'turn_aborted',
    ],
  })
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
