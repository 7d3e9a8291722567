import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Caller } from '../auth/auth.decorators';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { LlmService } from '../llm/llm.service';
import { LlmMessage } from '../llm/llm.types';
import { AgentLoop, AgentTurn, TurnResult } from './agent-loop.service';
import { AgentChatDto, AgentChatResponse } from './agent-chat.dto';
import { AgentRuntime, ChatOptions } from './agent-runtime.service';
import { AgentService } from './agent.service';
import { UiMessageStreamWriter } from './ui-message-stream';

const MAX_CONTENT_LENGTH = 100_000;

/** A validated request, ready to run. Built before any byte is streamed, so every 4xx is a plain JSON error. */
export interface PreparedChat {
  turn: AgentTurn;
  messages: LlmMessage[];
}

/** The stateless chat endpoint: the conversation lives in the request; the loop is the shared one. */
@Injectable()
export class AgentChatService {
  private readonly logger = new Logger(AgentChatService.name);

  constructor(
    private readonly agents: AgentService,
    private readonly runtime: AgentRuntime,
    private readonly loop: AgentLoop,
    private readonly llm: LlmService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Checks in the contract's order: body (400), agent (404), access (403), LLM endpoint (503). */
  async prepare(caller: Caller, agentName: string, dto: AgentChatDto): Promise<PreparedChat> {
    const history = parseMessages(dto.messages);
    const options = parseOptions(dto.options);
    const agent = await this.agents.loadForRun(agentName, caller);
    if (options.maxTokens !== undefined && agent.model.maxTokens !== undefined && options.maxTokens > agent.model.maxTokens) {
      throw new DomainError('invalid_option', `options.maxTokens may not exceed the agent's maxTokens (${agent.model.maxTokens})`);
    }
    this.llm.assertConfigured();
    const system = await this.runtime.systemMessage(agent, dto.context);
    return { turn: this.runtime.turn(agent, caller, options), messages: [system, ...history] };
  }

  async complete(chat: PreparedChat, signal: AbortSignal): Promise<AgentChatResponse> {
    return toResponse(await this.loop.runTurn(chat.turn, chat.messages, {}, signal));
  }

  /** Streams the turn; failures after the first byte become an `error` part, never a silent stall. */
  async stream(chat: PreparedChat, raw: ServerResponse, signal: AbortSignal): Promise<void> {
    const writer = new UiMessageStreamWriter(raw, this.config.sseKeepAliveMs);
    try {
      writer.finish(await this.loop.runTurn(chat.turn, chat.messages, writer.hooks(), signal));
    } catch (error) {
      if (!(error instanceof DomainError)) this.logger.error({ msg: 'streamed chat failed', err: String(error) });
      writer.fail(error instanceof DomainError ? error.message : 'The agent failed unexpectedly');
    }
  }
}

function toResponse(result: TurnResult): AgentChatResponse {
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
        .filter((p): p is { type: 'text'; text: string } => typeof p === 'object' && p !== null && (p as { type?: unknown }).type === 'text' && typeof (p as { text?: unknown }).text === 'string')
        .map((p) => p.text)
        .join('');
    } else {
      throw new DomainError('invalid_message', `messages[${index}].content must be a string`);
    }
    if (text.length > MAX_CONTENT_LENGTH) throw new DomainError('invalid_message', `messages[${index}].content is longer than ${MAX_CONTENT_LENGTH} characters`);
    return { role, content: text };
  });
}

/** Picks and checks the three options a caller may set; every other key is dropped, never forwarded. */
export function parseOptions(input: Record<string, unknown> | undefined): ChatOptions {
  const options: ChatOptions = {};
  if (!input) return options;
  const { temperature, maxTokens, stop } = input;
  if (temperature !== undefined) {
    if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0 || temperature > 2) {
      throw new DomainError('invalid_option', 'options.temperature must be a number from 0 to 2');
    }
    options.temperature = temperature;
  }
  if (maxTokens !== undefined) {
    if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) {
      throw new DomainError('invalid_option', 'options.maxTokens must be a positive integer');
    }
    options.maxTokens = maxTokens;
  }
  if (stop !== undefined) {
    const valid =
      (typeof stop === 'string' && stop.length > 0 && stop.length <= 200) ||
      (Array.isArray(stop) && stop.length >= 1 && stop.length <= 4 && stop.every((s) => typeof s === 'string' && s.length > 0 && s.length <= 200));
    if (!valid) throw new DomainError('invalid_option', 'options.stop must be a string or an array of up to 4 strings');
    options.stop = stop as string | string[];
  }
  return options;
}
