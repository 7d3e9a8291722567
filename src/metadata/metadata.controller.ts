import { Body, Controller, Delete, HttpCode, Param, Patch, Post } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import type { ErrorCode } from '../common/error-codes';
import { CreateFieldDto, CreateObjectDto, FieldResponse, ObjectResponse, UpdateFieldDto, UpdateObjectDto } from './metadata.dto';
import { MetadataService } from './metadata.service';

/** What a field definition may be refused for (a new field, or a new object's fields). */
const FIELD_ERRORS: ErrorCode[] = [
  'invalid_name',
  'reserved_name',
  'invalid_field_type',
  'missing_options',
  'invalid_options',
  'unexpected_options',
  'missing_reference',
  'unknown_reference',
  'unexpected_reference',
  'invalid_unique',
  'too_many_fields',
];

@ApiTags('objects')
@Controller('api/v1/objects')
export class MetadataController {
  constructor(private readonly metadata: MetadataService) {}

  @Post()
  @Roles('admin')
  @ApiRoute({
    summary: 'Create an object and its table',
    status: 201,
    type: ObjectResponse,
    errors: [...BODY_ERRORS, ...FIELD_ERRORS, 'duplicate_field', 'object_exists'],
  })
  create(@Caller() caller: Caller, @Body() dto: CreateObjectDto): Promise<ObjectResponse> {
    return this.metadata.createObject(dto, caller);
  }

  @Patch(':name')
  @Roles('admin')
  @ApiRoute({
    summary: "Change an object's label or description",
    type: ObjectResponse,
    errors: [...BODY_ERRORS, 'object_not_found'],
  })
  update(@Caller() caller: Caller, @Param('name') name: string, @Body() dto: UpdateObjectDto): Promise<ObjectResponse> {
    return this.metadata.updateObject(name, dto, caller);
  }

  @Delete(':name')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Delete an object, its table and its records',
    status: 204,
    errors: ['object_not_found', 'object_in_use', 'object_referenced'],
  })
  async delete(@Caller() caller: Caller, @Param('name') name: string): Promise<void> {
    await this.metadata.deleteObject(name, caller);
  }

  @Post(':name/fields')
  @Roles('admin')
  @ApiRoute({
    summary: 'Add a field (a column) to an object',
    status: 201,
    type: FieldResponse,
    errors: [...BODY_ERRORS, ...FIELD_ERRORS, 'object_not_found', 'field_exists', 'object_not_empty'],
  })
  addField(@Caller() caller: Caller, @Param('name') name: string, @Body() dto: CreateFieldDto): Promise<FieldResponse> {
    return this.metadata.addField(name, dto, caller);
  }

  @Patch(':name/fields/:field')
  @Roles('admin')
  @ApiRoute({
    summary: 'Change a field: label, description, required, unique, indexed or options',
    type: FieldResponse,
    errors: [
      ...BODY_ERRORS,
      'object_not_found',
      'field_not_found',
      'missing_options',
      'invalid_options',
      'unexpected_options',
      'invalid_unique',
      'options_in_use',
      'field_has_empty_values',
      'field_values_too_long',
      'unique_violation',
    ],
  })
  updateField(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('field') field: string,
    @Body() dto: UpdateFieldDto,
  ): Promise<FieldResponse> {
    return this.metadata.updateField(name, field, dto, caller);
  }

  @Delete(':name/fields/:field')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Delete a field and its column',
    status: 204,
    errors: ['object_not_found', 'field_not_found', 'field_in_use'],
  })
  async deleteField(@Caller() caller: Caller, @Param('name') name: string, @Param('field') field: string): Promise<void> {
    await this.metadata.deleteField(name, field, caller);
  }
}
