import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import {
  CreateFieldDto, CreateObjectDto, FieldResponse, ObjectListResponse, ObjectResponse, UpdateFieldDto, UpdateObjectDto,
} from './metadata.dto';
import { toFieldResponse, toObjectResponse } from './metadata.mapper';
import { MetadataService } from './metadata.service';

@ApiTags('objects')
@ApiBearerAuth()
@Controller('api/v1/objects')
export class MetadataController {
  constructor(private readonly metadata: MetadataService) {}

  @Get()
  @Roles('admin', 'member')
  async list(): Promise<ObjectListResponse> {
    return { objects: await this.metadata.listObjects() };
  }

  @Get(':name')
  @Roles('admin', 'member')
  async get(@Param('name') name: string): Promise<ObjectResponse> {
    return toObjectResponse(await this.metadata.getObject(name));
  }

  @Post()
  @Roles('admin')
  async create(@Body() dto: CreateObjectDto): Promise<ObjectResponse> {
    return toObjectResponse(await this.metadata.createObject(dto));
  }

  @Patch(':name')
  @Roles('admin')
  async update(@Param('name') name: string, @Body() dto: UpdateObjectDto): Promise<ObjectResponse> {
    return toObjectResponse(await this.metadata.updateObject(name, dto));
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  async delete(@Param('name') name: string): Promise<void> {
    await this.metadata.deleteObject(name);
  }

  @Post(':name/fields')
  @Roles('admin')
  async addField(@Param('name') name: string, @Body() dto: CreateFieldDto): Promise<FieldResponse> {
    return toFieldResponse(await this.metadata.addField(name, dto));
  }

  @Patch(':name/fields/:field')
  @Roles('admin')
  async updateField(@Param('name') name: string, @Param('field') field: string, @Body() dto: UpdateFieldDto): Promise<FieldResponse> {
    return toFieldResponse(await this.metadata.updateField(name, field, dto));
  }

  @Delete(':name/fields/:field')
  @Roles('admin')
  @HttpCode(204)
  async deleteField(@Param('name') name: string, @Param('field') field: string): Promise<void> {
    await this.metadata.deleteField(name, field);
  }
}
