import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Roles } from './auth.decorators';
import { ApiKeyListResponse, CreateApiKeyDto, CreatedApiKeyResponse, toApiKeyResponse } from './api-key.dto';
import { ApiKeyService } from './api-key.service';

@ApiTags('api-keys')
@ApiBearerAuth()
@Controller('api/v1/api-keys')
export class ApiKeyController {
  constructor(private readonly keys: ApiKeyService) {}

  @Post()
  @Roles('admin')
  async create(@Body() dto: CreateApiKeyDto): Promise<CreatedApiKeyResponse> {
    const { key, secret } = await this.keys.create(dto);
    return { ...toApiKeyResponse(key), secret };
  }

  @Get()
  @Roles('admin')
  async list(): Promise<ApiKeyListResponse> {
    return { apiKeys: (await this.keys.list()).map(toApiKeyResponse) };
  }

  @Delete(':id')
  @Roles('admin')
  @HttpCode(204)
  async revoke(@Param('id') id: string): Promise<void> {
    await this.keys.revoke(id);
  }
}
