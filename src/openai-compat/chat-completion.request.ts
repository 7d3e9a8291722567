import { DomainError } from '../common/domain-error';
import type { ErrorCode } from '../common/error-codes';
import { isPlainObject } from '../common/plain-object';
import type { TurnToolChoice } from '../runtime/agent-runtime.service';
import type { ChatOptionNames } from '../runtime/chat-options.dto';
import type { ClientToolLabels } from '../runtime/client-tools';
import {
  isToolCallId,
  MAX_CONVERSATION_MESSAGES,
  MAX_MESSAGE_LENGTH,
  MAX_TOOL_CALL_ID_LENGTH,
  messageLength,
  type ConversationMessage,
  type ConversationPart,
} from '../runtime/conversation';
import { TOOL_NAME_PATTERN } from '../tools/tool.define';
import { APPROVAL_FUNCTION } from './approval-calls';

/** Most tool calls one assistant message of the history may carry. */
const MAX_HISTORY_TOOL_CALLS = 128;

/** A Chat Completions request, checked and in our terms; the runtime checks options and tools further. */
export interface CompletionRequest {
  /** The agent's name. */
  model: string;
  /** user, assistant (with tool calls) and tool messages, in order. */
  conversation: ConversationMessage[];
  /** The caller's system and developer messages, in order. */
  instructions: string[];
  /** temperature, maxTokens, stop and user as sent; ranges are the runtime's (ChatOptionsDto). */
  options: Record<string, unknown>;
  optionNames: ChatOptionNames;
  /** Function tools as client tools (`{ name, description, inputSchema }`), unchecked. */
  tools?: unknown[];
  toolChoice?: TurnToolChoice;
  stream: boolean;
  includeUsage: boolean;
}

/** How the runtime's client tool checks name the parts of an OpenAI function tool. */
export const FUNCTION_TOOL_LABELS: ClientToolLabels = {
  tool: (index) => `tools[${index}].function`,
  schema: 'parameters',
  list: 'tools',
};

function fail(code: ErrorCode, param: string, message: string): DomainError {
  return new DomainError(code, message, { param });
}

const invalid = (param: string, message: string) => fail('validation_failed', param, message);
const unsupported = (param: string, message: string) => fail('unsupported_parameter', param, message);

/** OpenAI clients send null for "not set" as often as they leave a field out. */
function given(value: unknown): value is NonNullable<unknown> {
  return value !== undefined && value !== null;
}

/**
 * Reads a Chat Completions body (OpenAI's wire format) without the global DTO pipe, which would refuse
 * the many fields OpenAI clients send that this server does not use: those are ignored, never forwarded.
 * What an agent cannot do is refused (400 `unsupported_parameter`): more than one choice, log
 * probabilities, a response format other than text, audio, images and files.
 */
export function parseCompletionRequest(body: unknown): CompletionRequest {
  if (!isPlainObject(body)) throw invalid('body', 'The body must be a JSON object');
  refuseUnsupported(body);
  const { model, stream, stream_options: streamOptions } = body;
  if (typeof model !== 'string' || !model) throw invalid('model', 'model must be the name of an agent (GET /v1/models)');
  if (given(stream) && typeof stream !== 'boolean') throw invalid('stream', 'stream must be a boolean');
  if (given(streamOptions) && !isPlainObject(streamOptions)) throw invalid('stream_options', 'stream_options must be an object');
  const includeUsage = isPlainObject(streamOptions) ? streamOptions.include_usage : undefined;
  if (given(includeUsage) && typeof includeUsage !== 'boolean') {
    throw invalid('stream_options.include_usage', 'stream_options.include_usage must be a boolean');
  }
  const { conversation, instructions } = parseMessages(body.messages);
  const { options, optionNames } = parseOptions(body);
  return {
    model,
    conversation,
    instructions,
    options,
    optionNames,
    tools: parseTools(body.tools),
    toolChoice: parseToolChoice(body.tool_choice),
    stream: stream === true,
    includeUsage: includeUsage === true,
  };
}

function refuseUnsupported(body: Record<string, unknown>): void {
  const { n, logprobs, top_logprobs: topLogprobs, response_format: format, modalities, audio } = body;
  if (given(n)) {
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw invalid('n', 'n must be a positive integer');
    if (n > 1) throw unsupported('n', 'n greater than 1 is not supported: an agent gives one answer per request');
  }
  if (given(logprobs) && logprobs !== false) throw unsupported('logprobs', 'logprobs are not supported');
  if (given(topLogprobs) && topLogprobs !== 0) throw unsupported('top_logprobs', 'top_logprobs are not supported');
  if (given(format) && !(isPlainObject(format) && format.type === 'text')) {
    throw unsupported('response_format', 'Only the response_format { "type": "text" } is supported');
  }
  if (given(modalities) && !(Array.isArray(modalities) && modalities.every((m) => m === 'text'))) {
    throw unsupported('modalities', 'Only the text modality is supported');
  }
  if (given(audio)) throw unsupported('audio', 'Audio output is not supported');
}

/**
 * The options the runtime checks against ChatOptionsDto, under OpenAI's names. `max_tokens` and its
 * newer name `max_completion_tokens` mean the same here; both at once must agree.
 */
function parseOptions(body: Record<string, unknown>): { options: Record<string, unknown>; optionNames: ChatOptionNames } {
  const { temperature, stop, user, max_tokens: maxTokens, max_completion_tokens: maxCompletionTokens } = body;
  if (given(maxTokens) && given(maxCompletionTokens) && maxTokens !== maxCompletionTokens) {
    throw invalid('max_tokens', 'max_tokens and max_completion_tokens differ: send one of them');
  }
  const options: Record<string, unknown> = {};
  if (given(temperature)) options.temperature = temperature;
  if (given(stop)) options.stop = stop;
  if (given(user)) options.user = user;
  if (given(maxCompletionTokens)) options.maxTokens = maxCompletionTokens;
  else if (given(maxTokens)) options.maxTokens = maxTokens;
  const optionNames: ChatOptionNames = {
    temperature: 'temperature',
    maxTokens: given(maxCompletionTokens) ? 'max_completion_tokens' : 'max_tokens',
    stop: 'stop',
    user: 'user',
    toolChoice: 'tool_choice',
  };
  return { options, optionNames };
}

/** Function tools become client tools; their names, descriptions and schemas are checked by the runtime. */
function parseTools(tools: unknown): unknown[] | undefined {
  if (!given(tools)) return undefined;
  if (!Array.isArray(tools)) throw invalid('tools', 'tools must be an array of function tools');
  return tools.map((tool, index) => {
    const at = `tools[${index}]`;
    if (!isPlainObject(tool)) throw invalid(at, `${at} must be an object`);
    if (tool.type !== 'function') throw unsupported(`${at}.type`, `${at}: only function tools are supported`);
    const fn = tool.function;
    if (!isPlainObject(fn)) throw invalid(`${at}.function`, `${at}.function must be an object`);
    if (fn.name === APPROVAL_FUNCTION) {
      throw invalid(
        `${at}.function.name`,
        `${at}: "${APPROVAL_FUNCTION}" is the server's (write proposals); name the tool otherwise`,
      );
    }
    return {
      name: fn.name,
      ...(given(fn.description) ? { description: fn.description } : {}),
      // OpenAI allows a function without parameters: it takes none.
      inputSchema: given(fn.parameters) ? fn.parameters : { type: 'object', properties: {} },
    };
  });
}

/** `none`, `auto` or a named function; `required` would make the model call a tool on every step of the loop. */
function parseToolChoice(choice: unknown): TurnToolChoice | undefined {
  if (!given(choice)) return undefined;
  if (choice === 'none' || choice === 'auto') return choice;
  if (choice === 'required') {
    throw unsupported('tool_choice', 'tool_choice "required" is not supported: name a function, or use "auto" or "none"');
  }
  if (isPlainObject(choice) && choice.type === 'function' && isPlainObject(choice.function)) {
    const { name } = choice.function;
    if (typeof name === 'string' && name) return { name };
  }
  throw invalid('tool_choice', 'tool_choice must be "none", "auto" or { "type": "function", "function": { "name" } }');
}

/**
 * The history in our terms. System and developer messages become the caller's instructions (they go
 * after the agent's own); an assistant message's tool calls must each be answered by a tool message
 * before the next message of another role, as OpenAI requires too.
 */
function parseMessages(input: unknown): { conversation: ConversationMessage[]; instructions: string[] } {
  if (!Array.isArray(input) || input.length === 0) {
    throw invalid('messages', 'messages must be a non-empty array of messages');
  }
  if (input.length > MAX_CONVERSATION_MESSAGES) {
    throw invalid('messages', `messages may hold at most ${MAX_CONVERSATION_MESSAGES} messages`);
  }
  const conversation: ConversationMessage[] = [];
  const instructions: string[] = [];
  /** Tool calls of the last assistant message still without a result: id → tool name. */
  let unanswered = new Map<string, string>();
  input.forEach((message: unknown, index) => {
    const at = `messages[${index}]`;
    if (!isPlainObject(message)) throw badMessage(at, `${at} must be an object with a role`);
    const { role } = message;
    if (role !== 'tool' && unanswered.size) throw missingResults(at, unanswered);
    let added: ConversationMessage;
    if (role === 'system' || role === 'developer') {
      const text = textOf(message.content, at, false);
      if (text.length > MAX_MESSAGE_LENGTH) throw tooLong(at);
      instructions.push(text);
      return;
    } else if (role === 'user') {
      added = { role: 'user', parts: [{ type: 'text', text: textOf(message.content, at, false) }] };
    } else if (role === 'assistant') {
      const { message: assistant, calls } = assistantMessage(message, at);
      added = assistant;
      unanswered = calls;
    } else if (role === 'tool') {
      const id = message.tool_call_id;
      if (typeof id !== 'string' || !unanswered.has(id)) {
        throw badMessage(
          `${at}.tool_call_id`,
          `${at}.tool_call_id must name a tool call of the assistant message before it that has no result yet`,
        );
      }
      const toolName = unanswered.get(id)!;
      unanswered.delete(id);
      const output = textOf(message.content, at, false);
      added = { role: 'tool', parts: [{ type: 'tool-result', toolCallId: id, toolName, output, isError: false }] };
    } else {
      throw badMessage(`${at}.role`, `${at}.role must be "system", "developer", "user", "assistant" or "tool"`);
    }
    if (messageLength(added) > MAX_MESSAGE_LENGTH) throw tooLong(at);
    conversation.push(added);
  });
  if (unanswered.size) throw missingResults(`messages[${input.length}]`, unanswered);
  return { conversation, instructions };
}

function assistantMessage(
  message: Record<string, unknown>,
  at: string,
): { message: ConversationMessage; calls: Map<string, string> } {
  if (given(message.audio)) throw unsupported(`${at}.audio`, `${at}: audio is not supported`);
  if (given(message.function_call)) {
    throw unsupported(`${at}.function_call`, `${at}: function_call is not supported; use tool_calls`);
  }
  const text = given(message.content) ? textOf(message.content, at, true) : '';
  const parts: ConversationPart[] = text ? [{ type: 'text', text }] : [];
  const calls = new Map<string, string>();
  const toolCalls = message.tool_calls;
  if (given(toolCalls)) {
    if (!Array.isArray(toolCalls) || toolCalls.length > MAX_HISTORY_TOOL_CALLS) {
      throw badMessage(`${at}.tool_calls`, `${at}.tool_calls must be an array of at most ${MAX_HISTORY_TOOL_CALLS} tool calls`);
    }
    toolCalls.forEach((call: unknown, i) => {
      const path = `${at}.tool_calls[${i}]`;
      if (!isPlainObject(call) || call.type !== 'function' || !isPlainObject(call.function)) {
        throw badMessage(path, `${path} must be a function tool call { id, type: "function", function: { name, arguments } }`);
      }
      const { id } = call;
      const { name, arguments: args } = call.function;
      if (!isToolCallId(id) || calls.has(id)) {
        throw badMessage(`${path}.id`, `${path}.id must be a unique string of 1 to ${MAX_TOOL_CALL_ID_LENGTH} characters`);
      }
      if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name)) {
        throw badMessage(`${path}.function.name`, `${path}.function.name must match ${TOOL_NAME_PATTERN.source}`);
      }
      if (typeof args !== 'string') throw badMessage(`${path}.function.arguments`, `${path}.function.arguments must be a string`);
      calls.set(id, name);
      parts.push({ type: 'tool-call', toolCallId: id, toolName: name, input: args });
    });
  }
  // An assistant message without anything the model can read still marks a turn of the conversation.
  if (!parts.length) parts.push({ type: 'text', text: '' });
  return { message: { role: 'assistant', parts }, calls };
}

/**
 * A message's text: a string, or an array of text parts (an assistant's refusal parts count as its text).
 * Images, audio and files are refused: the agents read text only.
 */
function textOf(content: unknown, at: string, assistant: boolean): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw badMessage(`${at}.content`, `${at}.content must be a string or an array of text parts`);
  return content
    .map((part: unknown, i) => {
      const path = `${at}.content[${i}]`;
      if (!isPlainObject(part)) throw badMessage(path, `${path} must be a content part { type, ... }`);
      if (part.type === 'text' && typeof part.text === 'string') return part.text;
      if (assistant && part.type === 'refusal' && typeof part.refusal === 'string') return part.refusal;
      if (part.type === 'input_audio') throw unsupported(path, `${path}: audio is not supported`);
      if (part.type === 'image_url' || part.type === 'file') {
        throw unsupported(path, `${path}: only text content is supported`);
      }
      throw badMessage(path, `${path} must be a text part { "type": "text", "text" }`);
    })
    .join('');
}

function badMessage(param: string, message: string): DomainError {
  return fail('invalid_message', param, message);
}

function tooLong(at: string): DomainError {
  return badMessage(at, `${at} is longer than ${MAX_MESSAGE_LENGTH} characters`);
}

function missingResults(at: string, unanswered: Map<string, string>): DomainError {
  const ids = [...unanswered.keys()];
  const named = ids.slice(0, 5).join(', ') + (ids.length > 5 ? ` and ${ids.length - 5} more` : '');
  return badMessage(
    at,
    `${at}: the tool calls ${named} of the assistant message before it have no tool message with their result`,
  );
}
