import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Caller, Roles } from '../auth/auth.decorators';
import { ClientSignal } from '../common/fastify-reply';
import { ExecuteToolDto, ExecuteToolResponse, ToolListResponse } from './tools.dto';
import { ToolsService } from './tools.service';

@ApiTags('tools')
@ApiBearerAuth()
@Controller('api/v1/ai/tools')
export class ToolsController {
  constructor(private readonly tools: ToolsService) {}

  @Get()
  @Roles('admin', 'member')
  list(): ToolListResponse {
    return this.tools.list();
  }

  @Post(':name/execute')
  @Roles('admin', 'member')
  @HttpCode(200)
  execute(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Body() dto: ExecuteToolDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<ExecuteToolResponse> {
    return this.tools.execute(caller, name, dto, signal);
  }
}
