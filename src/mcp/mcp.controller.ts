import { Body, Controller, Delete, Get, Header, HttpCode, Param, Post, Req, Res, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { hijack } from '../common/fastify-reply';
import { McpOriginGuard } from './mcp-origin.guard';
import { McpService } from './mcp.service';
import type { JsonRpcErrorBody } from './mcp.types';

const PATHS = ['', 'agents/:agentName'];

const METHOD_NOT_ALLOWED: JsonRpcErrorBody = {
  jsonrpc: '2.0',
  error: { code: -32000, message: 'Method not allowed.' },
  id: null,
};

/**
 * MCP over Streamable HTTP: `/mcp` serves every data tool the key may use, `/mcp/agents/:agentName`
 * one agent's tools and objects. JSON-RPC on one URL is described by the protocol and the README,
 * not by the OpenAPI document.
 */
@ApiExcludeController()
@Controller('mcp')
@UseGuards(McpOriginGuard)
export class McpController {
  constructor(private readonly mcp: McpService) {}

  // Not `passthrough`: the transport writes the response itself, on the raw response.
  @Post()
  @Roles('admin', 'member')
  serve(
    @Caller() caller: Caller,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.mcp.handle(caller, undefined, body, request.raw, () => hijack(reply));
  }

  @Post('agents/:agentName')
  @Roles('admin', 'member')
  serveAgent(
    @Caller() caller: Caller,
    @Param('agentName') agentName: string,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    return this.mcp.handle(caller, agentName, body, request.raw, () => hijack(reply));
  }

  /**
   * The server sends nothing unasked (a write's confirmation goes out on its call's own stream), so there is no
   * event stream to open (GET); and a session lives in its signed id, not on the server, so there is none to end
   * (DELETE: 405, which the transport lets a server answer).
   */
  @Get(PATHS)
  @Roles('admin', 'member')
  @HttpCode(405)
  @Header('allow', 'POST')
  stream(): JsonRpcErrorBody {
    return METHOD_NOT_ALLOWED;
  }

  @Delete(PATHS)
  @Roles('admin', 'member')
  @HttpCode(405)
  @Header('allow', 'POST')
  endSession(): JsonRpcErrorBody {
    return METHOD_NOT_ALLOWED;
  }
}
