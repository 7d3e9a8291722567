import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators';
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
  list(@Param('name') name: string, @Query() query: RecordsQueryDto): Promise<RecordListResponse> {
    return this.records.list(name, query);
  }

  @Post('records')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  create(@Param('name') name: string, @Body() body: unknown): Promise<Record<string, unknown>> {
    return this.data.insert(name, body);
  }

  @Get('records/:id')
  @Roles('admin', 'member')
  get(@Param('name') name: string, @Param('id') id: string): Promise<Record<string, unknown>> {
    return this.data.findOne(name, id);
  }

  @Patch('records/:id')
  @Roles('admin', 'member')
  @ApiBody(RECORD_BODY)
  update(@Param('name') name: string, @Param('id') id: string, @Body() body: unknown): Promise<Record<string, unknown>> {
    return this.data.update(name, id, body);
  }

  @Delete('records/:id')
  @Roles('admin', 'member')
  @HttpCode(204)
  async delete(@Param('name') name: string, @Param('id') id: string): Promise<void> {
    await this.data.delete(name, id);
  }

  @Post('aggregate')
  @Roles('admin', 'member')
  @HttpCode(200)
  aggregate(@Param('name') name: string, @Body() dto: AggregateDto): Promise<AggregateResponse> {
    return this.records.aggregate(name, dto);
  }
}
