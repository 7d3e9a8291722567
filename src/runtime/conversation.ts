import type { LlmMessage } from '../llm/llm.types';
import { toolMessageContent } from './agent-loop.service';
import { withheldWithRef } from './figure-references';

/**
 * One part of a conversation message, as durable chats store it and as the AI SDK's UI messages
 * are read: text, a tool call of the assistant, or the result of one.
 */
export type ConversationPart =
  | { type: 'text'; text: string }
  | { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown; kind?: 'function' | 'custom' }
  | {
      type: 'tool-result';
      toolCallId: string;
      toolName: string;
      /** Absent on a withheld result. */
      output: unknown;
      isError: boolean;
      /** Only as a caller sees a stored result produced under other access than its own: the output is left out. */
      withheld?: true;
      reason?: typeof WITHHELD_REASON;
      /** Of a withheld data result: its number in the chat (`r3`), which later results' numbers follow. */
      resultRef?: string;
    };

/** Why a stored tool result is withheld from a caller: it was produced under other access than the caller's. */
export const WITHHELD_REASON = 'access_changed';
/** What the model reads in place of a withheld result. */
export const WITHHELD_CONTENT = 'result withheld: produced under other access';

type ToolResultPart = Extract<ConversationPart, { type: 'tool-result' }>;

/** What a caller reads in place of an answer written from results it may not see. */
export const WITHHELD_TEXT = '[answer withheld: written from results produced under other access]';

/**
 * A part of a stored step as a caller with other access than the step ran under gets it: a result without
 * its output, an answer's text replaced, a tool call without its arguments (a filter may name what the
 * caller may not see).
 */
export function withheldPart(part: ConversationPart): ConversationPart {
  if (part.type === 'tool-result') return withheldResult(part);
  if (part.type === 'text') return { type: 'text', text: WITHHELD_TEXT };
  return { ...part, input: { withheld: true, reason: WITHHELD_REASON } };
}

/** A tool result as a caller with other access than the one it was produced under gets it: without its output. */
function withheldResult(part: ToolResultPart): ToolResultPart {
  const resultRef = resultRefOf(part.output) ?? part.resultRef;
  return {
    type: 'tool-result',
    toolCallId: part.toolCallId,
    toolName: part.toolName,
    output: undefined,
    isError: false,
    withheld: true,
    reason: WITHHELD_REASON,
    ...(resultRef ? { resultRef } : {}),
  };
}

function resultRefOf(output: unknown): string | undefined {
  const ref = typeof output === 'object' && output !== null ? (output as { resultRef?: unknown }).resultRef : undefined;
  return typeof ref === 'string' ? ref : undefined;
}

/** Most messages of a conversation a client sends in one request. */
export const MAX_CONVERSATION_MESSAGES = 500;
/** Longest text of one message a client sends, tool inputs and outputs included (as JSON). */
export const MAX_MESSAGE_LENGTH = 100_000;
/** Longest tool call id a client may send back. */
export const MAX_TOOL_CALL_ID_LENGTH = 200;

/** Whether a client sent a usable tool call id: a string of 1 to MAX_TOOL_CALL_ID_LENGTH characters. */
export function isToolCallId(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_TOOL_CALL_ID_LENGTH;
}

export type ConversationRole = 'user' | 'assistant' | 'tool';

/** A message of a conversation: user text, an assistant step (text and tool calls), or the results of its calls. */
export interface ConversationMessage {
  role: ConversationRole;
  parts: ConversationPart[];
}

/** Characters of a message as MAX_MESSAGE_LENGTH counts them: text, and tool inputs and outputs as JSON. */
export function messageLength(message: ConversationMessage): number {
  let length = 0;
  for (const part of message.parts) {
    if (part.type === 'text') length += part.text.length;
    else if (part.type === 'tool-call') length += JSON.stringify(part.input ?? null).length;
    else length += JSON.stringify(part.output ?? null).length;
  }
  return length;
}

/** A conversation → the messages the model sees (tool results one message per call). */
export function toLlmMessages(rows: readonly ConversationMessage[]): LlmMessage[] {
  const messages: LlmMessage[] = [];
  for (const row of rows) {
    const text = row.parts
      .filter((p): p is Extract<ConversationPart, { type: 'text' }> => p.type === 'text')
      .map((p) => p.text)
      .join('');
    if (row.role === 'user') {
      messages.push({ role: 'user', content: text });
    } else if (row.role === 'assistant') {
      const calls = row.parts.filter((p): p is Extract<ConversationPart, { type: 'tool-call' }> => p.type === 'tool-call');
      messages.push(
        calls.length
          ? {
              role: 'assistant',
              content: text || null,
              tool_calls: calls.map((call) =>
                call.kind === 'custom'
                  ? { id: call.toolCallId, type: 'custom' as const, custom: { name: call.toolName, input: String(call.input) } }
                  : {
                      id: call.toolCallId,
                      type: 'function' as const,
                      function: {
                        name: call.toolName,
                        arguments: typeof call.input === 'string' ? call.input : JSON.stringify(call.input),
                      },
                    },
              ),
            }
          : { role: 'assistant', content: text },
      );
    } else {
      for (const part of row.parts) {
        if (part.type !== 'tool-result') continue;
        messages.push({
          role: 'tool',
          tool_call_id: part.toolCallId,
          content: part.withheld
            ? withheldWithRef(WITHHELD_CONTENT, part.resultRef)
            : toolMessageContent({ content: part.output, isError: part.isError }),
        });
      }
    }
  }
  return messages;
}
