import { Controller, Get, Param } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute } from '../common/api-route.decorator';
import { ObjectListResponse, ObjectResponse } from '../metadata/metadata.dto';
import { toObjectResponse } from '../metadata/metadata.mapper';
import { AccessService } from './access.service';

/**
 * Metadata's read routes: the objects as the caller may see them (only those it may read, only their
 * visible fields). Here rather than in metadata/ because what a caller sees is governance's answer.
 */
@ApiTags('objects')
@Controller('api/v1/objects')
export class ObjectCatalogController {
  constructor(private readonly access: AccessService) {}

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({ summary: 'List the objects the caller may read', type: ObjectListResponse, operationId: 'MetadataController_list' })
  async list(@Caller() caller: Caller): Promise<ObjectListResponse> {
    return { objects: await this.access.visibleObjects(caller) };
  }

  @Get(':name')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Describe an object and the fields the caller may see',
    type: ObjectResponse,
    errors: ['object_not_found'],
    operationId: 'MetadataController_get',
  })
  async get(@Caller() caller: Caller, @Param('name') name: string): Promise<ObjectResponse> {
    return toObjectResponse(await this.access.describe(caller, name));
  }
}
