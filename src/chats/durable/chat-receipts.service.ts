import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { isDeepStrictEqual } from 'node:util';
import type { Caller } from '../../auth/caller';
import { DomainError } from '../../common/domain-error';
import { AccessService } from '../../governance/access.service';
import type { FigureReceipt } from '../../runtime/grounding';
import { resultRows } from '../../tools/result-refs';
import { ToolRegistry } from '../../tools/tool.registry';
import { ToolsService } from '../../tools/tools.service';
import { visibleTo } from './chat-message.mapper';
import { ChatRepository } from './chat.repository';
import type { ReceiptReplayResponse } from './chat.dto';
import { ChatService } from './chat.service';
import type { ChatRow } from './chat.types';

/**
 * Receipts a person can replay: a stored data call run again under the caller's access as it is now, and each figure
 * an answer took from it by reference compared with the same cell today ("then 451, now 453").
 */
@Injectable()
export class ChatReceiptsService {
  constructor(
    private readonly em: EntityManager,
    private readonly chats: ChatService,
    private readonly repo: ChatRepository,
    private readonly access: AccessService,
    private readonly registry: ToolRegistry,
    private readonly tools: ToolsService,
  ) {}

  /**
   * A call whose result the caller may not see (produced under other access, this key's before its policies changed
   * included), that failed, or that holds no data rows is not found: a replay shows nothing the caller could not see.
   */
  async replay(caller: Caller, chatId: string, toolCallId: string, signal: AbortSignal): Promise<ReceiptReplayResponse> {
    const em = this.em.fork();
    const chat = await this.chats.get(caller, chatId, em);
    return this.replayIn(em, caller, chat, toolCallId, signal);
  }

  /** As `replay`, in a chat already found for the caller (by its id, or by a client's id on the useChat door). */
  async replayIn(
    em: EntityManager,
    caller: Caller,
    chat: ChatRow,
    toolCallId: string,
    signal: AbortSignal,
  ): Promise<ReceiptReplayResponse> {
    const rows = visibleTo(await this.repo.messagesAboutCall(em, chat.id, toolCallId), await this.access.fingerprint(caller));
    let call: { name: string; input: unknown } | undefined;
    let stored = false;
    const receipts: FigureReceipt[] = [];
    for (const row of rows) {
      for (const part of row.parts) {
        if (part.type === 'tool-call' && part.toolCallId === toolCallId) call = { name: part.toolName, input: part.input };
        if (part.type === 'tool-result' && part.toolCallId === toolCallId) stored = !part.withheld && !part.isError;
      }
      for (const receipt of row.metadata?.grounding?.receipts ?? [])
        if (receipt.toolCallId === toolCallId) receipts.push(receipt);
    }
    const tool = call && this.registry.get(call.name);
    if (!call || !stored || tool?.holds !== 'rows' || typeof call.input !== 'object' || call.input === null) {
      throw new DomainError('receipt_not_found', `No data result of call "${toolCallId.slice(0, 100)}" in this chat`);
    }
    const ranAt = new Date().toISOString();
    const rerun = await this.tools.execute(caller, call.name, { arguments: call.input as Record<string, unknown> }, signal);
    if (rerun.isError) {
      // The call no longer runs for this caller (an object or field it may no longer read): nothing to compare with.
      throw new DomainError('receipt_not_found', `Call "${toolCallId.slice(0, 100)}" no longer runs under this key's access`);
    }
    const now = resultRows(rerun.result);
    const changed: ReceiptReplayResponse['changed'] = [];
    let unchanged = 0;
    for (const receipt of receipts) {
      const cell = now[(receipt.row ?? 1) - 1]?.[receipt.column] ?? null;
      if (isDeepStrictEqual(cell, receipt.value)) unchanged++;
      else changed.push({ ref: receipt.ref, then: receipt.value, now: cell });
    }
    return { toolCallId, ranAt, changed, unchanged };
  }
}
