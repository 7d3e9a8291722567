import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
import { ClientSignal } from '../common/fastify-reply';
import { DataService } from './data.service';
import { AggregateDto, AggregateResponse, RecordListResponse, RecordsQueryDto } from './records.dto';
import { RecordsService } from './records.service';

const RECORD_BODY = { schema: { type: 'object', additionalProperties: true, example: { name: 'Acme', stage: 'won' } } };

@ApiTags('records')
@ApiBearerAuth()
@Controller('api/v1/objects/:name')
export class RecordsController {
  constructor(
    private readonly records: RecordsService,
    private readonly data: DataService,
  ) {}

  @Get('records')
  @Roles('admin', 'member')
  list(
    @Param('name') name: string,
    @Query() query: RecordsQueryDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<RecordListResponse> {
    return this.records.list(name, query, signal);
  }

  @Post('records')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  create(
    @Param('name') name: string,
    @Body() body: unknown,
    @ClientSignal() signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    return this.data.insert(name, body, { signal });
  }

  @Get('records/:id')
  @Roles('admin', 'member')
  get(
    @Param('name') name: string,
    @Param('id') id: string,
    @ClientSignal() signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    return this.data.findOne(name, id, undefined, { signal });
  }

  @Patch('records/:id')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  update(
    @Param('name') name: string,
    @Param('id') id: string,
    @Body() body: unknown,
    @ClientSignal() signal: AbortSignal,
  ): Promise<Record<string, unknown>> {
    return this.data.update(name, id, body, { signal });
  }

  @Delete('records/:id')
  @Roles('admin', 'member')
  @HttpCode(204)
  async delete(@Param('name') name: string, @Param('id') id: string, @ClientSignal() signal: AbortSignal): Promise<void> {
    await this.data.delete(name, id, { signal });
  }

  @Post('aggregate')
  @Roles('admin', 'member')
  @HttpCode(200)
  aggregate(
    @Param('name') name: string,
    @Body() dto: AggregateDto,
    @ClientSignal() signal: AbortSignal,
  ): Promise<AggregateResponse> {
    return this.records.aggregate(name, dto, signal);
  }
}
