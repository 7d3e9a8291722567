import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Caller, Roles } from '../auth/auth.decorators';
import { AgentListResponse, AgentResponse, AgentSpecDto } from './agent.dto';
import { toAgentResponse, toAgentSummary } from './agent.mapper';
import { AgentService } from './agent.service';

@ApiTags('agents')
@ApiBearerAuth()
@Controller('api/v1/ai/agents')
export class AgentController {
  constructor(private readonly agents: AgentService) {}

  /** Only the agents the caller may use. */
  @Get()
  @Roles('admin', 'member')
  async list(@Caller() caller: Caller): Promise<AgentListResponse> {
    return { agents: (await this.agents.listFor(caller)).map(toAgentSummary) };
  }

  @Get(':name')
  @Roles('admin')
  async get(@Param('name') name: string): Promise<AgentResponse> {
    return toAgentResponse(await this.agents.get(name));
  }

  @Post()
  @Roles('admin')
  async create(@Body() dto: AgentSpecDto): Promise<AgentResponse> {
    return toAgentResponse(await this.agents.create(dto));
  }

  @Put(':name')
  @Roles('admin')
  async replace(@Param('name') name: string, @Body() dto: AgentSpecDto): Promise<AgentResponse> {
    return toAgentResponse(await this.agents.replace(name, dto));
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  async delete(@Param('name') name: string): Promise<void> {
    await this.agents.delete(name);
  }
}
