import type { TurnStep } from '../../runtime/agent-loop.service';
import type { LlmToolCall } from '../../llm/llm.types';
import { withheldPart } from '../../runtime/conversation';
import { readableArguments } from '../../tools/tool.arguments';
import type { WriteProposal } from '../../tools/tool.types';
import type { ChatMessageRow, ChatPart, PendingToolCall } from './chat.types';

/** The assistant message of a step as parts: its text, then its tool calls. */
export function assistantParts(step: TurnStep): ChatPart[] {
  const parts: ChatPart[] = [];
  const content = step.assistant.role === 'assistant' && typeof step.assistant.content === 'string' ? step.assistant.content : '';
  if (content) parts.push({ type: 'text', text: content });
  for (const call of step.toolCalls) {
    parts.push({
      type: 'tool-call',
      toolCallId: call.id,
      toolName: call.name,
      input: call.kind === 'custom' ? call.arguments : readableArguments(call.arguments),
      kind: call.kind,
    });
  }
  return parts;
}

export function toolResultParts(step: TurnStep): ChatPart[] {
  return step.toolResults.map((result) => ({
    type: 'tool-result' as const,
    toolCallId: result.toolCallId,
    toolName: result.name,
    output: result.content,
    isError: result.isError,
  }));
}

/**
 * What the client sees of a pending call: parsed JSON arguments for function tools, raw text for
 * freeform (custom) tools, also when they travelled as a one-string-parameter function.
 */
export function toPendingCall(call: LlmToolCall, freeformAsFunction: ReadonlySet<string>): PendingToolCall {
  if (call.kind === 'custom') return { id: call.id, name: call.name, arguments: call.arguments };
  const parsed = readableArguments(call.arguments);
  if (freeformAsFunction.has(call.name) && parsed && typeof parsed === 'object' && 'input' in parsed) {
    return { id: call.id, name: call.name, arguments: String(parsed.input) };
  }
  return { id: call.id, name: call.name, arguments: parsed };
}

/**
 * Messages as a caller whose access has this fingerprint may see them: what a turn's steps stored under
 * other access is withheld (tool results without their output, the answer's text and the tool calls'
 * arguments replaced), whether that access was another key's or the same key's before its policies
 * changed. Messages nobody's data access produced (`access` null: user messages, a client's own tool
 * results, errors the server wrote) are kept.
 */
export function visibleTo<T extends Pick<ChatMessageRow, 'parts' | 'access' | 'metadata'>>(
  messages: readonly T[],
  fingerprint: string,
): T[] {
  return messages.map((message) => {
    if (message.access == null || message.access === fingerprint) return message;
    // An assistant step of a turn that ran under other access: its answer and tool arguments may hold what
    // its results held; its grounding names their figures.
    const metadata = message.metadata?.grounding ? { ...message.metadata, grounding: undefined } : message.metadata;
    return { ...message, parts: message.parts.map(withheldPart), metadata };
  });
}

/** A pending call that is a write proposal. */
export type PendingProposal = PendingToolCall & { proposal: WriteProposal };

/**
 * The write proposals among a chat's pending calls as a caller whose access has this fingerprint may see
 * them: only those the proposing step made under the same access (a delete's proposal holds the whole
 * record, hidden fields included; its token approves it). `withheld`: some were left out.
 */
export function proposalsVisibleTo(
  pending: readonly PendingToolCall[],
  fingerprint: string,
): { proposals: PendingProposal[]; withheld: boolean } {
  const all = pending.filter((call): call is PendingProposal => call.proposal !== undefined);
  // A proposal stored without the access it was made under is nobody's to see.
  const proposals = all.filter((call) => call.access !== undefined && call.access === fingerprint);
  return { proposals, withheld: proposals.length < all.length };
}
