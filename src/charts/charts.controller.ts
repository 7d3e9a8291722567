import { Controller, Get, Param, Res } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Roles } from '../auth/auth.decorators';
import { Caller } from '../auth/caller';
import { ApiRoute } from '../common/api-route.decorator';
import { ChartService } from './chart.service';

@ApiTags('charts')
@Controller('api/v1/chats')
export class ChartsController {
  constructor(private readonly charts: ChartService) {}

  @Get(':id/charts/:toolCallId.svg')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Render a chart of a chat as SVG',
    description:
      'The chart a `visualize` call of the chat drew (its tool call id), rendered on the server from the stored ' +
      "Vega-Lite spec. 404 for another owner's chat, an unknown call id, a call that drew no chart, and a chart whose " +
      'result, or the result it draws, was produced under other access than the caller has.',
    responseDescription: 'The chart',
    svg: 'An SVG document (`<svg>` root)',
    errors: ['chat_not_found', 'chart_not_found'],
  })
  async svg(
    @Caller() caller: Caller,
    @Param('id') id: string,
    @Param('toolCallId') toolCallId: string,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<string> {
    const svg = await this.charts.svg(caller, id, toolCallId);
    // Opened on its own, an SVG is a document of this origin: it may run nothing and load nothing.
    void reply.header('content-type', 'image/svg+xml; charset=utf-8');
    void reply.header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'");
    return svg;
  }
}
