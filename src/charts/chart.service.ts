import { Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { ChatService } from '../chats/durable/chat.service';
import { renderChartSvg } from '../tools/chart-tools/chart-svg';
import { chartSpecOf, type VisualizeResult } from '../tools/chart-tools/visualize.tool';

/** What a model's tool call id can be: printable, at most 200 characters. Anything else is not looked up. */
const CALL_ID = /^[\p{L}\p{N}\p{P}\p{S} ]{1,200}$/u;

/** Charts of durable chats, rendered from the visualize results the chats stored. */
@Injectable()
export class ChartService {
  constructor(private readonly chats: ChatService) {}

  /**
   * The chart a visualize call of the caller's chat drew, as SVG. Hidden (404) like its data: when the
   * chart's result, or the result it draws from, was produced under other access than the caller's.
   */
  async svg(caller: Caller, chatId: string, toolCallId: string): Promise<string> {
    await this.chats.get(caller, chatId);
    const chart = CALL_ID.test(toolCallId) ? await this.chats.toolResult(caller, chatId, toolCallId) : undefined;
    const spec = chart && chartSpecOf(chart.toolName, chart.output);
    const source = spec && (chart.output as Partial<VisualizeResult>).source;
    // The chart's data are the source's rows: the source's result (stored before the chart) must be visible too.
    if (!spec || typeof source !== 'string' || !(await this.chats.toolResult(caller, chatId, source, chart.messageId))) {
      throw new DomainError('chart_not_found', `Chat "${chatId}" has no chart "${toolCallId.slice(0, 200)}"`);
    }
    return renderChartSvg(spec);
  }
}
