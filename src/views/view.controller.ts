import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute, BODY_ERRORS, WHERE_ERRORS } from '../common/api-route.decorator';
import type { ErrorCode } from '../common/error-codes';
import { CreateViewDto, ReplaceViewDto, ViewListResponse, ViewResponse } from './view.dto';
import { ViewService } from './view.service';

/** Errors of a view's parts, each checked by the compiler that runs it; the message and details.part name the part. */
const VIEW_ERRORS: ErrorCode[] = [...WHERE_ERRORS, 'invalid_order_by', 'invalid_fields', 'invalid_group_by'];

@ApiTags('views')
@Controller('api/v1/objects/:name/views')
export class ViewController {
  constructor(private readonly views: ViewService) {}

  @Get()
  @Roles('admin', 'member')
  @ApiRoute({
    summary:
      "The object's views the caller may use: its key's own and the shared ones, each only when every field it uses is visible to the caller",
    type: ViewListResponse,
    errors: ['object_not_found'],
  })
  list(@Caller() caller: Caller, @Param('name') name: string): Promise<ViewListResponse> {
    return this.views.list(caller, name);
  }

  @Post()
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Save a view: a filter, an order, visible fields and a grouping (shared: admins only)',
    status: 201,
    type: ViewResponse,
    errors: [...BODY_ERRORS, 'object_not_found', 'invalid_name', ...VIEW_ERRORS, 'view_exists'],
  })
  create(@Caller() caller: Caller, @Param('name') name: string, @Body() dto: CreateViewDto): Promise<ViewResponse> {
    return this.views.create(caller, name, dto);
  }

  @Get(':view')
  @Roles('admin', 'member')
  @ApiRoute({
    summary:
      "Read a view (the key's own of that name, else the shared one); one using a field hidden from the caller is view_not_found, like an unknown one",
    type: ViewResponse,
    errors: ['object_not_found', 'view_not_found'],
  })
  get(@Caller() caller: Caller, @Param('name') name: string, @Param('view') view: string): Promise<ViewResponse> {
    return this.views.get(caller, name, view);
  }

  @Put(':view')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: "Replace a view (members: their key's own; admins: also shared ones)",
    type: ViewResponse,
    errors: [...BODY_ERRORS, 'object_not_found', 'view_not_found', ...VIEW_ERRORS, 'view_exists'],
  })
  replace(
    @Caller() caller: Caller,
    @Param('name') name: string,
    @Param('view') view: string,
    @Body() dto: ReplaceViewDto,
  ): Promise<ViewResponse> {
    return this.views.replace(caller, name, view, dto);
  }

  @Delete(':view')
  @Roles('admin', 'member')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Delete a view (members: their own; admins: also shared ones)',
    status: 204,
    errors: ['object_not_found', 'view_not_found'],
  })
  async delete(@Caller() caller: Caller, @Param('name') name: string, @Param('view') view: string): Promise<void> {
    await this.views.delete(caller, name, view);
  }
}
