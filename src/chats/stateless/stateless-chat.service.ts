import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../../auth/auth.decorators';
import { DomainError } from '../../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../../config/app-config';
import { LlmMessage } from '../../llm/llm.types';
import { AgentLoop, TurnResult } from '../../runtime/agent-loop.service';
import { AgentRuntime, PreparedTurn } from '../../runtime/agent-runtime.service';
import { StatelessChatDto, StatelessChatResponse } from './stateless-chat.dto';
import { UiMessageStreamWriter } from '../ui-message-stream.writer';

const MAX_CONTENT_LENGTH = 100_000;

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
   * One turn: the JSON answer, or with `stream: true` the UI message stream written to the raw
   * response that `open` hands over (only after the checks, so they still answer as JSON errors).
   */
  async chat(
    caller: Caller,
    agentName: string,
    dto: StatelessChatDto,
    signal: AbortSignal,
    open: () => ServerResponse,
  ): Promise<StatelessChatResponse | undefined> {
    const prepared = await this.prepare(caller, agentName, dto);
    if (!dto.stream) return this.complete(prepared, signal);
    await this.stream(prepared, open(), signal);
    return undefined;
  }

  /** Checks in the contract's order: body (400), then the runtime's (agent 404, access 403, LLM endpoint 503). */
  private prepare(caller: Caller, agentName: string, dto: StatelessChatDto): Promise<PreparedTurn> {
    const history = parseMessages(dto.messages);
    return this.runtime.prepareTurn({ caller, agentName, history, options: dto.options, context: dto.context });
  }

  private async complete(prepared: PreparedTurn, signal: AbortSignal): Promise<StatelessChatResponse> {
    return toResponse(await this.loop.runTurn(prepared.turn, prepared.messages, {}, signal));
  }

  /** Streams the turn; failures after the first byte become an `error` part, never a silent stall. */
  private async stream(prepared: PreparedTurn, raw: ServerResponse, signal: AbortSignal): Promise<void> {
    const writer = new UiMessageStreamWriter(raw, this.config.sseKeepAliveMs);
    try {
      writer.finish(await this.loop.runTurn(prepared.turn, prepared.messages, writer.hooks(), signal));
    } catch (error) {
      if (!(error instanceof DomainError)) this.logger.error({ msg: 'streamed chat failed', err: error });
      writer.fail(error instanceof DomainError ? error.message : 'The agent failed unexpectedly');
    }
  }
}

function toResponse(result: TurnResult): StatelessChatResponse {
  return {
    content: result.content,
    model: result.model,
    finishReason: result.finishReason,
    toolCalls: result.toolCalls,
    usage: result.usage,
  };
}

/**
 * Conversation history from the client: only user and assistant turns with string content (a
 * client may not inject system or tool messages). AI SDK UI messages (`parts` of type text) are
 * accepted too.
 */
function parseMessages(input: unknown[]): LlmMessage[] {
  return input.map((message, index) => {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      throw new DomainError('invalid_message', `messages[${index}] must be an object { role, content }`);
    }
    const { role, content, parts } = message as { role?: unknown; content?: unknown; parts?: unknown };
    if (role !== 'user' && role !== 'assistant') {
      throw new DomainError('invalid_message', `messages[${index}].role must be "user" or "assistant"`);
    }
    let text: string;
    if (content !== undefined) {
      if (typeof content !== 'string') throw new DomainError('invalid_message', `messages[${index}].content must be a string`);
      text = content;
    } else if (Array.isArray(parts)) {
      text = parts
        .filter(
          (p): p is { type: 'text'; text: string } =>
            typeof p === 'object' &&
            p !== null &&
            (p as { type?: unknown }).type === 'text' &&
            typeof (p as { text?: unknown }).text === 'string',
        )
        .map((p) => p.text)
        .join('');
    } else {
      throw new DomainError('invalid_message', `messages[${index}].content must be a string`);
    }
    if (text.length > MAX_CONTENT_LENGTH) {
      throw new DomainError('invalid_message', `messages[${index}].content is longer than ${MAX_CONTENT_LENGTH} characters`);
    }
    return { role, content: text };
  });
}
