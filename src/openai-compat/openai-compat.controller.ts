import { Body, Controller, Get, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Caller, Roles } from '../auth/auth.decorators';
import { abortWhenClientLeaves, hijack } from '../common/fastify-reply';
import {
  ChatCompletionRequestDoc,
  ChatCompletionResponse,
  ModelListResponse,
  ModelResponse,
  OpenAiErrorResponse,
} from './openai-compat.dto';
import { OpenAiCompatService } from './openai-compat.service';

const ERROR_RESPONSES = [
  { status: 400, description: 'invalid_request_error (an unsupported parameter too: n > 1, logprobs, audio, ...)' },
  { status: 401, description: 'invalid_api_key' },
  { status: 403, description: 'permission_error: inactive agent, or the key is not in its access' },
  { status: 404, description: 'model_not_found' },
  { status: 503, description: 'server_error llm_not_configured: no model endpoint is configured' },
];

/** Errors in OpenAI's shape, for every operation under /v1. */
function ApiOpenAiErrors(): MethodDecorator {
  return (target, key, descriptor) => {
    for (const { status, description } of ERROR_RESPONSES) {
      ApiResponse({ status, description, type: OpenAiErrorResponse })(target, key, descriptor);
    }
  };
}

@ApiTags('openai-compatible')
@ApiBearerAuth()
@Controller('v1')
export class OpenAiCompatController {
  constructor(private readonly openai: OpenAiCompatService) {}

  @Get('models')
  @Roles('admin', 'member')
  @ApiOperation({ summary: 'The agents this key may run, as OpenAI models' })
  @ApiOkResponse({ type: ModelListResponse })
  @ApiOpenAiErrors()
  models(@Caller() caller: Caller): Promise<ModelListResponse> {
    return this.openai.listModels(caller);
  }

  @Get('models/:id')
  @Roles('admin', 'member')
  @ApiOperation({ summary: 'One agent as an OpenAI model (404 model_not_found when the key may not run it)' })
  @ApiOkResponse({ type: ModelResponse })
  @ApiOpenAiErrors()
  model(@Caller() caller: Caller, @Param('id') id: string): Promise<ModelResponse> {
    return this.openai.getModel(caller, id);
  }

  /**
   * Runs one turn of the agent named by `model`. The body is read by the service (OpenAI clients send
   * fields this server ignores, which the global DTO pipe would refuse).
   */
  @Post('chat/completions')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiOperation({ summary: 'OpenAI Chat Completions against an agent: its instructions, tools and limits apply' })
  @ApiBody({ type: ChatCompletionRequestDoc })
  @ApiProduces('application/json', 'text/event-stream')
  @ApiOkResponse({
    type: ChatCompletionResponse,
    description: 'The completion, or chat.completion.chunk events with stream: true',
  })
  @ApiOpenAiErrors()
  async completions(
    @Caller() caller: Caller,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    // Not `passthrough`: the handler sends the JSON answer itself, and nothing after a hijacked stream.
    @Res() reply: FastifyReply,
  ): Promise<void> {
    // Listening before the service awaits anything: a client that leaves during the checks still cancels the turn.
    const signal = abortWhenClientLeaves(reply);
    const response = await this.openai.complete(caller, body, { id: String(request.id), signal }, () => hijack(reply));
    if (response) void reply.status(200).send(response);
  }
}
