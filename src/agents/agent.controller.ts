import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Caller, Roles } from '../auth/auth.decorators';
import { AgentListResponse, AgentResponse, AgentSpecDto } from './agent.dto';
import { AgentService } from './agent.service';

@ApiTags('agents')
@ApiBearerAuth()
@Controller('api/v1/ai/agents')
export class AgentController {
  constructor(private readonly agents: AgentService) {}

  /** Only the agents the caller may use. */
  @Get()
  @Roles('admin', 'member')
  list(@Caller() caller: Caller): Promise<AgentListResponse> {
    return this.agents.listFor(caller);
  }

  @Get(':name')
  @Roles('admin')
  get(@Param('name') name: string): Promise<AgentResponse> {
    return this.agents.get(name);
  }

  @Post()
  @Roles('admin')
  create(@Body() dto: AgentSpecDto): Promise<AgentResponse> {
    return this.agents.create(dto);
  }

  @Put(':name')
  @Roles('admin')
  replace(@Param('name') name: string, @Body() dto: AgentSpecDto): Promise<AgentResponse> {
    return this.agents.replace(name, dto);
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  async delete(@Param('name') name: string): Promise<void> {
    await this.agents.delete(name);
  }
}
