import { Body, Controller, Get, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { abortWhenClientLeaves, hijack } from '../common/fastify-reply';
import type { ModelListResponse, ModelResponse } from './openai-compat.dto';
import { OpenAiCompatService } from './openai-compat.service';

/**
 * OpenAI's Models and Chat Completions API over the agents. Its contract is OpenAI's (request and
 * response shapes, `{ error: { ... } }` errors), described by OpenAI and the README, not by this
 * app's OpenAPI document of /api.
 */
@ApiExcludeController()
@Controller('v1')
export class OpenAiCompatController {
  constructor(private readonly openai: OpenAiCompatService) {}

  @Get('models')
  @Roles('admin', 'member')
  models(@Caller() caller: Caller): Promise<ModelListResponse> {
    return this.openai.listModels(caller);
  }

  @Get('models/:id')
  @Roles('admin', 'member')
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
