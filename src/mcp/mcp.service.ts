import { Injectable } from '@nestjs/common';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AgentService } from '../agents/agent.service';
import type { AgentSpec } from '../agents/agent.types';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { McpServerFactory } from './mcp-server.factory';
import type { McpScope } from './mcp.types';

/**
 * The MCP endpoint, stateless: each POST gets a server and a Streamable HTTP transport of its own
 * (the SDK's pattern for servers without sessions), so any replica can answer any request.
 */
@Injectable()
export class McpService {
  constructor(
    private readonly servers: McpServerFactory,
    private readonly agents: AgentService,
  ) {}

  /**
   * Answers one JSON-RPC POST (the body already parsed within the app's JSON limits). The agent is
   * checked first, so a refusal is a plain HTTP error; `open` then hands over the raw response.
   */
  async handle(
    caller: Caller,
    agentName: string | undefined,
    body: unknown,
    request: IncomingMessage,
    open: () => ServerResponse,
  ): Promise<void> {
    const scope: McpScope = agentName === undefined ? { caller } : { caller, agent: await this.agentFor(caller, agentName) };
    // The object list goes into `initialize` only, not into every tool call.
    const instructions = initializes(body) ? await this.servers.instructions(scope) : undefined;
    const server = this.servers.create(scope, instructions);
    // JSON responses rather than an event stream per request: every answer here is a single message.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    const response = open();
    // A client that leaves before its answer: closing the server aborts the running tool call's signal.
    // After an answer nothing is left running, and closing would only build an error nobody reads.
    response.once('close', () => {
      if (!response.writableFinished) void server.close();
    });
    await transport.handleRequest(request, response, body);
  }

  /** The agent of `/mcp/agents/:agentName`: 404 when missing or not the caller's to use, 403 when inactive. */
  private async agentFor(caller: Caller, name: string): Promise<AgentSpec> {
    try {
      return await this.agents.loadForRun(name, caller);
    } catch (error) {
      if (error instanceof DomainError && error.code === 'agent_forbidden') {
        throw new DomainError('agent_not_found', `Agent "${name}" not found`);
      }
      throw error;
    }
  }
}

/** Whether the body holds an `initialize` request; by its method only, as the transport validates it anyway. */
function initializes(body: unknown): boolean {
  const isInitialize = (message: unknown) => isPlainObject(message) && message.method === 'initialize';
  return Array.isArray(body) ? body.some(isInitialize) : isInitialize(body);
}
