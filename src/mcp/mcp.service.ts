import { Injectable } from '@nestjs/common';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AgentService } from '../agents/agent.service';
import type { AgentSpec } from '../agents/agent.types';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { McpConfirmations } from './mcp-confirmations.service';
import { McpServerFactory } from './mcp-server.factory';
import { declaresFormElicitation, McpSessions, type McpSession } from './mcp-sessions';
import { SESSION_NOT_FOUND, type McpScope } from './mcp.types';

/**
 * The MCP endpoint. Each POST gets a server and a Streamable HTTP transport of its own (the SDK's pattern
 * for servers without sessions), so any replica can answer any request. Sessions are kept by the client:
 * `initialize` hands out a signed session id (McpSessions) that says what the session may do, and a
 * request that carries one is served only when it verifies for the caller and the path.
 */
@Injectable()
export class McpService {
  constructor(
    private readonly servers: McpServerFactory,
    private readonly agents: AgentService,
    private readonly sessions: McpSessions,
    private readonly confirmations: McpConfirmations,
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
    const agent = agentName === undefined ? undefined : await this.agentFor(caller, agentName);
    const initialize = initializeOf(body);
    let issued: string | undefined;
    let session: McpSession | undefined;
    if (initialize) {
      issued = this.sessions.issue(caller, agent?.name ?? null, declaresFormElicitation(initialize.capabilities));
      session = this.sessions.verify(issued, caller, agent?.name ?? null);
    } else {
      const id = request.headers['mcp-session-id'];
      if (typeof id === 'string') {
        session = this.sessions.verify(id, caller, agent?.name ?? null);
        // Forged, another key's, or another path's: unknown here, and nothing in the body is done.
        if (!session) return void open().writeHead(404, JSON_HEADERS).end(JSON.stringify(SESSION_NOT_FOUND));
      }
    }
    const scope: McpScope = { caller, agent, session };
    if (session) {
      // A cancelled call ends the confirmation it waits for, on whichever replica; the SDK then answers the notification.
      await this.confirmations.cancel(caller, session, cancelledCalls(body));
      // Answers to this server's elicitations go to the call that waits for them, on whichever replica.
      const { responses, rest } = splitResponses(body);
      if (responses.length) {
        await this.confirmations.deliver(caller, session, responses);
        if (rest === undefined) return void open().writeHead(202).end();
        body = rest;
      }
    }
    // The object list goes into `initialize` only, not into every tool call.
    const instructions = initialize ? await this.servers.instructions(scope) : undefined;
    // JSON responses rather than an event stream, except for a write call: its confirmation goes out on that stream.
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: issued === undefined ? undefined : () => issued,
      enableJsonResponse: !this.servers.confirms(scope, body),
    });
    const server = this.servers.create(scope, instructions, (message, relatedRequestId) =>
      transport.send(message, { relatedRequestId }),
    );
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

const JSON_HEADERS = { 'content-type': 'application/json' };

/** The JSON-RPC messages of a body: a batch's, or the one message. */
function messagesOf(body: unknown): unknown[] {
  return Array.isArray(body) ? body : [body];
}

/** The params of the body's `initialize` request, if it holds one (by its method only: the transport validates it). */
function initializeOf(body: unknown): Record<string, unknown> | undefined {
  const request = messagesOf(body).find((message) => isPlainObject(message) && message.method === 'initialize');
  if (!isPlainObject(request)) return undefined;
  return isPlainObject(request.params) ? request.params : {};
}

/** The request ids of the body's `notifications/cancelled` (of its first 100 messages; malformed ones are left to the transport). */
function cancelledCalls(body: unknown): RequestId[] {
  const ids: RequestId[] = [];
  for (const message of messagesOf(body).slice(0, 100)) {
    if (!isPlainObject(message) || message.method !== 'notifications/cancelled' || !isPlainObject(message.params)) continue;
    const id = message.params.requestId;
    if (typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id))) ids.push(id);
  }
  return ids;
}

/** The JSON-RPC responses of a body (messages with an id and no method), and the rest (undefined when none is left). */
function splitResponses(body: unknown): { responses: Record<string, unknown>[]; rest: unknown } {
  const isResponse = (message: unknown): message is Record<string, unknown> =>
    isPlainObject(message) &&
    message.jsonrpc === '2.0' &&
    !('method' in message) &&
    'id' in message &&
    ('result' in message || 'error' in message);
  if (!Array.isArray(body)) return isResponse(body) ? { responses: [body], rest: undefined } : { responses: [], rest: body };
  const responses = body.filter(isResponse);
  const rest = body.filter((message) => !isResponse(message));
  return { responses, rest: rest.length ? (responses.length ? rest : body) : undefined };
}
