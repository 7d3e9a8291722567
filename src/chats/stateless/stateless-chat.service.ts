import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../../auth/caller';
import { DomainError } from '../../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../../config/app-config';
import { AgentLoop, TurnResult } from '../../runtime/agent-loop.service';
import { AgentRuntime, PreparedTurn } from '../../runtime/agent-runtime.service';
import { StatelessChatDto, StatelessChatResponse } from './stateless-chat.dto';
import { toLlmMessages } from '../../runtime/conversation';
import { streamTurn } from '../../runtime/streamed-turn';
import { fromClientMessages } from '../ui-messages';
import { UiMessageStreamWriter } from '../ui-message-stream.writer';

/** The stateless chat endpoint: the conversation lives in the request; the loop is the shared one. */
@Injectable()
export class StatelessChatService {
  private readonly logger = new Logger(StatelessChatService.name);

  constructor(
    private readonly runtime: AgentRuntime,
    private readonly loop: AgentLoop,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * One turn: the JSON answer, or the UI message stream written to the raw response that `open`
   * hands over (only after the checks, so they still answer as JSON errors). It streams with
   * `stream: true`, and when `stream` is absent for AI SDK clients: a `useChat` body (it has
   * `trigger`) or `Accept: text/event-stream`.
   */
  async chat(
    caller: Caller,
    agentName: string,
    dto: StatelessChatDto,
    request: { acceptsEventStream: boolean; signal: AbortSignal },
    open: () => ServerResponse,
  ): Promise<StatelessChatResponse | undefined> {
    const { signal } = request;
    const prepared = await this.prepare(caller, agentName, dto);
    const streaming = dto.stream ?? (dto.trigger !== undefined || request.acceptsEventStream);
    if (!streaming) return this.complete(prepared, signal);
    await this.stream(prepared, open(), signal);
    return undefined;
  }

  /** Checks in the contract's order: body (400), then the runtime's (agent 404, access 403, LLM endpoint 503). */
  private prepare(caller: Caller, agentName: string, dto: StatelessChatDto): Promise<PreparedTurn> {
    const history = toLlmMessages(fromClientMessages(dto.messages));
    return this.runtime.prepareTurn({ caller, agentName, history, options: dto.options, context: dto.context });
  }

  private async complete(prepared: PreparedTurn, signal: AbortSignal): Promise<StatelessChatResponse> {
    return toResponse(await this.loop.runTurn(prepared.turn, prepared.messages, {}, signal));
  }

  /** Streams the turn; failures after the first byte become an `error` part, never a silent stall. */
  private async stream(prepared: PreparedTurn, raw: ServerResponse, signal: AbortSignal): Promise<void> {
    await streamTurn(this.loop, prepared, new UiMessageStreamWriter(raw, this.config.sseKeepAliveMs), signal, {
      logger: this.logger,
      msg: 'streamed chat failed',
      failure: (error) => (error instanceof DomainError ? error.message : 'The agent failed unexpectedly'),
    });
  }
}

function toResponse(result: TurnResult): StatelessChatResponse {
  return {
    content: result.content,
    model: result.model,
    finishReason: result.finishReason,
    toolCalls: result.toolCalls,
    usage: result.usage,
    ...(result.grounding ? { grounding: result.grounding } : {}),
  };
}
