import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/auth.decorators';
import { DomainError } from '../common/domain-error';
import { ToolRegistry } from './tool.registry';
import { ExecuteToolDto, ExecuteToolResponse, toToolInfo, ToolListResponse } from './tools.dto';

/** Direct tool calls by a user over HTTP: the same registry and middleware as agents, without an agent. */
@Injectable()
export class ToolsService {
  constructor(private readonly registry: ToolRegistry) {}

  list(): ToolListResponse {
    return { tools: this.registry.list({ scope: 'agent' }).map(toToolInfo) };
  }

  /** `signal` aborts when the HTTP client leaves: the call stops, and so does its database statement. */
  async execute(caller: Caller, name: string, dto: ExecuteToolDto, signal: AbortSignal): Promise<ExecuteToolResponse> {
    // An unknown name is the caller's URL mistake (404); everything after that is a tool result (200).
    if (!this.registry.get(name)) throw new DomainError('tool_not_found', `Tool "${name.slice(0, 100)}" not found`);
    const result = await this.registry.execute(
      { id: `direct_${randomUUID()}`, name, arguments: dto.arguments ?? {} },
      { caller, signal },
    );
    return { result: result.content, isError: result.isError, durationMs: result.durationMs };
  }
}
