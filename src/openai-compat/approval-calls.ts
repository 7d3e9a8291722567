import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import type { TurnResult } from '../runtime/agent-loop.service';
import type { ConversationMessage, ConversationPart } from '../runtime/conversation';
import type { ProposedChange, WriteProposal } from '../tools/tool.types';
import type { Decision, ProposalRef, WriteOutcome } from '../writes/approved-writes.service';
import type { CompletionToolCall } from './openai-compat.dto';

/**
 * The function under which a write proposal reaches an OpenAI client: a tool call the client answers with a
 * person's decision. It is the server's: a client may not declare a tool of that name.
 */
export const APPROVAL_FUNCTION = 'approve_write';

/** Most approve_write calls one request's history may hold (each answer costs a token check and a read). */
export const MAX_APPROVAL_CALLS = 100;

const MAX_REASON_LENGTH = 2000;

/** The arguments of an approve_write call: the proposal, as the client shows it and hands it back. */
export interface ApprovalCallArguments {
  /** The write tool the model called, and its arguments. */
  tool: string;
  arguments: unknown;
  objectName: string;
  operation: WriteProposal['operation'];
  /** Per record: id, version (ETag), and the changed fields before and after. */
  changes: ProposedChange[];
  /** Present it in the answer to approve or reject. */
  token: string;
  expiresAt: string;
}

/** A person's decision, as the client answers an approve_write call. */
export interface ApprovalAnswer {
  decision: Decision;
  token: string;
  reason?: string;
}

/** One approve_write call of the history and its answer, where they sit in the conversation. */
export interface AnsweredApproval {
  ref: ProposalRef;
  answer: ApprovalAnswer;
  call: { message: number; part: number };
  result: { message: number; part: number };
}

/** The write proposals a paused turn waits for, as approve_write calls. */
export function approvalCallsOf(result: TurnResult): CompletionToolCall[] {
  return (result.pendingApprovals ?? []).map((pending) => {
    const proposal = pending.content as WriteProposal;
    const args: ApprovalCallArguments = {
      tool: pending.name,
      arguments: pending.arguments,
      objectName: proposal.objectName,
      operation: proposal.operation,
      changes: proposal.changes,
      token: proposal.token,
      expiresAt: proposal.expiresAt,
    };
    return { id: pending.toolCallId, type: 'function', function: { name: APPROVAL_FUNCTION, arguments: JSON.stringify(args) } };
  });
}

/**
 * The approve_write calls of the history with their answers. What the client handed back is not trusted: the
 * token signs the scope, the call id, the tool, its arguments, every change and the expiry shown, and the
 * proposal must carry the token it is answered with, so an altered proposal fails its check. A call or an answer that is not of the documented shape is a 400 (`invalid_message`).
 */
export function answeredApprovals(
  conversation: readonly ConversationMessage[],
  scope: string,
  agent: string,
): AnsweredApproval[] {
  const found: AnsweredApproval[] = [];
  conversation.forEach((message, m) => {
    if (message.role !== 'assistant') return;
    message.parts.forEach((part, p) => {
      if (part.type !== 'tool-call' || part.toolName !== APPROVAL_FUNCTION) return;
      if (found.length === MAX_APPROVAL_CALLS) {
        throw badApproval(`messages may hold at most ${MAX_APPROVAL_CALLS} ${APPROVAL_FUNCTION} calls`);
      }
      const args = callArguments(part.input, part.toolCallId);
      const result = resultOf(conversation, m, part.toolCallId);
      found.push({
        ref: {
          scope,
          toolCallId: part.toolCallId,
          tool: args.tool,
          arguments: args.arguments,
          proposal: {
            objectName: args.objectName,
            operation: args.operation,
            changes: args.changes,
            token: args.token,
            expiresAt: args.expiresAt,
          },
          agent,
        },
        answer: answerOf(result.output, part.toolCallId),
        call: { message: m, part: p },
        result: { message: result.message, part: result.part },
      });
    });
  });
  return found;
}

/**
 * The conversation as the model reads it: each approve_write call turned back into the write call the model
 * made, answered by what came of the decision. The model never sees a token.
 */
export function withOutcomes(
  conversation: readonly ConversationMessage[],
  settled: ReadonlyArray<{ approval: AnsweredApproval; outcome: WriteOutcome }>,
): ConversationMessage[] {
  const parts = conversation.map((message) => [...message.parts]);
  for (const { approval, outcome } of settled) {
    const { ref, call, result } = approval;
    const input = JSON.stringify(ref.arguments);
    parts[call.message][call.part] = { type: 'tool-call', toolCallId: ref.toolCallId, toolName: ref.tool, input };
    const answered: ConversationPart = {
      type: 'tool-result',
      toolCallId: ref.toolCallId,
      toolName: ref.tool,
      output: outcome.content,
      isError: outcome.isError,
    };
    parts[result.message][result.part] = answered;
  }
  return conversation.map((message, i) => ({ ...message, parts: parts[i] }));
}

function callArguments(input: unknown, id: string): ApprovalCallArguments {
  const args = parseJson(input);
  const { tool, objectName, operation, changes, token, expiresAt } = isPlainObject(args) ? args : {};
  const valid =
    isPlainObject(args) &&
    typeof tool === 'string' &&
    'arguments' in args &&
    typeof objectName === 'string' &&
    (operation === 'create' || operation === 'update' || operation === 'delete') &&
    Array.isArray(changes) &&
    changes.every(isPlainObject) &&
    typeof token === 'string' &&
    typeof expiresAt === 'string';
  if (!valid) {
    throw badApproval(
      `The arguments of the ${APPROVAL_FUNCTION} call ${id} are not the proposal this server sent: send the call back as it came`,
    );
  }
  return args as unknown as ApprovalCallArguments;
}

function resultOf(
  conversation: readonly ConversationMessage[],
  after: number,
  id: string,
): { message: number; part: number; output: unknown } {
  // The request parser has checked that every call is answered by the tool messages right after it.
  for (let m = after + 1; m < conversation.length && conversation[m].role === 'tool'; m++) {
    const p = conversation[m].parts.findIndex((part) => part.type === 'tool-result' && part.toolCallId === id);
    if (p >= 0) return { message: m, part: p, output: (conversation[m].parts[p] as { output: unknown }).output };
  }
  throw badApproval(`The ${APPROVAL_FUNCTION} call ${id} has no answer`);
}

function answerOf(output: unknown, id: string): ApprovalAnswer {
  const answer = parseJson(output);
  const { decision, token, reason } = isPlainObject(answer) ? answer : {};
  const valid =
    (decision === 'approve' || decision === 'reject') &&
    typeof token === 'string' &&
    token.length <= 200 &&
    (reason === undefined || reason === null || (typeof reason === 'string' && reason.length <= MAX_REASON_LENGTH));
  if (!valid) {
    throw badApproval(
      `The answer to the ${APPROVAL_FUNCTION} call ${id} must be the JSON text ` +
        `{"decision": "approve" | "reject", "token": "<the call's token>", "reason"?: "<at most ${MAX_REASON_LENGTH} characters>"}`,
    );
  }
  return { decision, token, ...(typeof reason === 'string' ? { reason } : {}) };
}

function parseJson(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}

function badApproval(message: string): DomainError {
  return new DomainError('invalid_message', message, { param: 'messages' });
}
