import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import {
  CreateFieldDto,
  CreateObjectDto,
  FieldResponse,
  ObjectListResponse,
  ObjectResponse,
  UpdateFieldDto,
  UpdateObjectDto,
} from './metadata.dto';
import { MetadataService } from './metadata.service';

@ApiTags('objects')
@ApiBearerAuth()
@Controller('api/v1/objects')
export class MetadataController {
  constructor(private readonly metadata: MetadataService) {}

  @Get()
  @Roles('admin', 'member')
  list(): Promise<ObjectListResponse> {
    return this.metadata.listObjectsForApi();
  }

  @Get(':name')
  @Roles('admin', 'member')
  get(@Param('name') name: string): Promise<ObjectResponse> {
    return this.metadata.describeObject(name);
  }

  @Post()
  @Roles('admin')
  create(@Body() dto: CreateObjectDto): Promise<ObjectResponse> {
    return this.metadata.createObject(dto);
  }

  @Patch(':name')
  @Roles('admin')
  update(@Param('name') name: string, @Body() dto: UpdateObjectDto): Promise<ObjectResponse> {
    return this.metadata.updateObject(name, dto);
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  async delete(@Param('name') name: string): Promise<void> {
    await this.metadata.deleteObject(name);
  }

  @Post(':name/fields')
  @Roles('admin')
  addField(@Param('name') name: string, @Body() dto: CreateFieldDto): Promise<FieldResponse> {
    return this.metadata.addField(name, dto);
  }

  @Patch(':name/fields/:field')
  @Roles('admin')
  updateField(@Param('name') name: string, @Param('field') field: string, @Body() dto: UpdateFieldDto): Promise<FieldResponse> {
    return this.metadata.updateField(name, field, dto);
  }

  @Delete(':name/fields/:field')
  @Roles('admin')
  @HttpCode(204)
  async deleteField(@Param('name') name: string, @Param('field') field: string): Promise<void> {
    await this.metadata.deleteField(name, field);
  }
}
