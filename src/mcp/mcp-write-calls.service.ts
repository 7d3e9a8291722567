import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { ElicitResultSchema, type CallToolResult, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { errorContent } from '../tools/tool.define';
import type { ToolAgentScope, WriteProposal } from '../tools/tool.types';
import { ToolsService } from '../tools/tools.service';
import { ApprovedWrites, type Decision, type ProposalRef, type WriteOutcome } from '../writes/approved-writes.service';
import { McpConfirmations, type ElicitationAnswer } from './mcp-confirmations.service';
import { approvalScopeOf, type McpSession } from './mcp-sessions';
import { toCallToolResult, toConfirmationRequest } from './mcp.mapper';
import type { McpSend } from './mcp.types';

/** One write tool call of an MCP session whose client can confirm it. */
export interface McpWriteCall {
  caller: Caller;
  session: McpSession;
  agent: ToolAgentScope;
  name: string;
  args: Record<string, unknown>;
  /** The client's tools/call request: the elicitation goes out on its response stream. */
  requestId: RequestId;
  signal: AbortSignal;
  send: McpSend;
}

/**
 * Write tools over MCP: the call becomes a proposal (through the registry, as in a durable chat, nothing
 * written), the client is asked to confirm exactly that change (an elicitation on the call's response
 * stream), and the person's answer is taken as a decision on the proposal by ApprovedWrites, with the
 * proposal's token: approve writes under If-Match, anything else writes nothing. No answer before the
 * proposal expires, or the client gone, writes nothing either.
 */
@Injectable()
export class McpWriteCalls implements BeforeApplicationShutdown {
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    private readonly tools: ToolsService,
    private readonly approvals: ApprovedWrites,
    private readonly confirmations: McpConfirmations,
  ) {}

  async call(call: McpWriteCall): Promise<CallToolResult> {
    const run = this.run(call);
    this.running.add(run);
    try {
      const outcome = await run;
      return toCallToolResult(outcome.content, outcome.isError);
    } finally {
      this.running.delete(run);
    }
  }

  /** Waiting calls end as unanswered and record it, before the database pools close. */
  async beforeApplicationShutdown(): Promise<void> {
    this.confirmations.releaseAll();
    await Promise.allSettled([...this.running]);
  }

  private async run(call: McpWriteCall): Promise<WriteOutcome> {
    const { caller, session, agent, name, args, signal } = call;
    const scope = approvalScopeOf(session);
    const toolCallId = `mcp_${randomUUID()}`;
    const proposed = await this.tools.propose(caller, { id: toolCallId, name, arguments: args }, signal, agent, scope);
    if (proposed.isError) return { content: proposed.content, isError: true };
    const proposal = proposed.content as WriteProposal;
    const ref: ProposalRef = { scope, toolCallId, tool: name, arguments: args, proposal, agent: agent.name };
    try {
      const request = toConfirmationRequest(name, agent.name, proposal);
      const answer = await this.confirmations.ask(caller, session, call.requestId, new Date(proposal.expiresAt), signal, (id) =>
        call.send({ jsonrpc: '2.0', id, method: 'elicitation/create', params: request }, call.requestId),
      );
      if (!answer) return await this.approvals.expire(caller, ref);
      const { decision, reason } = decisionOf(answer);
      return await this.approvals.decide(caller, ref, decision, proposal.token, reason);
    } catch (error) {
      // Refusals (approval_invalid, too_many_confirmations): a result the host's model reads; nothing written.
      if (error instanceof DomainError) return { content: errorContent(error.code, error.message, error.details), isError: true };
      throw error;
    }
  }
}

/**
 * The decision an answer stands for: approve only for an accepted form whose decision is `approve`; a
 * rejection, a decline, a dismissal, an error or an answer that is not an elicitation result write nothing.
 */
export function decisionOf(answer: ElicitationAnswer): { decision: Decision; reason?: string } {
  if (!('result' in answer)) return { decision: 'reject' };
  const parsed = ElicitResultSchema.safeParse(answer.result);
  if (!parsed.success) return { decision: 'reject' };
  const { action, content } = parsed.data;
  const reason = typeof content?.reason === 'string' ? content.reason.slice(0, 500) : undefined;
  if (action === 'accept' && content?.decision === 'approve') return { decision: 'approve' };
  return { decision: 'reject', reason };
}
