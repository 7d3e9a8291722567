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
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { AgentService } from '../agents/agent.service';
import type { AgentSpec } from '../agents/agent.types';
import { DomainError } from '../common/domain-error';
import { AccessService } from '../governance/access.service';
import type { ObjectSummary } from '../metadata/metadata.repository';
import { errorContent } from '../tools/tool.define';
import { mayUseObject } from '../tools/tool.middlewares';
import { ToolRegistry } from '../tools/tool.registry';
import type { ToolAgentScope, ToolDefinition } from '../tools/tool.types';
import { ToolsService } from '../tools/tools.service';
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
import { MCP_SERVER_INFO, McpScope, RESOURCE_NOT_FOUND } from './mcp.types';

/**
 * Builds the MCP server of one request: the data tools as tools, objects as resources, agents as
 * prompts, all limited to what the scope (key, and agent if any) may use. Tool calls go through
 * ToolsService, the REST tool route's own path: registry, middleware, READ ONLY transaction.
 */
@Injectable()
export class McpServerFactory {
  /** Only used for elicitation, which this server never asks for; one instance instead of an Ajv per request. */
  private readonly validator = new AjvJsonSchemaValidator();

  constructor(
    private readonly registry: ToolRegistry,
    private readonly tools: ToolsService,
    private readonly agents: AgentService,
    private readonly access: AccessService,
  ) {}

  create(scope: McpScope, instructions?: string): Server {
    const server = new Server(MCP_SERVER_INFO, {
      capabilities: { tools: {}, resources: {}, prompts: {} },
      instructions,
      jsonSchemaValidator: this.validator,
    });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.toolsOf(scope).map(toMcpTool) }));
    server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
      this.callTool(scope, request.params.name, request.params.arguments ?? {}, extra.signal),
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

  /** The tools agents are offered (platform tools such as ask_user need a chat); an agent's own only. */
  private toolsOf(scope: McpScope): ToolDefinition[] {
    const offered = this.registry.list({ scope: 'agent' });
    const agent = scope.agent;
    return agent ? offered.filter((tool) => agent.tools.includes(tool.name)) : offered;
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
  ): Promise<CallToolResult> {
    const agent: ToolAgentScope | undefined = scope.agent && {
      name: scope.agent.name,
      tools: this.toolsOf(scope).map((tool) => tool.name),
      allowedObjects: scope.agent.allowedObjects,
    };
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
