import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { ToolRegistry } from './tool.registry';
import type { ToolAgentScope, ToolCall, ToolResult } from './tool.types';
import { ExecuteToolDto, ExecuteToolResponse, toToolInfo, ToolListResponse } from './tools.dto';

/**
 * Direct tool calls by a user (REST, MCP): the same registry and middleware as agents. With `agent`,
 * the call is held to that agent's tools and objects, as the agent's own calls are.
 */
@Injectable()
export class ToolsService {
  constructor(private readonly registry: ToolRegistry) {}

  list(): ToolListResponse {
    return { tools: this.registry.list({ scope: 'agent' }).map(toToolInfo) };
  }

  /** `signal` aborts when the HTTP client leaves: the call stops, and so does its database statement. */
  async execute(
    caller: Caller,
    name: string,
    dto: ExecuteToolDto,
    signal: AbortSignal,
    agent?: ToolAgentScope,
  ): Promise<ExecuteToolResponse> {
    // An unknown name is the caller's URL mistake (404); everything after that is a tool result (200).
    // A write tool only proposes, for a person to approve in a durable chat: called directly it does not exist.
    const tool = this.registry.get(name);
    if (!tool || tool.needsApproval) throw new DomainError('tool_not_found', `Tool "${name.slice(0, 100)}" not found`);
    const result = await this.registry.execute(
      { id: `direct_${randomUUID()}`, name, arguments: dto.arguments ?? {} },
      { caller, signal, ...(agent ? { agent } : {}) },
    );
    return { result: result.content, isError: result.isError, durationMs: result.durationMs };
  }

  /**
   * A write tool's call at a door where a person confirms it before anything is written (MCP with
   * elicitation): through the registry and its middleware like any call, bound to `approvalScope`; its
   * result is the proposal. Any other tool is not found here.
   */
  async propose(
    caller: Caller,
    call: ToolCall,
    signal: AbortSignal,
    agent: ToolAgentScope,
    approvalScope: string,
  ): Promise<ToolResult> {
    if (!this.registry.get(call.name)?.needsApproval) {
      throw new DomainError('tool_not_found', `Tool "${call.name.slice(0, 100)}" not found`);
    }
    return this.registry.execute(call, { caller, signal, agent, approvalScope });
  }
}
