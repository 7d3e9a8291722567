import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import { Roles } from './auth.decorators';
import { Caller } from './caller';
import { ApiKeyListResponse, ApiKeyResponse, CreateApiKeyDto, CreatedApiKeyResponse, UpdateApiKeyDto } from './api-key.dto';
import { ApiKeyService } from './api-key.service';

@ApiTags('api-keys')
@Controller('api/v1/api-keys')
export class ApiKeyController {
  constructor(private readonly keys: ApiKeyService) {}

  @Post()
  @Roles('admin')
  @ApiRoute({
    summary: 'Create an API key; its secret is in this response only',
    status: 201,
    type: CreatedApiKeyResponse,
    errors: [...BODY_ERRORS, 'invalid_policy'],
  })
  create(@Caller() caller: Caller, @Body() dto: CreateApiKeyDto): Promise<CreatedApiKeyResponse> {
    return this.keys.create(dto, caller);
  }

  @Get()
  @Roles('admin')
  @ApiRoute({ summary: 'List API keys (never their secrets)', type: ApiKeyListResponse })
  list(): Promise<ApiKeyListResponse> {
    return this.keys.list();
  }

  @Patch(':id')
  @Roles('admin')
  @ApiRoute({
    summary: "Change a key's subject, access policies, attributes or token quota; the key runs under them at once",
    type: ApiKeyResponse,
    errors: [...BODY_ERRORS, 'invalid_policy', 'api_key_not_found'],
  })
  update(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: UpdateApiKeyDto): Promise<ApiKeyResponse> {
    return this.keys.update(id, dto, caller);
  }

  @Delete(':id')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Revoke an API key; its open event streams close',
    status: 204,
    errors: ['api_key_not_found', 'last_admin_key'],
  })
  async revoke(@Caller() caller: Caller, @Param('id') id: string): Promise<void> {
    await this.keys.revoke(id, caller);
  }
}
