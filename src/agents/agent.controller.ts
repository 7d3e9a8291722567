import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import { AgentListResponse, AgentResponse, AgentSpecDto } from './agent.dto';
import { AgentService } from './agent.service';

@ApiTags('agents')
@Controller('api/v1/ai/agents')
export class AgentController {
  constructor(private readonly agents: AgentService) {}

  /** Only the agents the caller may use. */
  @Get()
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'List the agents the caller may use', type: AgentListResponse })
  list(@Caller() caller: Caller): Promise<AgentListResponse> {
    return this.agents.listFor(caller);
  }

  @Get(':name')
  @Roles('admin')
  @ApiRoute({ summary: "Read an agent's whole spec", type: AgentResponse, errors: ['agent_not_found'] })
  get(@Param('name') name: string): Promise<AgentResponse> {
    return this.agents.get(name);
  }

  @Post()
  @Roles('admin')
  @ApiRoute({
    summary: 'Create an agent',
    status: 201,
    type: AgentResponse,
    errors: [...BODY_ERRORS, 'unknown_tool', 'agent_exists'],
  })
  create(@Caller() caller: Caller, @Body() dto: AgentSpecDto): Promise<AgentResponse> {
    return this.agents.create(dto, caller);
  }

  @Put(':name')
  @Roles('admin')
  @ApiRoute({
    summary: "Replace an agent's whole spec",
    type: AgentResponse,
    errors: [...BODY_ERRORS, 'unknown_tool', 'agent_not_found'],
  })
  replace(@Caller() caller: Caller, @Param('name') name: string, @Body() dto: AgentSpecDto): Promise<AgentResponse> {
    return this.agents.replace(name, dto, caller);
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({ summary: 'Delete an agent', status: 204, errors: ['agent_not_found'] })
  async delete(@Caller() caller: Caller, @Param('name') name: string): Promise<void> {
    await this.agents.delete(name, caller);
  }
}
