import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import { ClientSignal } from '../common/fastify-reply';
import { ExecuteToolDto, ExecuteToolResponse, ToolListResponse } from './tools.dto';
import { ToolsService } from './tools.service';

@ApiTags('tools')
@Controller('api/v1/ai/tools')
export class ToolsController {
  constructor(private readonly tools: ToolsService) {}

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'List the tools and the JSON Schemas of their arguments', type: ToolListResponse })
  list(): ToolListResponse {
    return this.tools.list();
  }

  @Post(':name/execute')
  @Roles('admin', 'member')
  @HttpCode(200)
  @ApiRoute({
    summary: 'Run a tool directly, as the caller',
    description: 'A failing tool is still a 200: isError is true and result holds { error: { code, message } }.',
    type: ExecuteToolResponse,
    errors: [...BODY_ERRORS, 'tool_not_found'],
  })
  execute(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Body() dto: ExecuteToolDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<ExecuteToolResponse> {
    return this.tools.execute(caller, name, dto, signal);
  }
}
