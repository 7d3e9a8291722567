import { Injectable } from '@nestjs/common';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type ReadResourceResult,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { AgentService } from '../agents/agent.service';
import type { AgentSpec } from '../agents/agent.types';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { AccessService } from '../governance/access.service';
import type { ObjectSummary } from '../metadata/metadata.repository';
import { errorContent } from '../tools/tool.define';
import { mayUseObject } from '../tools/tool.middlewares';
import { ToolRegistry } from '../tools/tool.registry';
import type { ToolAgentScope, ToolDefinition } from '../tools/tool.types';
import { ToolsService } from '../tools/tools.service';
import { WRITE_TOOL_OPERATION, type WriteToolName } from '../writes/write-tools';
import { McpWriteCalls } from './mcp-write-calls.service';
import {
  OBJECT_RESOURCE_TEMPLATE,
  objectNameOf,
  serverInstructions,
  toCallToolResult,
  toMcpTool,
  toObjectResource,
  toObjectResourceContents,
  toPrompt,
  toPromptResult,
} from './mcp.mapper';
import { MCP_SERVER_INFO, McpScope, type McpSend, RESOURCE_NOT_FOUND } from './mcp.types';

/**
 * Builds the MCP server of one request: the data tools as tools, objects as resources, agents as
 * prompts, all limited to what the scope (key, and agent if any) may use. Tool calls go through
 * ToolsService, the REST tool route's own path: registry, middleware, READ ONLY transaction.
 */
@Injectable()
export class McpServerFactory {
  /** The SDK's validator of elicitation answers (this server checks its own); one instance instead of an Ajv per request. */
  private readonly validator = new AjvJsonSchemaValidator();

  constructor(
    private readonly registry: ToolRegistry,
    private readonly tools: ToolsService,
    private readonly agents: AgentService,
    private readonly access: AccessService,
    private readonly writeCalls: McpWriteCalls,
  ) {}

  /** `send` reaches the client during a call (the write confirmations); without it no write tool runs. */
  create(scope: McpScope, instructions?: string, send?: McpSend): Server {
    const server = new Server(MCP_SERVER_INFO, {
      capabilities: { tools: {}, resources: {}, prompts: {} },
      instructions,
      jsonSchemaValidator: this.validator,
    });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.toolsOf(scope).map(toMcpTool) }));
    server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
      this.callTool(
        scope,
        request.params.name,
        request.params.arguments ?? {},
        extra.signal,
        send && { requestId: extra.requestId, send },
      ),
    );
    server.setRequestHandler(ListResourcesRequestSchema, async () => ({
      resources: (await this.objectsOf(scope)).map(toObjectResource),
    }));
    server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: [OBJECT_RESOURCE_TEMPLATE] }));
    server.setRequestHandler(ReadResourceRequestSchema, (request) => this.readResource(scope, request.params.uri));
    server.setRequestHandler(ListPromptsRequestSchema, async () => ({ prompts: (await this.agentsOf(scope)).map(toPrompt) }));
    server.setRequestHandler(GetPromptRequestSchema, async (request) => {
      const agent = (await this.agentsOf(scope)).find((a) => a.name === request.params.name);
      if (!agent) throw new McpError(ErrorCode.InvalidParams, `Unknown prompt "${request.params.name.slice(0, 100)}"`);
      return toPromptResult(agent);
    });
    return server;
  }

  /** The `instructions` of `initialize`: the objects and tools of the scope, briefly. */
  async instructions(scope: McpScope): Promise<string> {
    const tools = this.toolsOf(scope).map((tool) => tool.name);
    return serverInstructions(await this.objectsOf(scope), tools, scope.agent);
  }

  /** Whether a request body calls a write tool this scope offers: its answer must be a stream the confirmation can go out on. */
  confirms(scope: McpScope, body: unknown): boolean {
    const writes = this.writeToolsOf(scope).map((tool) => tool.name);
    if (!writes.length) return false;
    const calls = (message: unknown) =>
      isPlainObject(message) &&
      message.method === 'tools/call' &&
      isPlainObject(message.params) &&
      writes.includes(String(message.params.name));
    return Array.isArray(body) ? body.some(calls) : calls(body);
  }

  /** The tools agents are offered (platform tools such as ask_user need a chat); an agent's own only, with its write tools where they can be confirmed. */
  private toolsOf(scope: McpScope): ToolDefinition[] {
    const offered = this.registry.list({ scope: 'agent' });
    const agent = scope.agent;
    return agent ? [...offered.filter((tool) => agent.tools.includes(tool.name)), ...this.writeToolsOf(scope)] : offered;
  }

  /**
   * The agent's write tools, only in a session whose client declared form elicitation (where a person confirms
   * each write) and only those whose operation the agent's `writes` allow on some object. Never on `/mcp`.
   */
  private writeToolsOf(scope: McpScope): ToolDefinition[] {
    const agent = scope.agent;
    if (!agent || !scope.session?.elicitation) return [];
    const operations = new Set(Object.values(agent.writes ?? {}).flat());
    return this.registry
      .resolve(agent.tools)
      .tools.filter((tool) => tool.needsApproval && operations.has(WRITE_TOOL_OPERATION[tool.name as WriteToolName]));
  }

  private async objectsOf(scope: McpScope): Promise<ObjectSummary[]> {
    const agent = scope.agent;
    return this.access.visibleObjects(scope.caller, (name) => !agent || mayUseObject(agent.allowedObjects, name));
  }

  private async agentsOf(scope: McpScope): Promise<AgentSpec[]> {
    return scope.agent ? [scope.agent] : this.agents.listUsable(scope.caller);
  }

  private async callTool(
    scope: McpScope,
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    stream?: { requestId: RequestId; send: McpSend },
  ): Promise<CallToolResult> {
    const agent: ToolAgentScope | undefined = scope.agent && {
      name: scope.agent.name,
      tools: this.toolsOf(scope).map((tool) => tool.name),
      allowedObjects: scope.agent.allowedObjects,
      writes: scope.agent.writes,
    };
    const { session } = scope;
    if (agent && session && stream && this.writeToolsOf(scope).some((tool) => tool.name === name)) {
      return this.writeCalls.call({ caller: scope.caller, session, agent, name, args, signal, ...stream });
    }
    try {
      const { result, isError } = await this.tools.execute(scope.caller, name, { arguments: args }, signal, agent);
      return toCallToolResult(result, isError);
    } catch (error) {
      // An unknown tool is a 404 on the REST route; here it is a result the host's model can read.
      if (error instanceof DomainError) return toCallToolResult(errorContent(error.code, error.message, error.details), true);
      throw error;
    }
  }

  private async readResource(scope: McpScope, uri: string): Promise<ReadResourceResult> {
    const name = objectNameOf(uri);
    const notFound = () =>
      new McpError(RESOURCE_NOT_FOUND, `Resource ${uri.slice(0, 200)} not found`, { uri: uri.slice(0, 200) });
    if (!name || (scope.agent && !mayUseObject(scope.agent.allowedObjects, name))) throw notFound();
    try {
      return toObjectResourceContents(uri, await this.access.describe(await this.access.forCaller(scope.caller), name));
    } catch (error) {
      if (error instanceof DomainError && error.code === 'object_not_found') throw notFound();
      throw error;
    }
  }
}
