import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Roles } from './auth.decorators';
import { ApiKeyListResponse, CreateApiKeyDto, CreatedApiKeyResponse } from './api-key.dto';
import { ApiKeyService } from './api-key.service';

@ApiTags('api-keys')
@ApiBearerAuth()
@Controller('api/v1/api-keys')
export class ApiKeyController {
  constructor(private readonly keys: ApiKeyService) {}

  @Post()
  @Roles('admin')
  create(@Body() dto: CreateApiKeyDto): Promise<CreatedApiKeyResponse> {
    return this.keys.create(dto);
  }

  @Get()
  @Roles('admin')
  list(): Promise<ApiKeyListResponse> {
    return this.keys.list();
  }

  @Delete(':id')
  @Roles('admin')
  @HttpCode(204)
  async revoke(@Param('id') id: string): Promise<void> {
    await this.keys.revoke(id);
  }
}
