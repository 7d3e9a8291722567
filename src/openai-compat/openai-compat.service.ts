import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { AgentService } from '../agents/agent.service';
import type { Caller } from '../auth/caller';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { AgentLoop } from '../runtime/agent-loop.service';
import { AgentRuntime, PreparedTurn } from '../runtime/agent-runtime.service';
import { toLlmMessages } from '../runtime/conversation';
import { streamTurn } from '../runtime/streamed-turn';
import { ChatCompletionStreamWriter } from './chat-completion-stream.writer';
import { CompletionHead, STEP_SEPARATOR, stepText, toCompletion } from './chat-completion.mapper';
import { CompletionRequest, FUNCTION_TOOL_LABELS, parseCompletionRequest } from './chat-completion.request';
import { ChatCompletionResponse, ModelListResponse, ModelResponse, toModelResponse } from './openai-compat.dto';
import { openAiErrorOf } from './openai-errors';

/**
 * Agents as OpenAI models: the Chat Completions wire format turned into one prepareTurn call and
 * the loop's hooks turned back into a completion or a chunk stream. Nothing else happens here.
 */
@Injectable()
export class OpenAiCompatService {
  private readonly logger = new Logger(OpenAiCompatService.name);

  constructor(
    private readonly agents: AgentService,
    private readonly runtime: AgentRuntime,
    private readonly loop: AgentLoop,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async listModels(caller: Caller): Promise<ModelListResponse> {
    return { object: 'list', data: (await this.agents.listUsable(caller)).map(toModelResponse) };
  }

  async getModel(caller: Caller, id: string): Promise<ModelResponse> {
    return toModelResponse(await this.agents.getUsable(id, caller));
  }

  /**
   * One turn: the completion, or the chunk stream written to the raw response that `open` hands over
   * (only after every check, so that refusals are still plain HTTP errors).
   */
  async complete(
    caller: Caller,
    body: unknown,
    request: { id: string; signal: AbortSignal },
    open: () => ServerResponse,
  ): Promise<ChatCompletionResponse | undefined> {
    const completion = parseCompletionRequest(body);
    const prepared = await this.prepare(caller, completion);
    const head: CompletionHead = {
      id: `chatcmpl-${randomUUID()}`,
      created: Math.floor(Date.now() / 1000),
      model: completion.model,
    };
    if (!completion.stream) {
      const texts: string[] = [];
      const result = await this.loop.runTurn(
        prepared.turn,
        prepared.messages,
        {
          onStep: (step) => {
            // An answer sent back for correction (grounding retry) is replaced by the next one.
            const text = step.superseded ? '' : stepText(step);
            if (text) texts.push(text);
            return Promise.resolve();
          },
        },
        request.signal,
      );
      return toCompletion(head, texts.join(STEP_SEPARATOR), result);
    }
    const writer = new ChatCompletionStreamWriter(open(), this.config.sseKeepAliveMs, head, completion.includeUsage);
    await streamTurn(this.loop, prepared, writer, request.signal, {
      logger: this.logger,
      msg: 'streamed completion failed',
      failure: (error) => openAiErrorOf(error, request.id),
    });
    return undefined;
  }

  private prepare(caller: Caller, completion: CompletionRequest): Promise<PreparedTurn> {
    return this.runtime.prepareTurn({
      caller,
      agentName: completion.model,
      history: toLlmMessages(completion.conversation),
      instructions: completion.instructions,
      options: completion.options,
      optionNames: completion.optionNames,
      declaredTools: completion.tools ? { tools: completion.tools, labels: FUNCTION_TOOL_LABELS } : undefined,
      toolChoice: completion.toolChoice,
    });
  }
}
