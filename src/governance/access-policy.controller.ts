import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS, WHERE_ERRORS } from '../common/api-route.decorator';
import { CreatePolicyDto, PolicyListResponse, PolicyResponse, ReplacePolicyDto } from './access-policy.dto';
import { AccessPolicyService } from './access-policy.service';

@ApiTags('policies')
@Controller('api/v1/policies')
export class AccessPolicyController {
  constructor(private readonly policies: AccessPolicyService) {}

  @Post()
  @Roles('admin')
  @ApiRoute({
    summary: 'Create an access policy (object grants, row filters, hidden fields)',
    status: 201,
    type: PolicyResponse,
    errors: [...BODY_ERRORS, 'invalid_policy', ...WHERE_ERRORS, 'policy_exists'],
  })
  create(@Caller() caller: Caller, @Body() dto: CreatePolicyDto): Promise<PolicyResponse> {
    return this.policies.create(dto, caller);
  }

  @Get()
  @Roles('admin')
  @ApiRoute({ summary: 'List access policies', type: PolicyListResponse })
  list(): Promise<PolicyListResponse> {
    return this.policies.list();
  }

  @Get(':name')
  @Roles('admin')
  @ApiRoute({ summary: 'Read an access policy', type: PolicyResponse, errors: ['policy_not_found'] })
  get(@Param('name') name: string): Promise<PolicyResponse> {
    return this.policies.get(name);
  }

  @Put(':name')
  @Roles('admin')
  @ApiRoute({
    summary: 'Replace an access policy; keys under it get the new grants at once',
    type: PolicyResponse,
    errors: [...BODY_ERRORS, 'invalid_policy', ...WHERE_ERRORS, 'policy_not_found'],
  })
  replace(@Caller() caller: Caller, @Param('name') name: string, @Body() dto: ReplacePolicyDto): Promise<PolicyResponse> {
    return this.policies.replace(name, dto, caller);
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Delete an access policy that no API key runs under',
    status: 204,
    errors: ['policy_not_found', 'policy_in_use'],
  })
  async delete(@Caller() caller: Caller, @Param('name') name: string): Promise<void> {
    await this.policies.delete(name, caller);
  }
}
