import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import {
  MAX_MESSAGE_LENGTH,
  MAX_TOOL_CALL_ID_LENGTH,
  messageLength,
  type ConversationMessage,
  type ConversationPart,
} from '../runtime/conversation';
import { TOOL_NAME_PATTERN } from '../tools/tool.define';

/**
 * A conversation sent by a client: `{ role, content }` messages, or AI SDK UI messages (`parts`).
 * Only user and assistant turns (a client may not inject system or tool messages). Of UI parts,
 * text and finished tool parts count (`tool-<name>` and `dynamic-tool` in state `output-available`
 * or `output-error`): they become the assistant's tool calls and the tool results the model sees,
 * so a follow-up question can build on an earlier result. Other parts (reasoning, files, sources,
 * data, tool calls still without an output) are ignored.
 */
export function fromClientMessages(input: readonly unknown[]): ConversationMessage[] {
  return input.flatMap((message, index) => fromClientMessage(message, index));
}

function fromClientMessage(message: unknown, index: number): ConversationMessage[] {
  const fail = (problem: string) => new DomainError('invalid_message', `messages[${index}]${problem}`);
  if (!isPlainObject(message)) throw fail(' must be an object { role, content } or a UI message { role, parts }');
  const { role, content, parts } = message;
  if (role !== 'user' && role !== 'assistant') throw fail('.role must be "user" or "assistant"');
  let messages: ConversationMessage[];
  if (content !== undefined) {
    if (typeof content !== 'string') throw fail('.content must be a string');
    messages = [{ role, parts: [{ type: 'text', text: content }] }];
  } else if (Array.isArray(parts)) {
    messages = role === 'user' ? [{ role, parts: [{ type: 'text', text: textOf(parts) }] }] : assistantSteps(parts, fail);
  } else {
    throw fail('.content must be a string');
  }
  if (messages.reduce((sum, m) => sum + messageLength(m), 0) > MAX_MESSAGE_LENGTH)
    throw fail(` is longer than ${MAX_MESSAGE_LENGTH} characters`);
  return messages;
}

function textOf(parts: unknown[]): string {
  return parts
    .filter((p): p is { type: 'text'; text: string } => isPlainObject(p) && p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('');
}

/**
 * An assistant UI message holds a whole turn: steps of text and tool calls, each step's results
 * inline. The model saw each step as an assistant message followed by one tool message per call,
 * so that is what it gets back. A step ends at `step-start`, or where text follows tool calls.
 */
function assistantSteps(parts: unknown[], fail: (problem: string) => DomainError): ConversationMessage[] {
  const messages: ConversationMessage[] = [];
  let text = '';
  let calls: ConversationPart[] = [];
  let results: ConversationPart[] = [];
  const endStep = () => {
    if (text || calls.length)
      messages.push({ role: 'assistant', parts: [...(text ? [{ type: 'text' as const, text }] : []), ...calls] });
    if (results.length) messages.push({ role: 'tool', parts: results });
    text = '';
    calls = [];
    results = [];
  };
  parts.forEach((part, i) => {
    if (!isPlainObject(part) || typeof part.type !== 'string') throw fail(`.parts[${i}] must be an object with a type`);
    if (part.type === 'step-start') return endStep();
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw fail(`.parts[${i}].text must be a string`);
      if (calls.length) endStep();
      text += part.text;
      return;
    }
    if (part.type !== 'dynamic-tool' && !part.type.startsWith('tool-')) return;
    const toolName = part.type === 'dynamic-tool' ? part.toolName : part.type.slice(5);
    if (part.state !== 'output-available' && part.state !== 'output-error') return;
    if (typeof toolName !== 'string' || !TOOL_NAME_PATTERN.test(toolName)) {
      throw fail(`.parts[${i}] names a tool that cannot exist (1-64 of A-Z, a-z, 0-9, _ and -)`);
    }
    const { toolCallId } = part;
    if (typeof toolCallId !== 'string' || !toolCallId || toolCallId.length > MAX_TOOL_CALL_ID_LENGTH) {
      throw fail(`.parts[${i}].toolCallId must be a string of 1 to ${MAX_TOOL_CALL_ID_LENGTH} characters`);
    }
    const isError = part.state === 'output-error';
    calls.push({ type: 'tool-call', toolCallId, toolName, input: part.input ?? {} });
    // An error's text is what the model read after "Tool call failed:" when the call ran.
    const output = isError ? (typeof part.errorText === 'string' ? part.errorText : 'The tool call failed') : part.output;
    results.push({ type: 'tool-result', toolCallId, toolName, output, isError });
  });
  endStep();
  // An assistant message without anything the model can read still marks a turn of the conversation.
  return messages.length ? messages : [{ role: 'assistant', parts: [{ type: 'text', text: '' }] }];
}
